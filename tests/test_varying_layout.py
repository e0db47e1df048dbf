"""Nothing in the engine's fast paths depends on chunks sharing a byte layout.

Real OpenAI and Azure chunks carry ``"obfuscation"``, a string of random characters and random
length, so no two of them have the same bytes around their text. The engine's shortcuts (the
layout cache of ``_core/layout.py``, the accumulator's plain content, reasoning and tool-fragment
chunks) must give what the slow path gives: ``json.loads`` of every chunk and
:func:`read_chunk` folded by :meth:`Accumulator.fold`, whatever the split of the body into reads.
"""

from __future__ import annotations

import json
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nito_nb._core.accumulate import Accumulator
from nito_nb._core.chunk import read_chunk
from nito_nb._core.layout import ChunkParser
from nito_nb._core.state import StreamState

ALNUM = st.text(alphabet=st.sampled_from(list("abcXYZ019")), max_size=16)
# Padding as sent (letters and digits), and padding no gateway sends (quotes, escapes, accents).
PADDING = ALNUM | st.text(alphabet=st.sampled_from(list('a"\\\u00e9 /')), max_size=6)
TEXT = st.text(alphabet=st.sampled_from(list('ab "\\\n\u00e9{}:,')), max_size=6)
ABSENT = object()
IDS = st.sampled_from(["chatcmpl-1"] * 6 + ["chatcmpl-2", ""])


@st.composite
def detailed_delta(draw: st.DrawFn, usual: bool = False) -> dict[str, Any]:
    """OpenRouter's reasoning delta: the piece as ``reasoning`` and as its detail's text (a role
    and an empty content beside them), with the fields and values around it drawn, those that
    read otherwise too (another text in the detail, an encrypted detail, an index not an int).
    ``usual``: only the values OpenRouter sends (the fast path's), so that a stream has some."""
    delta: dict[str, Any] = {}

    def sampled(values: list[Any], sent: list[Any]) -> Any:
        return draw(st.sampled_from(sent if usual else values))

    content = sampled(["", "", None, ABSENT, "x"], ["", None, ABSENT])
    if content is not ABSENT:
        delta["content"] = content
    role = sampled(["assistant", "assistant", "assistant", ABSENT, None, 1], ["assistant", ABSENT])
    if role is not ABSENT:
        delta["role"] = role
    text = draw(TEXT)
    delta["reasoning"] = text
    kind = sampled(
        ["reasoning.text", "reasoning.summary"] * 2 + ["reasoning.encrypted"],
        ["reasoning.text", "reasoning.summary"],
    )
    detail: dict[str, Any] = {"type": kind}
    key = {"reasoning.summary": "summary", "reasoning.encrypted": "data"}.get(kind, "text")
    detail[key] = sampled([text, text, text, text + "x", None], [text])
    for name, values, sent in (  # each one of its values (those that read otherwise too), or absent
        ("format", ["xai-responses-v1", "unknown", None, ABSENT], ["xai-responses-v1", ABSENT]),
        ("index", [0, 0, 0, 1, "0", True, ABSENT], [0, 1]),
        ("signature", [ABSENT, ABSENT, "", "sig"], [ABSENT, ""]),
        ("id", [ABSENT, ABSENT, "rs_1", None], [ABSENT]),
        ("extra", [ABSENT, ABSENT, ABSENT, 1, "e"], [ABSENT]),
    ):
        value = sampled(values, sent)
        if value is not ABSENT:
            detail[name] = value
    delta["reasoning_details"] = sampled([[detail], [detail], [detail, detail], []], [[detail]])
    return delta


