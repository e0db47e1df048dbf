"""Scores (issue 34, docs/SCORES.md): the built-ins, and a run graded over HTTP on the simulator."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import nito_nb
from nito_nb import scores
from nito_nb._core.errors import ConfigurationError

# -- the built-ins: one layer, rows as a run makes them ------------------------------------------


def _row(**values: Any) -> dict[str, Any]:
    return values


def test_equals_compares_text_after_strip_and_as_text_when_either_side_is() -> None:
    exact = scores.equals("content", column="truth")
    assert exact(_row(content=" Paris\n", **{"input.truth": "Paris"}), None) is True
    assert exact(_row(content="paris", **{"input.truth": "Paris"}), None) is False
    assert scores.equals(column="truth", case=False)(
        _row(content="paris", **{"input.truth": "Paris"}), None
    )
    assert (
        scores.equals(column="truth", strip=False)(
            _row(content=" Paris", **{"input.truth": "Paris"}), None
        )
        is False
    )
    assert exact(_row(content="3", **{"input.truth": 3}), None) is True
    # no truth: NA; no answer (a failed request): a miss
    assert exact(_row(content="x", **{"input.truth": None}), None) is None
    assert exact(_row(content=None, **{"input.truth": "x"}), None) is False
    # a schema field by its bare name, a value
    assert scores.equals("label", value="spam")(_row(**{"out.label": "spam"}), None) is True


def test_the_other_built_ins() -> None:
    row = _row(content='{"a": 1} see https://x.org', ttft=0.5, e2e=2.0, cost=0.02)
    assert scores.contains("https")(row, None) is True
    assert scores.contains("HTTPS", case=False)(row, None) is True
    assert scores.regex(r"https?://")(row, None) is True
    assert scores.json_valid()(row, None) is False
    assert scores.json_valid()(_row(content=' {"a": 1} '), None) is True
    assert scores.under("ttft", 1.0)(row, None) is True
    assert scores.under("e2e", 1.0)(row, None) is False
    assert scores.under("ttft", 1.0)(_row(ttft=None), None) is None  # no figure: NA
    assert scores.cost_under(0.01)(row, None) is False
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert scores.schema_valid(schema)(_row(content='{"a": 1}'), None) is True
    assert scores.schema_valid(schema)(_row(content='{"a": "x"}'), None) is False


def test_each_built_in_says_what_it_checks() -> None:
    assert repr(scores.equals("content", column="truth")) == (
        "nito_nb.scores.equals('content', column='truth')"
    )
    assert scores.regex(r"https?://").describe() == "regex('https?://')"
    assert scores.under("ttft", 1).describe() == "under('ttft', 1.0)"
    assert scores.cost_under(0.01).describe() == "cost_under(0.01)"
    assert scores.json_valid().describe() == "json_valid()"


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: scores.equals("content"), "column='truth'"),
        (lambda: scores.regex("("), "not a regular expression"),
        (lambda: scores.under("ttft", -1), ">= 0"),
        (lambda: scores.contains(), "contains('Paris')"),
    ],
)
def test_a_wrong_built_in_is_one_line(make: Any, says: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        make()
    assert says in str(info.value) and "\n" not in str(info.value)


def test_the_magic_form_is_parsed_never_evaluated() -> None:
    assert (
        scores.parse_score("exact=equals:truth")[1].describe()
        == "equals('content', column='truth')"
    )
    assert scores.parse_score("src=regex:https?://")[1].describe() == "regex('https?://')"
    assert scores.parse_score("fast=under:ttft:1.0")[1].describe() == "under('ttft', 1.0)"
    assert scores.parse_score("ok=json_valid")[1].describe() == "json_valid()"
    assert scores.parse_score("cheap=cost_under:0.01")[1].describe() == "cost_under(0.01)"
    for bad in ("exact", "x=__import__('os')", "x=under:ttft", "x=cost_under:cheap"):
        with pytest.raises(ConfigurationError) as info:
            scores.parse_score(bad)
        assert "NAME=KIND" in str(info.value) and "\n" not in str(info.value)


def test_scores_is_a_public_submodule() -> None:
    assert "scores" in dir(nito_nb) and nito_nb.scores is scores


# -- a run graded over HTTP, on the simulator ---------------------------------------------------

SIM = {"tps": 0, "ttft_ms": 0}
HOSTILE = '<img src=x onerror="alert(1)">'


def _questions() -> pd.DataFrame:
    # sim/echo answers the prompt itself: the truth of row 0 and 2 is the answer, row 1's is not
    return pd.DataFrame(
        {"q": ["Paris", "see https://x.org", "Rome"], "truth": ["Paris", "Madrid", " Rome "]}
    )


def test_each_finished_row_is_scored_on_the_writer_path() -> None:
    calls: list[str] = []

    def length(row: Any, stream: Any) -> float:
        calls.append(threading.current_thread().name)
        assert stream.content == row["content"]  # the request's own Stream
        return float(len(stream.content))

    run = nito_nb.run(
        _questions(),
        template="{q}",
        model=["sim/echo", "sim/chat"],
        progress=False,
        sim=SIM,
        score={
            "exact": scores.equals("content", column="truth"),
            "src": scores.regex(r"https?://"),
            "fast": scores.under("ttft", 5.0),
            "length": length,
        },
    ).wait()
    results = run.results()
    assert set(results["status"]) == {"done"}
    echo = results[results["model"] == "sim/echo"].set_index("row")
    assert echo["score.exact"].tolist() == [True, False, True]  # " Rome " stripped
    assert echo["score.src"].tolist() == [False, True, False]
    assert echo["score.fast"].all()
    assert echo["score.length"].tolist() == [5.0, 17.0, 4.0]
    assert str(results["score.exact"].dtype) == "boolean"
    assert str(results["score.length"].dtype) == "Float64"
    assert results["score_errors"].isna().all()
    # scored once each, as the rows were written, never again when results() is read
    run.results()
    assert len(calls) == 6 and set(calls) == {"nito_nb-run-writer"}


def test_a_failing_score_is_na_with_its_reason_and_the_run_finishes() -> None:
    def picky(row: Any, stream: Any) -> Any:
        if row["input.q"] == "Rome":
            raise ValueError("no Rome here")
        if row["input.q"] == "Paris":
            return ["not", "a", "value"]
        return "ok"

    run = nito_nb.run(
        _questions(),
        template="{q}",
        model="sim/echo",
        progress=False,
        sim=SIM,
        score={"picky": picky, "exact": scores.equals("missing_field", column="truth")},
    ).wait()
    results = run.results().set_index("row")
    assert run.error is None and set(results["status"]) == {"done"}
    assert results["score.picky"].isna().tolist() == [True, False, True]
    assert str(results["score.picky"].dtype) == "string"
    errors = results["score_errors"].tolist()
    assert errors[2].startswith("picky: ValueError: no Rome here; exact: KeyError: the row has no")
    assert errors[0].startswith(
        "picky: TypeError: a score returns bool, float, str or None, not list"
    )


def test_summary_gives_each_scores_mean_per_model() -> None:
    run = nito_nb.run(
        _questions(),
        template="{q}",
        model=["sim/echo", "sim/chat"],
        progress=False,
        sim=SIM,
        score={"exact": scores.equals("content", column="truth"), "n": lambda r, s: 2.0},
    ).wait()
    summary = run.summary()
    assert summary.loc["sim/echo", "score.exact"] == pytest.approx(2 / 3)
    assert summary.loc["sim/chat", "score.exact"] == 0.0
    assert summary.loc["sim/echo", "score.n"] == 2.0
    assert "ttft_p50" in summary.columns and "cost" in summary.columns


def test_compare_marks_the_best_and_escapes_every_string() -> None:
    run = nito_nb.run(
        pd.DataFrame({"q": [HOSTILE, "plain"], "truth": [HOSTILE, "no"]}),
        template="{q}",
        model=["sim/echo", "sim/chat"],
        progress=False,
        sim=SIM,
        score={
            "exact": scores.equals("content", column="truth"),
            HOSTILE: lambda r, s: 1.0,
            "said": lambda r, s: HOSTILE,  # a text score: its most frequent value is shown
        },
    ).wait()
    results = run.results()
    assert (results["content"] == HOSTILE).any()  # the model's answer is hostile too
    comparison = run.compare()
    page = comparison._repr_html_()
    assert "<img" not in page
    assert page.count("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;") == 3  # a header, 2 values
    frame = comparison.frame
    assert frame.loc["sim/echo", "exact"] == 0.5 and frame.loc["sim/chat", "exact"] == 0.0
    assert frame.loc["sim/echo", "exact_low"] < 0.5 < frame.loc["sim/echo", "exact_high"]
    assert {"ttft_p50", "ttft_p90", "e2e_p50", "e2e_p90", "cost_per_request"} <= set(frame.columns)
    # the best score of a column is marked: echo's exact
    echo_row = page.split("<th>sim/echo</th>")[1].split("</tr>")[0]
    assert echo_row.count("★") >= 1 and "0.5" in echo_row.split("★")[0]
    assert "sim/echo" in repr(comparison) and " *" in repr(comparison)


def test_compare_escapes_a_hostile_model_name() -> None:
    # Model names come from users: a results frame whose model is markup (no gateway needed).
    from nito_nb._runs.compare import compare

    results = pd.DataFrame(
        {
            "model": [HOSTILE, HOSTILE, "b"],
            "ttft": [0.1, 0.2, 0.3],
            "e2e": [1.0, 1.0, 2.0],
            "cost": [0.1, 0.1, 0.2],
            "score.ok": pd.array([True, False, True], dtype="boolean"),
        }
    )
    page = compare(results, ["ok"])._repr_html_()
    assert "<img" not in page and "&lt;img" in page


def test_compare_plots_a_score_against_cost_or_latency() -> None:
    import matplotlib

    matplotlib.use("Agg")
    run = nito_nb.run(
        _questions(),
        template="{q}",
        model=["sim/echo", "sim/chat"],
        progress=False,
        sim=SIM,
        score={"exact": scores.equals("content", column="truth")},
    ).wait()
    comparison = run.compare()
    for x in ("cost", "e2e", "ttft"):
        ax = comparison.plot(x=x, y="exact")
        assert [t.get_text() for t in ax.texts] == ["sim/chat", "sim/echo"]
        assert ax.get_ylabel() == "exact"
    with pytest.raises(ConfigurationError, match=r"plot\(x=\.\.\.\)"):
        comparison.plot(x="speed", y="exact")
    with pytest.raises(ConfigurationError, match="'exact'"):
        comparison.plot(x="cost", y="nope")


class _Grader:
    """A batch score: every row at once, with a Run of its own (as a judge has)."""

    def __init__(self, pause: float = 0.0) -> None:
        self.pause = pause
        self.contexts: list[Any] = []

    def describe(self) -> str:
        return "grader()"

    def score_rows(self, rows: Any, streams: Any, context: Any) -> list[Any]:
        self.contexts.append(context)
        keys = [row["key"] for row in rows]
        graded = nito_nb.run(
            pd.Series([f"grade {row['content']}" for row in rows], index=keys),
            model="sim/echo",
            progress=False,
            sim=SIM,
            run_id=f"{context.run_id}.{context.name}",
        )
        context.keep(graded)
        graded.wait()
        time.sleep(self.pause)
        return [ValueError("cannot grade") if "Rome" in row["content"] else 0.5 for row in rows]


def test_a_batch_score_runs_once_at_the_end_and_its_cost_is_apart() -> None:
    grader = _Grader(pause=0.5)
    run = nito_nb.run(
        _questions(),
        template="{q}",
        model=["sim/echo", "sim/chat"],
        progress=False,
        sim=SIM,
        score={"graded": grader, "exact": scores.equals("content", column="truth")},
    )
    run.wait()
    assert len(grader.contexts) == 1  # once, after the graded requests
    context = grader.contexts[0]
    assert context.name == "graded" and context.run_id == run.run_id and context.store is None
    assert set(run.score_runs) == {"graded"} and run.score_runs["graded"].done
    results = run.results()
    echo = results[results["model"] == "sim/echo"].set_index("row")
    assert echo["score.graded"].isna().tolist() == [False, False, True]
    assert echo.loc[2, "score_errors"] == "graded: ValueError: cannot grade"
    summary = run.summary()
    judged = run.score_runs["graded"].results()["cost"].astype(float).sum()
    assert judged > 0 and summary["score_cost"].sum() == pytest.approx(judged)
    assert summary["cost"].sum() == pytest.approx(results["cost"].astype(float).sum())


# -- the magic's form, in a real kernel -----------------------------------------------------------


def _cell_text(cell: Any) -> str:
    out = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            out.append(output["text"])
        elif output.get("output_type") in ("display_data", "execute_result"):
            out.append(str(output["data"].get("text/plain", "")))
    return "".join(out)


@pytest.mark.spawns
def test_the_magic_grades_over_with_score_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import execute_cells

    monkeypatch.setenv("NITO_SIM_TPS", "0")
    monkeypatch.setenv("NITO_SIM_TTFT_MS", "0")
    cells = [
        "import nito_nb, pandas as pd\n%load_ext nito_nb\n"
        "df = pd.DataFrame({'q': ['Paris', 'see https://x.org'], 'truth': ['Paris', 'Rome']})",
        "%%nito --over df -m sim/echo --score exact=equals:truth --score src=regex:https?:// "
        "--score fast=under:ttft:30 --score ok=json_valid\n{q}",
        "r = _nito.results()\nprint(r['score.exact'].tolist(), r['score.src'].tolist(), "
        "r['score.fast'].tolist(), r['score.ok'].tolist())",
        "%%nito --over df -m sim/echo --score 'exact=__import__(\"os\")'\n{q}",
        "%%nito -m sim/echo --score ok=json_valid\nhi",
    ]
    nb = execute_cells(cells, tmp_path, timeout=180)
    c = nb.cells
    assert _cell_text(c[2]).strip() == "[True, False] [False, True] [True, True] [False, False]"
    bad = _cell_text(c[3])
    assert bad.strip().startswith("UsageError: --score 'exact=__import__(\"os\")': no built-in")
    assert "Traceback" not in str(c[3].outputs) and len(bad.strip().splitlines()) == 1
    assert "UsageError: --score grades the rows of a run: add --over VAR" in _cell_text(c[4])


def test_live_results_show_the_scores_of_the_rows_finished_so_far() -> None:
    # A one-word answer ends at once, a 120-word one takes 6 s at 20 tokens/s: meanwhile,
    # results() has the first row, already graded.
    run = nito_nb.run(
        ["short", " ".join(["word"] * 120)],
        model="sim/echo",
        progress=False,
        sim={"tps": 20, "ttft_ms": 0},
        score={"short": lambda row, stream: len(row["content"]) < 10},
    )
    deadline = time.monotonic() + 10
    live = run.results()
    while len(live) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
        live = run.results()
    assert not run.done and len(live) == 1
    assert live["score.short"].tolist() == [True]
    assert run.wait().results()["score.short"].tolist() == [True, False]
