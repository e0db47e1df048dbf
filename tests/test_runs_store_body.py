"""A store keeps each request's body compressed (``store_writer.py`` ``BODY_CODING``): DuckDB
writes every body twice with its own threads, on the cores a run and its server need, and a store
run reached 0.53-0.55x the raw floor with bodies as they arrived, 0.58x compressed
(bench/bench_runs_floor.py). A store written before has its bodies as they arrived and reads as
before; a coding this version does not know is one clear line."""

from __future__ import annotations

import tracemalloc
import zlib
from pathlib import Path

import duckdb
import pytest

import nito_nb
from nito_nb._core.log import LogFormatError
from nito_nb._runs.store_open import DB_NAME


def _run(path: Path) -> nito_nb.Run:
    run = nito_nb.run(
        ["first question", "second question"],
        model="sim/chat",
        store=str(path),
        progress=False,
        sim={"tps": 0},
        max_tokens=200,
    ).wait()
    assert set(run.results()["status"]) == {"done"}
    return run


def test_a_stored_body_is_compressed_and_rebuilds_the_same_stream(tmp_path: Path) -> None:
    path = tmp_path / "runs"
    run = _run(path)
    with duckdb.connect(str(path / DB_NAME), read_only=True) as con:
        rows = con.execute("SELECT key, body, body_coding FROM requests ORDER BY key").fetchall()
    assert len(rows) == 2
    with nito_nb.open_store(path) as store:
        for key, body, coding in rows:
            assert coding == "zlib"
            raw = zlib.decompress(body)
            assert len(body) * 3 < len(raw)  # a sim/chat body's chunks are alike
            stream = store.streams(key)
            assert stream.log.body == raw
            assert stream.content == run.results().set_index("key").loc[key, "content"]


def test_a_store_written_before_bodies_were_compressed_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "runs"
    run = _run(path)
    with nito_nb.open_store(path) as store:
        before = {key: store.streams(key).content for key in run.results()["key"]}
    # As a store of the version before wrote it: the body as it arrived, no coding.
    with duckdb.connect(str(path / DB_NAME)) as con:
        for key, body in con.execute("SELECT key, body FROM requests").fetchall():
            con.execute(
                "UPDATE requests SET body = ?, body_coding = NULL WHERE key = ?",
                [zlib.decompress(body), key],
            )
    with nito_nb.open_store(path) as store:
        assert {key: store.streams(key).content for key in before} == before


def test_a_body_coded_in_a_way_this_version_does_not_know_is_one_clear_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs"
    run = _run(path)
    key = run.results()["key"][0]
    with duckdb.connect(str(path / DB_NAME)) as con:
        con.execute("UPDATE requests SET body_coding = 'zstd' WHERE key = ?", [key])
    with nito_nb.open_store(path) as store:
        with pytest.raises(LogFormatError, match=r"coded 'zstd'.*upgrade nito_nb") as caught:
            store.streams(key)
        assert "\n" not in str(caught.value)
        assert len(store.results()) == 2  # the rows are still there


def test_a_stored_body_decompresses_only_as_far_as_its_events_go(tmp_path: Path) -> None:
    # A store from elsewhere is not trusted: a body that decompresses to far more than its
    # events take (a zlib bomb) is read only as far as its last event ends.
    path = tmp_path / "runs"
    run = _run(path)
    key = run.results()["key"][0]
    with duckdb.connect(str(path / DB_NAME)) as con:
        (body,) = con.execute("SELECT body FROM requests WHERE key = ?", [key]).fetchone()
        raw = zlib.decompress(body)
        bomb = zlib.compress(raw + b"\0" * (256 << 20), 9)  # 256 MiB more, in about 250 KB
        con.execute("UPDATE requests SET body = ? WHERE key = ?", [bomb, key])
    with nito_nb.open_store(path) as store:
        tracemalloc.start()
        try:
            stream = store.streams(key)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 32 << 20, f"reading the body took {peak >> 20} MiB"
    assert stream.log.body == raw
    assert stream.content == run.results().set_index("key").loc[key, "content"]
