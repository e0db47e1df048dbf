"""A store's small events files are merged when its writer closes (_runs/events.py ``compact``):
what the store shows is the same before and after, a key sent again keeps only its new rows,
files no request row names are deleted, and a merge cut half-way leaves the store as it was.
Real files, real DuckDB, the simulator."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

import nito_nb
from nito_nb._runs import events as _events
from nito_nb._runs import writer as _record
from nito_nb._runs.store_writer import StoreWriter

#: Every test here starts a kernel or another process: `make check` leaves them to `make test`.
pytestmark = pytest.mark.spawns

FAST = {"tps": 0, "ttft_ms": 0}


def _files(store: Path) -> list[str]:
    return sorted(p.name for p in (store / "events").iterdir() if p.name != "_columns.parquet")


def _shown(store: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    with nito_nb.open_store(store) as opened:
        results = opened.results().drop(columns=["row"]).sort_values("key").reset_index(drop=True)
        events = opened.sql(
            "select * exclude (run_id) from events order by stream, seq, part"
        ).reset_index(drop=True)
        frame = opened.frame().sort_values(["stream", "seq", "part"]).reset_index(drop=True)
    return results, events, frame


def _rows_in(files: str) -> int:
    """Rows in the Parquet files ``files`` (a path or a glob), read directly, not through the view."""
    with duckdb.connect() as con:
        (count,) = con.execute("select count(*) from read_parquet(?)", [files]).fetchall()[0]
    return int(count)


def _run(store: Path, prompts: list[str], **sim: Any) -> nito_nb.Run:
    run = nito_nb.run(
        prompts,
        model="sim/chat",
        store=str(store),
        progress=False,
        concurrency=4,
        sim={**FAST, **sim},
    )
    run.wait(timeout=120)
    assert run.error is None
    return run


def test_many_small_files_become_one_and_the_store_shows_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "runs"
    monkeypatch.setattr(_record, "BATCH_SIZE", 1)  # one events file per request
    monkeypatch.setattr(_events, "COMPACT_AT", 10_000)  # not yet
    _run(store, [f"q{i}" for i in range(24)])
    before = _files(store)
    assert len(before) == 24
    shown = _shown(store)
    monkeypatch.setattr(_events, "COMPACT_AT", 16)
    StoreWriter(store).close()  # a writer that closes merges them
    after = _files(store)
    assert len(after) == 1 and after[0] not in before
    for old, new in zip(shown, _shown(store), strict=True):
        pd.testing.assert_frame_equal(
            old.drop(columns=["batch"], errors="ignore"),
            new.drop(columns=["batch"], errors="ignore"),
        )
    with nito_nb.open_store(store) as opened:  # one stream rebuilt from the merged file
        key = opened.results()["key"].iloc[0]
        assert opened.streams(key).content == opened.results().set_index("key").loc[key, "content"]
    # Too few small files: nothing to do (the merged one is small, and alone).
    StoreWriter(store).close()
    assert _files(store) == after


def test_a_key_sent_again_keeps_only_its_new_rows_in_the_merged_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "runs"
    monkeypatch.setattr(_events, "COMPACT_AT", 10_000)
    # one batch however slow the machine (the end flushes it)
    monkeypatch.setattr(_record, "BATCH_SECONDS", 60.0)
    prompts = [f"r{i}" for i in range(10)]
    first = _run(store, prompts, fail_rate=0.5, fail_status="error", seed=5)  # one batch, one file
    errors = set(first.results().query("status == 'error'")["key"])
    assert errors and len(_files(store)) == 1
    monkeypatch.setattr(_record, "BATCH_SIZE", 1)
    # resumes: the errors are sent again
    _run(store, prompts, fail_rate=0.5, fail_status="error", seed=5)
    shown = _shown(store)
    in_files = _rows_in(f"{store}/events/*.parquet")
    assert in_files > len(shown[1])  # the replaced rows are still in their old files, unseen
    monkeypatch.setattr(_events, "COMPACT_AT", 2)
    StoreWriter(store).close()
    (merged,) = _files(store)
    assert _rows_in(f"{store}/events/{merged}") == len(shown[1])
    for old, new in zip(shown, _shown(store), strict=True):
        pd.testing.assert_frame_equal(
            old.drop(columns=["batch"], errors="ignore"),
            new.drop(columns=["batch"], errors="ignore"),
        )
    assert set(shown[0][shown[0]["key"].isin(errors)]["status"]) == {"done"}


def test_files_no_row_names_are_deleted_and_a_cut_merge_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "runs"
    monkeypatch.setattr(_record, "BATCH_SIZE", 1)
    monkeypatch.setattr(_events, "COMPACT_AT", 10_000)
    _run(store, [f"s{i}" for i in range(6)])
    files = _files(store)
    shown = _shown(store)
    # What a process killed between its file and its rows leaves: a file no row names, a partial.
    (store / "events" / "0123456789abcdef.parquet").write_bytes(
        (store / "events" / files[0]).read_bytes()
    )
    (store / "events" / "fedcba.partial").write_bytes(b"cut")
    _age(store / "events")  # left long ago

    class CutBeforeTheRowsNameIt:  # the merge is cut after its file is in place
        def __init__(self, con: Any) -> None:
            self.con = con

        def execute(self, sql: str, *args: Any) -> Any:
            if sql.startswith("UPDATE requests"):
                raise duckdb.IOException("cut")
            return self.con.execute(sql, *args)

    writer = StoreWriter(store)
    monkeypatch.setattr(_events, "COMPACT_AT", 2)
    with pytest.raises(duckdb.IOException):
        _events.compact(store, CutBeforeTheRowsNameIt(writer.con))  # type: ignore[arg-type]
    writer.con.close()
    writer._events.close()
    left = _files(store)
    # the sources, and the merged file no row names
    assert set(files) < set(left) and len(left) == len(files) + 1
    for old, new in zip(shown, _shown(store), strict=True):  # nothing shown twice, nothing lost
        pd.testing.assert_frame_equal(old, new)
    monkeypatch.setattr(_events, "COMPACT_AT", 10_000)
    StoreWriter(store).close()  # a file no row names may be another writer's, under way: it stays
    assert set(files) < set(_files(store))
    _age(store / "events")
    StoreWriter(store).close()  # no merge now, but what no row names, once stale, goes
    assert _files(store) == files
    for old, new in zip(shown, _shown(store), strict=True):
        pd.testing.assert_frame_equal(old, new)


def test_a_merge_that_fails_is_a_warning_and_the_store_stays_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "runs"
    _run(store, ["a", "b"])
    shown = _shown(store)

    def fails(folder: Path, con: Any, *skip: Any) -> tuple[int, int]:
        raise OSError("No space left on device")

    monkeypatch.setattr("nito_nb._runs.store_writer.compact", fails)
    with pytest.warns(UserWarning, match="not merged.*No space left"):
        StoreWriter(store).close()
    for old, new in zip(shown, _shown(store), strict=True):
        pd.testing.assert_frame_equal(old, new)


def _age(events: Path) -> None:
    """Every file of the folder written ``STALE_AFTER`` ago."""
    old = time.time() - _events.STALE_AFTER - 1
    for path in events.iterdir():
        os.utime(path, (old, old))


def test_another_writers_file_under_way_is_not_deleted(tmp_path: Path) -> None:
    # A run and the magic's cells in one process share the store: one may close (and tidy up)
    # while the other has written a batch's file and not yet the rows that name it.
    store = tmp_path / "runs"
    _run(store, ["s0", "s1"])
    files = _files(store)
    under_way = store / "events" / "0123456789abcdef.parquet"
    under_way.write_bytes((store / "events" / files[0]).read_bytes())
    partial = store / "events" / "fedcba9876543210.partial"
    partial.write_bytes(b"being written")
    StoreWriter(store).close()
    assert under_way.exists() and partial.exists()
    _age(store / "events")
    StoreWriter(store).close()
    assert not under_way.exists() and not partial.exists() and _files(store) == files
