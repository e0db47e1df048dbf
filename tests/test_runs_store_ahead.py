"""A run store's helper writes the next batch's events while the batch before commits its rows
(``StoreWriter.write``'s ``ahead``), and no batch's rows commit before its events file is in place.

The helper process waited idle for each commit, and each commit for the helper: on two cores
their turns came one after the other (bench/bench_runs_floor.py)."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest

import nito_nb
from nito_nb._runs import events_helper, store_writer, writer

#: The run's store has its helper process.
pytestmark = pytest.mark.spawns

FAST = {"sim": {"tps": 0, "ttft_ms": 0}}


class _Watched:
    """A store's DuckDB connection, each commit checked: the events file of the batch whose rows
    it commits is in place."""

    def __init__(self, con: Any, folder: Path, said: list[tuple[str, str]]) -> None:
        self._con, self._folder, self._said = con, folder, said
        self._batch: str | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)

    def register(self, name: str, frame: Any) -> Any:
        if name == "batch_requests":
            self._batch = str(frame["batch"].iloc[0])
        return self._con.register(name, frame)

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT" and self._batch is not None:
            assert (self._folder / "events" / f"{self._batch}.parquet").exists(), self._batch
            self._said.append(("commit", self._batch))
            self._batch = None
        return self._con.execute(sql, *args)


def _watched_run(
    store: Path, n: int, first_wait: float
) -> tuple[nito_nb.Run, list[tuple[str, str]], list[int]]:
    """A store run of ``n`` requests whose first batch waits ``first_wait`` seconds (the rest of
    the run queues up behind it meanwhile); returns the run, what was said to the store in order
    (("submit" | "commit", batch), each commit checked by ``_Watched``) and the batches' sizes."""
    said: list[tuple[str, str]] = []
    sizes: list[int] = []
    original_init = store_writer.StoreWriter.__init__
    original_submit = events_helper.EventsHelper.submit
    original_flush = writer.RunWriter._flush

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.con = _Watched(self.con, self.path, said)

    def submit(self: Any, folder: Any, batch: str, *args: Any) -> None:
        said.append(("submit", batch))
        original_submit(self, folder, batch, *args)

    def flush(self: Any, batch: list[Any], *args: Any) -> None:
        if not sizes:
            time.sleep(first_wait)
        sizes.append(len(batch))
        original_flush(self, batch, *args)

    with (
        patch.object(store_writer.StoreWriter, "__init__", init),
        patch.object(events_helper.EventsHelper, "submit", submit),
        patch.object(writer.RunWriter, "_flush", flush),
    ):
        run = nito_nb.run(
            [f"prompt {i}" for i in range(n)],
            model="sim/chat",
            concurrency=64,
            store=str(store),
            progress=False,
            **FAST,
        )
        run.wait()
    results = run.results()
    assert len(results) == n and set(results["status"]) == {"done"}
    return run, said, sizes


def test_the_next_batch_is_written_while_the_one_before_commits(tmp_path: Path) -> None:
    store = tmp_path / "store"
    # the first batch waits: whole batches queue up behind it meanwhile
    run, said, _ = _watched_run(store, 4 * writer.BATCH_SIZE, 1.0)
    commits = [batch for what, batch in said if what == "commit"]
    submits = [batch for what, batch in said if what == "submit"]
    assert sorted(commits) == sorted(submits)  # every batch submitted once, and committed
    # some batch was handed to the helper before the batch before it committed
    assert any(
        said.index(("submit", after)) < said.index(("commit", before))
        for before, after in itertools.pairwise(commits)
    ), said
    # the store holds every request and its events, as a run without it would
    with nito_nb.open_store(store) as opened:
        framed = opened.frame()
        assert framed["stream"].nunique() == 4 * writer.BATCH_SIZE
        assert len(opened.results()) == 4 * writer.BATCH_SIZE
    assert len(framed) == len(run.frame())


def test_the_run_s_last_batch_is_taken_ahead_too(tmp_path: Path) -> None:
    # A short last batch is handed to the helper while the batch before commits, once the run's
    # end is in: the run's tail, where nothing else is left to overlap it (it waited for a whole
    # batch that would never come).
    store = tmp_path / "store"
    n = writer.BATCH_SIZE + 10
    # the first batch waits: the rest of the run and its end queue up
    _, said, sizes = _watched_run(store, n, 1.5)
    assert sizes[-1] < writer.BATCH_SIZE and sum(sizes) == n, sizes
    commits = [batch for what, batch in said if what == "commit"]
    # the last, short batch went to the helper before the batch before it committed
    assert said.index(("submit", commits[-1])) < said.index(("commit", commits[-2])), said
    with nito_nb.open_store(store) as opened:
        assert len(opened.results()) == n
        assert opened.frame()["stream"].nunique() == n
