"""The frame of an ended stream reads its log's bytes in place (``ChunkLog.body_buffer``): no
log-sized copy, and no view of them kept once the frame is built, so the log can still grow."""

from __future__ import annotations

import pandas as pd

import nito_nb
from nito_nb._core.log import CHUNK


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
