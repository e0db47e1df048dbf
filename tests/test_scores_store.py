"""Scores kept with a run (issue 34, docs/SCORES.md): the store's scores table, a resume that
keeps them, and rescore without a request (counted by a simulator of the test's own)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import nito_nb
from nito_nb import scores
from nito_nb._core.errors import ConfigurationError

SIM = {"tps": 0, "ttft_ms": 0}
KEY = "sk-test-scores-0123456789"


class _Counting:
    """The simulator's app, counting the chat completions it is sent."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.state = app.state
        self.completions = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions"):
            self.completions += 1
        await self.app(scope, receive, send)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, _Counting]]:
    from nito_nb.sim import SimServer, _server

    made: list[_Counting] = []
    original = _server.create_app

    def create_app(*args: Any, **kwargs: Any) -> Any:
        made.append(_Counting(original(*args, **kwargs)))
        return made[-1]

    monkeypatch.setattr(_server, "create_app", create_app)
    with SimServer(api_key=KEY) as base_url:
        yield base_url, made[0]


def _questions() -> pd.DataFrame:
    return pd.DataFrame({"q": ["Paris", "Rome", "Oslo"], "truth": ["Paris", "Madrid", "Oslo"]})


def _run(base_url: str, store: Path, **score: Any) -> nito_nb.Run:
    return nito_nb.run(
        _questions(),
        template="{q}",
        model="sim/echo",
        base_url=base_url,
        api_key=KEY,
        store=str(store),
        progress=False,
        sim=SIM,
        score=score,
    ).wait()


@pytest.mark.spawns  # a store's events are written by a helper process
def test_scores_are_stored_and_a_resumed_run_keeps_them(
    tmp_path: Path, counted: tuple[str, _Counting]
) -> None:
    base_url, server = counted
    store = tmp_path / "runs"
    first = _run(base_url, store, exact=scores.equals("content", column="truth"))
    assert first.results()["score.exact"].tolist() == [True, False, True]
    with nito_nb.open_store(store) as opened:
        table = opened.sql("select name, value, type, error, score from scores order by key")
        results = opened.results()
    assert set(table["name"]) == {"exact"} and set(table["type"]) == {"boolean"}
    assert set(table["score"]) == {"equals('content', column='truth')"}
    assert sorted(results["score.exact"].tolist()) == [False, True, True]
    assert str(results["score.exact"].dtype) == "boolean"
    sent = server.completions

    calls: list[str] = []

    def never(row: Any, stream: Any) -> bool:
        calls.append(row["key"])
        return False

    again = _run(base_url, store, exact=never)
    assert server.completions == sent  # every request was done: none sent
    results = again.results()
    assert results["done_before"].all()
    assert results["score.exact"].tolist() == [True, False, True]  # the stored scores
    assert calls == []  # a done row is not graded again unless asked (rescore)


@pytest.mark.spawns  # a store's events are written by a helper process
def test_rescore_sends_no_request_and_replaces_or_adds_columns(
    tmp_path: Path, counted: tuple[str, _Counting]
) -> None:
    base_url, server = counted
    store = tmp_path / "runs"
    run = _run(base_url, store, exact=scores.equals("content", column="truth"))
    sent = server.completions
    assert sent == 3

    def chunks(row: Any, stream: Any) -> float:
        return float(stream.snapshot().n_token_chunks)  # the Stream, rebuilt from the store

    run.rescore({"exact": scores.equals("content", value="Rome"), "chunks": chunks})
    assert server.completions == sent
    results = run.results()
    assert results["score.exact"].tolist() == [False, True, False]  # replaced
    assert (results["score.chunks"] > 0).all() and "score.chunks" in run.summary().columns
    with nito_nb.open_store(store) as opened:
        stored = opened.results().set_index("key").loc[results["key"]]
        n = opened.sql("select count(*) as n from scores")["n"].iloc[0]
    assert stored["score.exact"].tolist() == [False, True, False]
    assert stored["score.chunks"].tolist() == results["score.chunks"].tolist()
    assert n == 6  # one row per key and score: the old exact replaced


def test_rescore_of_a_run_without_store_reads_its_kept_streams(
    counted: tuple[str, _Counting],
) -> None:
    base_url, server = counted
    run = nito_nb.run(
        ["a b c", "d"], model="sim/echo", base_url=base_url, api_key=KEY, progress=False, sim=SIM
    ).wait()
    sent = server.completions
    assert "score_errors" not in run.results().columns  # no score: no column
    run.rescore({"words": lambda row, stream: float(len(stream.content.split()))})
    assert server.completions == sent
    assert run.results()["score.words"].tolist() == [3.0, 1.0]
    with pytest.raises(ConfigurationError, match="takes the scores"):
        run.rescore({})


def test_rescore_waits_for_the_end(counted: tuple[str, _Counting]) -> None:
    base_url, _ = counted
    run = nito_nb.run(
        ["a"],
        model="sim/echo",
        base_url=base_url,
        api_key=KEY,
        progress=False,
        sim={"tps": 5, "ttft_ms": 500},
    )
    with pytest.raises(ConfigurationError, match=r"run\.wait\(\) first"):
        run.rescore({"x": scores.json_valid()})
    run.wait()


@pytest.mark.spawns  # a store's events are written by a helper process
def test_rescore_says_in_one_line_when_the_store_cannot_take_the_scores(
    tmp_path: Path, counted: tuple[str, _Counting]
) -> None:
    base_url, _ = counted
    store = tmp_path / "runs"
    run = _run(base_url, store)
    with nito_nb.open_store(store):  # read-only in this process: DuckDB gives the run that mode
        with pytest.raises(nito_nb.StoreError) as info:
            run.rescore({"ok": scores.json_valid()})
    assert "close any Store of it" in str(info.value) and "\n" not in str(info.value)
    assert run.results()["score.ok"].tolist() == [False, False, False]  # kept meanwhile
    run.rescore({"ok": scores.json_valid()})  # once it is closed
    with nito_nb.open_store(store) as opened:
        assert opened.results()["score.ok"].tolist() == [False, False, False]