@st.composite
def chunk(draw: st.DrawFn) -> dict[str, Any]:
    """A chunk of one of the shapes real gateways send (OpenAI content and tool-call fragments,
    DeepSeek reasoning, OpenRouter's reasoning with its detail, the simulator's plain content),
    its fields drawn."""
    shape = draw(st.sampled_from(["content", "content", "reasoning", "detailed", "tools", "other"]))
    if shape == "content":
        delta: dict[str, Any] = {"content": draw(TEXT)}
    elif shape == "detailed":  # OpenRouter's: each piece as reasoning and as its detail's text
        delta = draw(detailed_delta())
    elif shape == "reasoning":
        delta = {
            "content": draw(st.sampled_from([None, None, "", "x"])),
            "reasoning_content": draw(TEXT | st.none()),
        }
        if draw(st.booleans()):
            delta["reasoning"] = draw(TEXT)
    elif shape == "tools":
        fragment: dict[str, Any] = {
            "index": draw(st.sampled_from([0, 0, 1])),
            "function": {"arguments": draw(TEXT | st.none() | st.just({"a": 1}))},
        }
        if draw(st.booleans()):
            fragment.update(id="call_1", type="function")
            fragment["function"]["name"] = draw(st.sampled_from(["add", "mul"]))
        delta = {"tool_calls": [fragment]}
        if draw(st.booleans()):
            delta["content"] = None
    else:
        delta = draw(
            st.dictionaries(
                st.sampled_from(["role", "content", "refusal", "reasoning"]),
                TEXT | st.none(),
                max_size=2,
            )
        )
    choice: dict[str, Any] = {"index": draw(st.sampled_from([0, 0, 0, 1])), "delta": delta}
    if draw(st.booleans()):
        choice["logprobs"] = None
    choice["finish_reason"] = draw(st.sampled_from([None, None, None, None, "stop"]))
    value: dict[str, Any] = {
        "id": draw(IDS),
        "object": "chat.completion.chunk",
        "created": 1782321930,
        "model": draw(st.sampled_from(["gpt-5"] * 4 + [""])),
    }
    if draw(st.booleans()):
        value["service_tier"] = "default"
        value["system_fingerprint"] = None
    padding = draw(PADDING)
    where = draw(st.sampled_from(["end", "end", "start", "choice", "none"]))
    if where == "start":
        value["obfuscation"] = padding
    value["choices"] = [choice]
    value["usage"] = draw(st.sampled_from([None, None, "absent", {"completion_tokens": 3}]))
    if value["usage"] == "absent":
        del value["usage"]
    if where == "end":
        value["obfuscation"] = padding
    elif where == "choice":
        choice["obfuscation"] = padding
    return value


def _encoded(value: dict[str, Any], spaced: bool, ascii_only: bool) -> str:
    return json.dumps(
        value, ensure_ascii=ascii_only, separators=(", ", ": ") if spaced else (",", ":")
    )


def _slow(datas: list[str]) -> tuple[Accumulator, int]:
    """The slow path: every chunk parsed by json.loads and read whole by read_chunk; and how many
    carried answer text (the token-bearing chunks)."""
    acc = Accumulator()
    carried = 0
    for seq, data in enumerate(datas):
        carried += acc.fold(read_chunk(json.loads(data)), seq)
    acc.finish()
    acc.check_end(len(datas) + 1)  # as the state does at its end: after the chunks and [DONE]
    return acc, carried


def _results(acc: Accumulator) -> tuple[Any, ...]:
    calls = [
        (c.index, c.id, c.type, c.name, c.arguments, c.n_fragments, c.extra) for c in acc.tool_calls
    ]
    anomalies = [(a.kind, a.message, a.seq, a.count) for a in acc.anomalies]
    return (
        acc.content,
        acc.reasoning,
        acc.reasoning_details,
        # each plain reasoning string, though a readable detail hides it (rule 4)
        {name: "".join(parts) for name, parts in acc._reasoning_strings.items()},
        acc.refusal,
        calls,
        acc.n_chunks,
        acc.finish_reason,
        acc.role,
        acc.id,
        acc.model,
        acc.usage,
        anomalies,
    )


def _new_texts(draw: st.DrawFn, delta: dict[str, Any]) -> None:
    """A chunk of the same layout with texts of its own: a detail's is mostly the reasoning's."""
    for name in ("content", "reasoning_content", "reasoning"):
        if isinstance(delta.get(name), str) and (
            name != "content" or "reasoning_details" not in delta
        ):
            delta[name] = draw(TEXT)
    for detail in delta.get("reasoning_details") or ():
        key = next((k for k in ("text", "summary", "data") if k in detail), None)
        if key is not None and isinstance(detail[key], str):
            detail[key] = draw(st.sampled_from([delta.get("reasoning")] * 3 + [draw(TEXT)]))


@st.composite
def openrouter_stream(draw: st.DrawFn) -> list[dict[str, Any]]:
    """OpenRouter's reasoning chunks as it sends them (no padding, no usage): each one of a few
    layouts, with texts of its own (so that its fast path is taken, and left when it must be)."""
    layouts = [draw(detailed_delta(usual=True)), *draw(st.lists(detailed_delta(), max_size=2))]
    values = []
    for _ in range(draw(st.integers(1, 20))):
        delta = json.loads(json.dumps(draw(st.sampled_from(layouts))))
        _new_texts(draw, delta)
        choice = {"index": 0, "delta": delta, "finish_reason": None, "native_finish_reason": None}
        values.append(
            {
                "id": "gen-1",
                "object": "chat.completion.chunk",
                "created": 1777319837,
                "model": "x-ai/grok-4.1-fast",
                "provider": "xAI",
                "choices": [choice],
            }
        )
    return values


