"""Every delta field the reader knows reaches all three places a user sees it (issue 12's "add
a delta field" check, docs/ARCHITECTURE.md).

``_core/chunk.py``'s ``DELTA_KEYS`` are the fields read by the one chunk reader; any other field
is a vendor field, kept in the frame's ``extras``. A field added to ``DELTA_KEYS`` must therefore
show in the Stream (the accumulator folds it), in a frame column (it no longer lands in
``extras``) and in the rendered view. These tests feed one chunk holding only that field and
compare with a chunk holding none: if one of the three places was forgotten, they say which.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pytest

import nito_nb
from nito_nb._core.chunk import DELTA_KEYS
from nito_nb._render import join_parts, render_parts

#: A value of each field read by the reader, as providers send it (docs/PROTOCOL.md).
SAMPLES: dict[str, Any] = {
    "role": "assistant",
    "content": "Hello",
    "refusal": "I cannot help with that.",
    "tool_calls": [
        {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"q": 1}'},
        }
    ],
    "function_call": {"name": "lookup", "arguments": '{"q": 1}'},  # deprecated: read as tool call 0
    "reasoning_details": [{"type": "reasoning.text", "text": "Let me think.", "index": 0}],
    "reasoning": "Let me think.",
    "reasoning_content": "Let me think.",
    "audio": {
        "id": "audio_1",
        "data": "UklGRiQAAABXQVZF",
        "transcript": "Hello",
    },  # OpenAI's audio output
}

#: Fields a view does not show, and why (anything else must change the rendered output).
NOT_RENDERED = {
    "role": "every answer is the assistant's; the view does not label it",
}
#: Fields the Stream keeps without changing the assembled message, and why.
NOT_IN_MESSAGE: dict[str, str] = {}


def _body(delta: dict[str, Any]) -> str:
    chunks = [
        {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta}]},
        {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


def _stream(delta: dict[str, Any]) -> nito_nb.Stream:
    return nito_nb.read_sse(_body(delta))


def _seen_by_stream(s: nito_nb.Stream) -> Any:
    return (
        s.message,
        s.role,
        s.content,
        s.reasoning,
        s.reasoning_details,
        s.refusal,
        [c.to_dict() if hasattr(c, "to_dict") else repr(c) for c in s.tool_calls],
    )


def _first_chunk_row(s: nito_nb.Stream) -> pd.Series:
    df = nito_nb.frame(s)
    return df[df.seq == 0].iloc[0]


def test_every_field_has_a_sample() -> None:
    # A field added to the reader needs a sample here, so that the checks below cover it.
    assert set(SAMPLES) == set(DELTA_KEYS), (
        f"add a sample for {sorted(set(DELTA_KEYS) - set(SAMPLES))}"
    )


@pytest.mark.parametrize("key", sorted(DELTA_KEYS))
def test_the_stream_folds_the_field(key: str) -> None:
    if key in NOT_IN_MESSAGE:
        pytest.skip(NOT_IN_MESSAGE[key])
    with_field = _seen_by_stream(_stream({key: SAMPLES[key]}))
    assert with_field != _seen_by_stream(_stream({})), (
        f"delta.{key} is read by _core/chunk.py but the Stream shows nothing of it: fold it in "
        "_core/accumulate.py (Accumulator.fold)"
    )


@pytest.mark.parametrize("key", sorted(DELTA_KEYS))
def test_the_frame_has_a_column_for_the_field(key: str) -> None:
    row = _first_chunk_row(_stream({key: SAMPLES[key]}))
    empty = _first_chunk_row(_stream({}))
    extras = row.get("extras")
    assert not (isinstance(extras, str) and f"delta.{key}" in extras), (
        f"delta.{key} is in DELTA_KEYS yet the frame keeps it as a vendor field (extras)"
    )
    changed = [c for c in row.index if c not in ("extras",) and not _same(row[c], empty[c])]
    changed = [c for c in changed if c not in ("bytes",)]  # the raw size differs by construction
    assert changed, (
        f"delta.{key} is read by _core/chunk.py but no frame column holds it: give it a column in "
        "_frame/build.py and _frame/dtypes.py COLUMNS"
    )


@pytest.mark.parametrize("key", sorted(DELTA_KEYS))
def test_the_view_renders_the_field(key: str) -> None:
    if key in NOT_RENDERED:
        pytest.skip(NOT_RENDERED[key])
    shown = join_parts(render_parts(_stream({key: SAMPLES[key]}).snapshot(), live=False))
    empty = join_parts(render_parts(_stream({}).snapshot(), live=False))
    assert shown["text/html"] != empty["text/html"], (
        f"delta.{key} is read by the Stream but the view does not show it: add a part in "
        "_render/parts.py (render_parts)"
    )


def test_a_vendor_field_stays_in_extras() -> None:
    # The other side of the rule: a field the reader does not know is kept, never dropped.
    row = _first_chunk_row(_stream({"x_audio": {"data": "AAAA"}}))
    assert "delta.x_audio" in str(row["extras"])


def _is_na(value: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or an array: a value
        return False


def _same(a: Any, b: Any) -> bool:
    if _is_na(a) or _is_na(b):
        return _is_na(a) and _is_na(b)
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return repr(a) == repr(b)
