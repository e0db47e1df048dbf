"""A store keeps each request's body compressed (``_runs/bodies.py``): DuckDB writes every body
twice with its own threads, on the cores a run and its server need, and a store run reached
0.53-0.55x the raw floor with bodies as they arrived, 0.58x compressed (bench/bench_runs_floor.py).
Stores written before (bodies zlib-compressed, or as they arrived) read as before; a coding this
version does not know is one clear line; a compression bomb is inflated only as far as the
request's events go, whichever the coding."""

from __future__ import annotations

import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa
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
            assert coding == "lz4"
            # as docs/RUNS.md tells SQL users to read it
            raw = pa.input_stream(pa.py_buffer(body), compression="lz4").read()
            assert len(body) * 3 < len(raw)  # a sim/chat body's chunks are alike
            stream = store.streams(key)
            assert stream.log.body == raw
            assert stream.content == run.results().set_index("key").loc[key, "content"]


def _lz4(body: bytes) -> bytes:
    return pa.input_stream(pa.py_buffer(body), compression="lz4").read()


def _lz4_coded(raw: bytes) -> bytes:
    return pa.compress(raw, "lz4", asbytes=True)


def _zlib(raw: bytes) -> bytes:
    return zlib.compress(raw, 1)


def _rewrite_body(
    path: Path, key: str, coding: str | None, code: Callable[[bytes], bytes]
) -> bytes:
    """Store ``code(raw)`` as the body of ``key``, coded ``coding``, where ``raw`` is the body
    this version stored (LZ4), as it arrived; return ``raw``."""
    with duckdb.connect(str(path / DB_NAME)) as con:
        row = con.execute("SELECT body FROM requests WHERE key = ?", [key]).fetchone()
        assert row is not None
        raw = _lz4(row[0])
        con.execute(
            "UPDATE requests SET body = ?, body_coding = ? WHERE key = ?", [code(raw), coding, key]
        )
    return raw


@pytest.mark.parametrize(
    ("coding", "code"),
    [(None, lambda raw: raw), ("zlib", _zlib)],
    ids=["as it arrived", "zlib (5 December)"],
)
def test_a_store_written_by_a_version_before_reads_as_before(
    tmp_path: Path, coding: str | None, code: Callable[[bytes], bytes]
) -> None:
    path = tmp_path / "runs"
    run = _run(path)
    with nito_nb.open_store(path) as store:
        before = {key: store.streams(key).content for key in run.results()["key"]}
    # As a store of a version before wrote it: the body as it arrived (no coding), or zlib's.
    for key in before:
        _rewrite_body(path, key, coding, code)
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


def _lz4_bomb(raw: bytes) -> bytes:
    return _lz4_coded(raw + b"\0" * (256 << 20))  # 256 MiB more, in 1 MB


def _zlib_bomb(raw: bytes) -> bytes:
    return zlib.compress(raw + b"\0" * (256 << 20), 9)  # 256 MiB more, in about 250 KB


@pytest.mark.parametrize(("coding", "bomb_of"), [("lz4", _lz4_bomb), ("zlib", _zlib_bomb)])
def test_a_stored_body_decompresses_only_as_far_as_its_events_go(
    tmp_path: Path, coding: str, bomb_of: Callable[[bytes], bytes]
) -> None:
    # A store from elsewhere is not trusted: a body that decompresses to far more than its
    # events take (a compression bomb) is read only as far as its last event ends.
    path = tmp_path / "runs"
    run = _run(path)
    key = run.results()["key"][0]
    raw = _rewrite_body(path, key, coding, bomb_of)
    with nito_nb.open_store(path) as store:
        tracemalloc.start()
        try:
            stream = store.streams(key)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 32 << 20, f"reading the body took {peak >> 20} MiB"
    assert stream.log.body == raw


@pytest.mark.parametrize("coding", ["lz4", "zlib"])
def test_a_stored_body_that_does_not_decompress_is_one_clear_line(
    tmp_path: Path, coding: str
) -> None:
    path = tmp_path / "runs"
    run = _run(path)
    key = run.results()["key"][0]
    code = _lz4_coded if coding == "lz4" else _zlib
    _rewrite_body(path, key, coding, lambda raw: code(raw)[:40])  # a truncated body
    with nito_nb.open_store(path) as store:
        with pytest.raises(LogFormatError, match=r"cannot be decompressed") as caught:
            store.streams(key)
        assert "\n" not in str(caught.value)
        assert key in str(caught.value)
        assert len(store.results()) == 2