@st.composite
def stream(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Chunks of a few layouts, as a stream has: each chunk one of them with its own text and
    padding drawn (so that layouts repeat, with a different padding each time)."""
    layouts = draw(st.lists(chunk(), min_size=1, max_size=3))
    values = []
    if draw(st.booleans()):  # OpenAI's opening chunk: the role, an empty content
        values.append(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1782321930,
                "model": "gpt-5",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                ],
            }
        )
    for _ in range(draw(st.integers(1, 14))):
        value = json.loads(json.dumps(draw(st.sampled_from(layouts))))
        choice = value["choices"][0]
        if "obfuscation" in value:
            value["obfuscation"] = draw(PADDING)
        if "obfuscation" in choice:
            choice["obfuscation"] = draw(PADDING)
        delta = choice["delta"]
        _new_texts(draw, delta)
        for call in delta.get("tool_calls") or ():
            if isinstance(call["function"].get("arguments"), str):
                call["function"]["arguments"] = draw(TEXT)
        values.append(value)
    return values


@given(
    stream(),
    st.booleans(),
    st.booleans(),
    st.lists(st.integers(0, 4000), max_size=8),
    st.booleans(),
)
@settings(max_examples=400, deadline=None)
def test_a_random_field_in_every_chunk_reads_like_the_slow_path(
    values: list[dict[str, Any]], spaced: bool, ascii_only: bool, cuts: list[int], protected: bool
) -> None:
    _reads_like_the_slow_path(values, spaced, ascii_only, cuts, protected)


@given(
    openrouter_stream(),
    st.booleans(),
    st.lists(st.integers(0, 4000), max_size=8),
    st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_openrouter_reasoning_reads_like_the_slow_path(
    values: list[dict[str, Any]], spaced: bool, cuts: list[int], protected: bool
) -> None:
    # Each piece twice in one chunk (reasoning and its detail): its layout keeps both places.
    _reads_like_the_slow_path(values, spaced, False, cuts, protected)


def _reads_like_the_slow_path(
    values: list[dict[str, Any]], spaced: bool, ascii_only: bool, cuts: list[int], protected: bool
) -> None:
    datas = [_encoded(v, spaced, ascii_only) for v in values]
    parser = ChunkParser()
    for data in datas:  # the parser alone: what json.loads gives
        parsed, content = parser.parse(data)
        assert parsed == json.loads(data)
        assert list(parsed) == list(json.loads(data))  # keys in the order sent
        if content is not None:
            assert parsed["choices"][0]["delta"] == {"content": content}
    body = "".join(f"data: {d}\n\n" for d in datas).encode() + b"data: [DONE]\n\n"
    state = StreamState()
    if protected:  # a key to take out (none of these chunks can spell it): the redactor's path
        state.protect("sk-test-SECRET123")
    at = 0
    returned = []  # the chunks each read hands over (built as they are read)
    for cut in [*sorted({min(c, len(body)) for c in cuts}), len(body)]:  # the body in reads
        returned += list(state.feed(body[at:cut], 0))
        at = cut
    state.end(0)
    slow, carried = _slow(datas)
    assert _results(state.acc) == _results(slow)
    assert state.n_token_chunks == carried
    assert state.log.body == body
    assert returned == [json.loads(d) for d in datas]
    assert [list(c) for c in returned] == [list(json.loads(d)) for d in datas]  # keys as sent


def test_obfuscated_chunks_share_one_layout() -> None:
    # OpenAI's chunks as recorded, each with its own padding: one template serves them all.
    base = (
        '{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-5","service_tier":"default",'
        '"system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}],'
        '"usage":null,"obfuscation":"%s"}'
    )
    parser = ChunkParser()
    for i in range(200):
        data = base % (f"w{i}", "x" * (i % 16))
        assert parser.parse(data) == (json.loads(data), f"w{i}")
    assert len(parser._templates) == 1


@given(stream(), st.booleans())
@example(  # found by hypothesis: a refusal beside an empty content is text the skeleton carries
    [
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-5",
            "choices": [
                {"index": 0, "delta": {"content": "", "refusal": ":"}, "finish_reason": None}
            ],
            "usage": None,
            "obfuscation": "",
        }
    ],
    False,
)
@settings(max_examples=150, deadline=None)
def test_a_random_field_in_every_chunk_frames_like_the_slow_path(
    values: list[dict[str, Any]], spaced: bool
) -> None:
    # The frame reads each chunk skeleton (the chunk without its content string, and without its
    # padding) once: the frame is the one of every chunk parsed whole.
    import pandas as pd
    from conftest import frame_parsed_whole

    import nito_nb

    body = (
        "".join(f"data: {_encoded(v, spaced, False)}\n\n" for v in values).encode()
        + b"data: [DONE]\n\n"
    )
    stream_ = nito_nb.read_sse(body)
    pd.testing.assert_frame_equal(nito_nb.frame(stream_), frame_parsed_whole(stream_))


def test_obfuscated_chunks_frame_from_one_skeleton() -> None:
    import nito_nb
    from nito_nb._frame import build

    base = (
        '{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-5","service_tier":"default",'
        '"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}],"usage":null,"obfuscation":"%s"}'
    )
    body = "".join(f"data: {base % (f'w{i}', 'x' * (i % 16))}\n\n" for i in range(50)).encode()
    calls = []
    original = build._Builder._skeleton

    def counted(self: Any, key: bytes, padded: bool = False) -> int:
        calls.append(key)
        return original(self, key, padded)

    with patch.object(build._Builder, "_skeleton", counted):
        df = nito_nb.frame(nito_nb.read_sse(body))
    assert len(calls) == 1
    assert df.extras.dropna().tolist() == [
        json.dumps({"service_tier": "default", "obfuscation": "x" * (i % 16)}) for i in range(50)
    ]


@pytest.mark.parametrize("protected", [False, True])
@pytest.mark.parametrize("slot", ["content", "reasoning_content", "arguments", "detailed"])
def test_a_read_builds_no_chunk_that_nobody_reads(protected: bool, slot: str) -> None:
    # A run that only waits for its streams never reads their chunks: a chunk of a kept layout is
    # held as its template and text, and built when read (each read's chunk dicts, alive when the
    # collector's young passes ran, were promoted and made a full pass every ~25,000 chunks).
    from nito_nb._core import folding, layout

    delta = {
        "content": '"content":"%s"',
        "reasoning_content": '"content":null,"reasoning_content":"%s"',
        "arguments": '"tool_calls":[{"index":0,"function":{"arguments":"%s"}}]',
        # OpenRouter's: the text twice (a stand-in for the padding, which it does not send)
        "detailed": '"content":"","role":"assistant","reasoning":"%s","reasoning_details":'
        '[{"type":"reasoning.summary","summary":"%s","format":"xai-responses-v1","index":0}]',
    }[slot]
    base = (
        '{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-5","service_tier":"default",'
        '"choices":[{"index":0,"delta":{'
        + delta
        + '},"finish_reason":null}],"usage":null,"obfuscation":"%s"}'
    )
    if slot == "detailed":
        base = base.replace(',"obfuscation":"%s"', "")
        datas = [base % (f"w{i}", f"w{i}") for i in range(200)]
    else:
        datas = [base % (f"w{i}", "x" * (i % 16)) for i in range(200)]
    if slot == "arguments":  # the call opens with its id and name, then its fragments
        opening = '"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"%s"}}]'
        datas.insert(0, base.replace(delta, opening) % ("", ""))
    body = "".join(f"data: {d}\n\n" for d in datas).encode() + b"data: [DONE]\n\n"
    built = []
    original = layout.rebuild

    def counted(*args: Any) -> dict[str, Any]:
        built.append(args[1])
        return original(*args)

    with patch.object(layout, "rebuild", counted), patch.object(folding, "rebuild", counted):
        state = StreamState()
        if protected:  # a key taken out of the text: a text that cannot start it is left be
            state.protect("sk-test-SECRET123")
        reads = [state.feed(body[i : i + 4096], 0) for i in range(0, len(body), 4096)]
        state.end(0)
        # the templates' own checks, once each (and the opening call, read by the full rules)
        # (OpenRouter's: the first chunk's role, and its first repetition, by the full rules)
        assert len(built) <= {"arguments": 3, "detailed": 2}.get(slot, 1)
        text = {
            "content": state.acc.content,
            "reasoning_content": state.acc.reasoning,
            "detailed": state.acc.reasoning,
            "arguments": "".join(call.arguments for call in state.acc.tool_calls),
        }[slot]
        assert text == "".join(f"w{i}" for i in range(200))
        assert [chunk for read in reads for chunk in read] == [json.loads(d) for d in datas]
    assert len(built) >= 199  # built when read
