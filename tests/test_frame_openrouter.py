"""The frame of OpenRouter's reasoning chunks: each piece sent twice in one chunk, as
``delta.reasoning`` and as the text (or summary) of its one ``reasoning_details`` entry, with
``"content":""`` and ``"role":"assistant"`` beside them (tests/data/real/openrouter-reasoning-*).

The frame cuts both out of the chunk's skeleton (``_frame/cuts.py``: the text and its echo), so
that a stream's chunks share one skeleton; the frame must be the one of every chunk parsed whole,
whatever the details hold (another text than the reasoning string, a type without text, fields
such as ``format``, ``index`` and ``signature``), in whatever order the keys come.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from typing import Any
from unittest.mock import patch

import pandas as pd
from conftest import frame_parsed_whole
from hypothesis import given, settings
from hypothesis import strategies as st

import nito_nb
from nito_nb._frame import build, dtypes, pieces, plan

TEXT = st.text(alphabet=st.sampled_from(list('ab "\\\n\u00e9{}:,')), min_size=0, max_size=6)
PIECE = TEXT.filter(bool)
MISSING: Any = object()  # a key left out


@st.composite
def detail(draw: st.DrawFn, piece: str) -> dict[str, Any]:
    """A ``reasoning_details`` entry: mostly the piece again, as OpenRouter sends it."""
    if draw(st.integers(0, 3)):  # as sent: a readable type, its payload the piece
        type_, key = draw(
            st.sampled_from([("reasoning.summary", "summary"), ("reasoning.text", "text")])
        )
        text = piece
    else:
        type_ = draw(
            st.sampled_from(
                ["reasoning.summary", "reasoning.text", "reasoning.encrypted", "reasoning.other",
                 MISSING]
            )
        )  # fmt: skip
        key = draw(st.sampled_from(["summary", "text", "data"]))
        text = draw(st.sampled_from([piece, piece, MISSING, None, ""]) | TEXT)
    fields: dict[str, Any] = {
        "type": type_,
        key: text,
        "signature": draw(st.sampled_from([MISSING, MISSING, None, "", "c2ln"])),
        "format": draw(st.sampled_from(["xai-responses-v1", "unknown", MISSING])),
        "index": draw(st.sampled_from([0, 0, 0, 1, MISSING, "0"])),
        "id": draw(st.sampled_from([MISSING, MISSING, "rs_1"])),
    }
    if draw(st.booleans()):  # as sent: type, payload, then the others
        order = list(fields)
    else:
        order = draw(st.permutations(list(fields)))
    return {name: fields[name] for name in order if fields[name] is not MISSING}


@st.composite
def chunk(draw: st.DrawFn) -> dict[str, Any]:
    """One of OpenRouter's chunks: a reasoning piece twice (or once, or none), content and role
    beside it, its fields drawn."""
    piece = draw(PIECE)
    fields: dict[str, Any] = {
        "content": draw(st.sampled_from(["", "", "", None, MISSING, "x"])),
        "role": draw(st.sampled_from(["assistant", "assistant", MISSING])),
        "reasoning": draw(st.sampled_from([piece] * 6 + [None, MISSING, ""])),
        "reasoning_details": (
            draw(st.lists(detail(piece), min_size=1, max_size=2))
            if draw(st.integers(0, 3))
            else draw(st.sampled_from([[], MISSING]))
        ),
    }
    if draw(st.integers(0, 3)):  # as sent: content, role, reasoning, details
        order = list(fields)
    else:
        order = draw(st.permutations(list(fields)))
    delta = {name: fields[name] for name in order if fields[name] is not MISSING}
    choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
    choice["native_finish_reason"] = None
    if draw(st.booleans()):
        choice["logprobs"] = None
    value: dict[str, Any] = {
        "id": "gen-1777319837-oWuxtkDuFDqmpKXSp8it",
        "object": "chat.completion.chunk",
        "created": 1777319837,
        "model": draw(st.sampled_from(["x-ai/grok-4.1-fast"] * 3 + ["z-ai/glm-5"])),
        "provider": draw(st.sampled_from(["xAI", "AtlasCloud"])),
        "choices": [choice],
    }
    if draw(st.integers(0, 4)) == 0:  # a padding, as OpenAI's (OpenRouter sends none)
        value["obfuscation"] = draw(st.text(alphabet=st.sampled_from(list("abXY09")), max_size=9))
    return value


@st.composite
def stream(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Chunks of a few layouts, each repeated with its own piece: the same piece in the reasoning
    string and the details that held it, sometimes another text in a detail."""
    layouts = draw(st.lists(chunk(), min_size=1, max_size=3))
    values = []
    for _ in range(draw(st.integers(1, 14))):
        value = json.loads(json.dumps(draw(st.sampled_from(layouts))))
        delta = value["choices"][0]["delta"]
        old, piece = delta.get("reasoning"), draw(PIECE)
        if isinstance(old, str) and old:
            delta["reasoning"] = piece
        for entry in delta.get("reasoning_details") or ():
            for key in ("text", "summary", "data"):
                if key in entry and entry[key] == old and old:
                    entry[key] = piece if draw(st.integers(0, 5)) else draw(TEXT)
        if "obfuscation" in value:
            value["obfuscation"] = draw(st.text(alphabet=st.sampled_from(list("ab09")), max_size=9))
        values.append(value)
    return values


