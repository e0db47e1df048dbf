"""The frame of an ended stream reads its log's bytes in place (``ChunkLog.body_buffer``): no
log-sized copy, and no view of them kept once the frame is built, so the log can still grow."""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import nito_nb
from nito_nb._core.log import CHUNK
from nito_nb._frame import dtypes

BENCH = Path(__file__).parent.parent / "bench"
_spec = importlib.util.spec_from_file_location("bench_shapes", BENCH / "shapes.py")
assert _spec is not None and _spec.loader is not None
shapes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shapes)


def _body(n: int) -> bytes:
    chunk = (
        b'data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
        b'"delta":{"content":"w%d"},"finish_reason":null}],"obfuscation":"ab%d"}\n\n'
    )
    return b"".join(chunk % (i, i) for i in range(n)) + b"data: [DONE]\n\n"


def test_frame_of_an_ended_stream_leaves_its_log_growable_and_equal() -> None:
    # long enough for the bulk path (plan.py _BULK_FROM), which views the bytes with numpy/pyarrow
    stream = nito_nb.read_sse(_body(1500))
    assert stream.finished
    log = stream.log
    before = log.body
    df = nito_nb.frame(stream)
    assert df.nito.text().iloc[0] == "".join(f"w{i}" for i in range(1500))
    # no view of the bytes outlives the frame: the log still takes an event (BufferError if not)
    log.append(log.times_ns()[-1], CHUNK, b"data: {}\n\n")
    assert log.body == before + b"data: {}\n\n"
    # and reading in place gives the frame of the copied bytes
    pd.testing.assert_frame_equal(nito_nb.frame(nito_nb.read_sse(before)), df, check_like=False)


def test_text_columns_without_values_stay_apart_when_one_is_set() -> None:
    # The text columns without values share one all-null array (dtypes.py _nulls): setting a
    # value in one, through the frame or through its array, leaves the others missing.
    df = nito_nb.frame(nito_nb.read_sse(_body(1500)))
    empty = ["refusal", "tool_name", "tool_args", "comment", "error_message", "audio"]
    assert all(df[name].isna().all() for name in empty)
    df.loc[3, "tool_name"] = "lookup"
    df["comment"].array[4] = "note"
    assert df.loc[3, "tool_name"] == "lookup" and df["tool_name"].notna().sum() == 1
    for name in ("refusal", "tool_args", "error_message", "audio"):
        assert df[name].isna().all(), name
    assert str(df["tool_name"].dtype) == "string" and str(df["refusal"].dtype) == "string"


def test_a_text_column_spread_run_by_run_equals_one_concatenation_and_take() -> None:
    # dtypes._spread copies a piece placed in order (a padded chunk's extras) run by run of rows;
    # whatever the runs, its column is the pieces concatenated and taken at the rows' positions.
    text = pa.large_string()
    for seed in range(200):
        rng = random.Random(seed)
        values = [f"v{i}" for i in range(rng.randrange(4))]
        parts = [pa.array([*values, None], type=text)]
        parts += [
            pa.array(
                [f"p{k}-{i}" * rng.randrange(3) for i in range(rng.randrange(1, 400))], type=text
            )
            for k in range(rng.randrange(1, 4))
        ]
        starts = np.cumsum([0] + [len(p) for p in parts])
        n = rng.randrange(1, 3000)
        spread = np.full(n, len(values), dtype=np.int64)
        row = 0
        while row < n:  # runs in order, scattered rows and missing ones, in any mix
            length = min(n - row, rng.randrange(1, 200))
            how = rng.random()
            if how < 0.5:
                part = rng.randrange(1, len(parts))
                first = int(starts[part]) + rng.randrange(len(parts[part]))
                spread[row : row + length] = np.minimum(
                    np.arange(first, first + length), starts[-1] - 1
                )
            elif how < 0.7:
                spread[row : row + length] = [rng.randrange(starts[-1]) for _ in range(length)]
            row += length
        expected = pa.concat_arrays(parts).take(pa.array(spread))
        for runs_per_row in (1.0, 0.0):  # slice by slice whatever the runs; never
            with patch.object(dtypes, "_RUNS_PER_ROW", runs_per_row):
                got = dtypes._spread(pa, list(parts), spread, len(values))
            if isinstance(got, pa.ChunkedArray):  # a few runs, kept as they are (not copied)
                got = got.combine_chunks()
            assert got.equals(expected), (seed, runs_per_row)


@pytest.mark.spawns
@pytest.mark.skipif(
    not os.access("/proc/self/clear_refs", os.W_OK), reason="needs Linux's /proc/self/clear_refs"
)
@pytest.mark.parametrize("shape", shapes.SHAPES)
def test_framing_100k_events_peaks_at_most_twice_the_log(tmp_path: Path, shape: str) -> None:
    # issue 32: the peak memory while framing a 100,000-event log, in a fresh process, at most
    # twice the log's bytes, on each chunk shape real gateways send; measured as the benchmark
    # measures it (bench/bench_frame.py --memory-child: the high-water mark from the loaded log).
    path = tmp_path / "body.sse"
    path.write_bytes(shapes.build(shape, 100_000 - 3))
    out = subprocess.run(
        [sys.executable, str(BENCH / "bench_frame.py"), "--memory-child", str(path)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    ).stdout.split()
    peak, log_bytes, _ = (int(x) for x in out[-3:])
    assert peak <= 2 * log_bytes, f"{shape}: peak {peak / log_bytes:.2f}x the log"
