"""A judge as one of a run's scores, end to end (issue 34): ``nito_nb.run(..., score={"helpful":
judge(...)})`` over HTTP on the simulator, with a store; the same call again resumes both the
graded requests and the judge's, and ``rescore`` of a judged run sends nothing new. The
simulator is behind the counting server of tests/test_scores_judge.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_scores_judge import KEY, QUICK, Counting, server  # noqa: F401 (a fixture)

import nito_nb
from nito_nb import scores

PROMPTS = ["Rate this. score: 4", "Rate this. score: 2", "Rate this. score: 7"]


def judged(base_url: str, store: Path) -> nito_nb.Run:
    return nito_nb.run(
        PROMPTS,
        model=["sim/echo"],
        store=str(store),
        progress=False,
        base_url=base_url,
        api_key=KEY,
        sim=QUICK,
        score={
            "helpful": scores.judge(model="sim/judge", rubric="Is it helpful? 1-5", sim=QUICK),
            "asks": scores.contains("Rate"),
        },
    ).wait()


@pytest.mark.spawns  # a store: its events helper process
def test_a_judged_run_grades_resumes_and_rescores_without_sending_again(
    server: tuple[str, Counting],  # noqa: F811
    tmp_path: Path,
) -> None:
    base_url, counting = server
    before = dict(counting.models)
    run = judged(base_url, tmp_path / "store")
    sent = {m: counting.models[m] - before.get(m, 0) for m in ("sim/echo", "sim/judge")}
    assert sent == {"sim/echo": 3, "sim/judge": 3}
    results = run.results().set_index("row")
    assert results["score.helpful"].tolist()[:2] == [4.0, 2.0]
    # 7 is past the scale: an error row, never a guessed number
    assert results["score.helpful"].isna().tolist() == [False, False, True]
    assert "helpful" in str(results["score_errors"].iloc[2])
    assert results["score.asks"].tolist() == [True, True, True]
    assert set(run.score_runs) == {"helpful"}
    judge_run = run.score_runs["helpful"]
    assert len(judge_run.results()) == 3 and set(judge_run.results()["model"]) == {"sim/judge"}
    summary = run.summary()
    assert "score_cost" in summary.columns and summary.loc["sim/echo", "score.helpful"] == 3.0

    # The same call on the same store: nothing is sent again, the scores are read back.
    counted = dict(counting.models)
    again = judged(base_url, tmp_path / "store")
    assert dict(counting.models) == counted
    assert again.results().set_index("row")["score.helpful"].tolist()[:2] == [4.0, 2.0]
    # Grading again: the judge's requests are in the store, so its run resumes them.
    again.rescore(
        {"helpful": scores.judge(model="sim/judge", rubric="Is it helpful? 1-5", sim=QUICK)}
    )
    assert dict(counting.models) == counted
    assert again.results().set_index("row")["score.helpful"].tolist()[:2] == [4.0, 2.0]
    # The store's results of the graded run are its own rows, not the judge's.
    with nito_nb.open_store(tmp_path / "store") as store:
        graded = store.results(run.run_id)
    assert set(graded["model"]) == {"sim/echo"}


def test_compare_shows_the_judge_beside_the_other_scores(
    server: tuple[str, Counting],  # noqa: F811
) -> None:
    base_url, _ = server
    run = nito_nb.run(
        PROMPTS[:2],
        model=["sim/echo", "sim/chat"],
        progress=False,
        base_url=base_url,
        api_key=KEY,
        sim=QUICK,
        score={"helpful": scores.judge(model="sim/judge", rubric="1-5", sim=QUICK)},
    ).wait()
    table: Any = run.compare()
    frame = table.frame
    assert "sim/echo" in frame.index and "sim/chat" in frame.index
    assert any("helpful" in str(c) for c in frame.columns)