@given(stream(), st.booleans(), st.booleans(), st.booleans())
@settings(max_examples=300, deadline=None)
def test_openrouter_reasoning_chunks_frame_like_the_slow_path(
    values: list[dict[str, Any]], spaced: bool, in_bulk: bool, arrow: bool
) -> None:
    separators = (", ", ": ") if spaced else (",", ":")
    lines = [
        f"data: {json.dumps(v, ensure_ascii=False, separators=separators)}\n\n" for v in values
    ]
    stream_ = nito_nb.read_sse(("".join(lines) + "data: [DONE]\n\n").encode())
    with ExitStack() as stack:
        # long logs are planned in bulk, short ones chunk by chunk: both, at any length
        stack.enter_context(patch.object(plan, "_BULK_FROM", 0 if in_bulk else 10**9))
        if not arrow:  # an install without pyarrow: the skeletons grouped with Python bytes
            for module in (pieces, plan, dtypes):
                stack.enter_context(patch.object(module, "_arrow", lambda: None))
        fast = nito_nb.frame(stream_)
        slow = frame_parsed_whole(stream_)
    pd.testing.assert_frame_equal(fast, slow)


def test_a_stream_of_openrouter_reasoning_chunks_is_read_from_one_skeleton() -> None:
    # Each piece is in two places of its chunk: both are cut out, so the reasoning chunks of a
    # stream are one skeleton however many pieces came (each one its own skeleton before).
    base = (
        '{"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"x-ai/grok-4.1-fast",'
        '"provider":"xAI","choices":[{"index":0,"delta":{"content":"","role":"assistant",'
        '"reasoning":"%s","reasoning_details":[{"type":"reasoning.summary","summary":"%s",'
        '"format":"xai-responses-v1","index":0}]},"finish_reason":null,'
        '"native_finish_reason":null}]}'
    )
    pieces_ = [f"w{i}" for i in range(1500)]  # in bulk (plan._BULK_FROM)
    body = "".join(f"data: {base % (p, p)}\n\n" for p in pieces_) + "data: [DONE]\n\n"
    calls = []
    original = build._Builder._skeleton

    def counted(self: Any, key: bytes, *args: Any, **kwargs: Any) -> int:
        calls.append(key)
        return original(self, key, *args, **kwargs)

    stream_ = nito_nb.read_sse(body.encode())
    with patch.object(build._Builder, "_skeleton", counted):
        df = nito_nb.frame(stream_)
    assert len(calls) == 1
    rows = df[df.kind == "chunk"]
    assert rows.reasoning.tolist() == pieces_
    assert (rows.reasoning_type == "reasoning.summary").all() and (rows.content == "").all()
    assert df.nito.text().iloc[0] == ""
    assert stream_.reasoning == "".join(pieces_)
