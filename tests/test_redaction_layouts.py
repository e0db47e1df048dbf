"""The key in chunks of a kept layout reads as on the slow path.

A chunk whose layout the parser keeps (``_core/layout.py``) is not built, and the redactor reads
it only when it can matter: a key pending or starting at its end, a layout whose own strings hold
the key (``StreamRedactor.new_layout``, once per layout), or a text with escapes as long as the
key. Here the same keyed bodies (tool-argument fragments, content, reasoning; the key split across
them, escaped, in a text of its own, in a field every chunk of a layout repeats; OpenAI's padding)
are fed with the layout cache and without it (``MAX_TEMPLATES`` 0: every chunk parsed and read by
the redactor), in the same reads: the log, what a reader sees after each read and at the end, and
the chunks handed over are the same.
"""

from __future__ import annotations

import json
from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

import nito_nb
from nito_nb._core import layout

MARK = "[redacted]"
# Capital letters that nothing else of these chunks holds; one with "/" (escaped as "\/" too), one
# longer than most texts, one of the shortest a key may be.
KEYS = ["QXQXWJVKQXQY", "QX/WJ/VKQXZ", "QXWJVKQXQYZWJVKXQWJVKZQXWJVKQ", "QXWJVKQZ"]
_PLACE = "\x00piece\x00"
TEXT = st.text(alphabet=st.sampled_from(list('ab "\\\n\u00e9{}:,QX')), max_size=6)


def escaped(text: str, positions: set[int]) -> str:
    """``text`` as the inside of a JSON string, the characters at ``positions`` as ``\\uXXXX``
    (either case) or, for "/", ``\\/``."""
    out = []
    for i, c in enumerate(text):
        if i not in positions:
            out.append(json.dumps(c, ensure_ascii=False)[1:-1])
        elif c == "/" and i % 3 == 0:
            out.append("\\/")
        else:
            out.append(f"\\u{ord(c):04x}" if i % 2 else f"\\u{ord(c):04X}")
    return "".join(out)


def _chunk(delta: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }


@st.composite
def body(draw: st.DrawFn) -> tuple[str, bytes]:
    key = draw(st.sampled_from(KEYS) | st.text(st.sampled_from(list("QXWJVKZ/-")), min_size=8))
    # Tool calls with an index, or (as some gateways send them) without one: a call then opens
    # with its id, and a fragment without an id continues the last call.
    indexed = draw(st.booleans())
    # A few layouts: a tool call's fragments (of call 0 or 1), content, reasoning; each maybe
    # with OpenAI's padding, and maybe a field that every chunk of it repeats holding the key,
    # escaped (the read's search cannot find it).
    layouts = []
    for _ in range(draw(st.integers(1, 3))):
        slot = draw(st.sampled_from(["arguments", "arguments", "content", "reasoning_content"]))
        if slot == "arguments":
            fragment: dict[str, Any] = {"function": {"arguments": _PLACE}}
            if indexed:
                fragment = {"index": draw(st.sampled_from([0, 0, 1])), **fragment}
            delta: dict[str, Any] = {"tool_calls": [fragment]}
        else:
            delta = {slot: _PLACE}
        value = _chunk(delta)
        fixed = draw(st.sampled_from(["", "", "", "key", "part"]))
        if fixed:
            value["system_fingerprint"] = _PLACE * 2  # the key, or its start, escaped
        if draw(st.booleans()):
            value["obfuscation"] = "pad"
        layouts.append((slot, value, fixed))
    datas = []
    calls = 0
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.integers(0, 3)) == 0:  # a call opens, with its id and name
            call: dict[str, Any] = {"index": calls} if indexed else {}
            call.update(id=f"call_{calls}", type="function")
            call["function"] = {"name": "f", "arguments": ""}
            datas.append(json.dumps(_chunk({"tool_calls": [call]}), separators=(",", ":")))
            calls += 1
            continue
        slot, value, fixed = draw(st.sampled_from(layouts))
        # A text holding the key (or not), cut into the pieces of consecutive chunks.
        around = st.just("") | TEXT
        before, after = draw(around), draw(around)
        text = before + (key if draw(st.booleans()) else draw(TEXT)) + after
        cuts = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=4))))
        escapes = draw(st.sets(st.integers(0, len(text) - 1), max_size=4)) if text else set()
        for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True):
            data = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            if fixed:
                spelled = escaped(key if fixed == "key" else key[:3], {0, 2})
                data = data.replace(json.dumps(_PLACE * 2), f'"{spelled}"')
            if "obfuscation" in value:
                pad = draw(st.text(st.sampled_from(list("abQ09")), max_size=12))
                data = data.replace('"obfuscation":"pad"', f'"obfuscation":"{pad}"')
            piece = escaped(text[a:b], {i - a for i in escapes if a <= i < b})
            datas.append(data.replace(json.dumps(_PLACE), f'"{piece}"'))
    sent = "".join(f"data: {d}\n\n" for d in datas).encode() + b"data: [DONE]\n\n"
    return key, sent


def seen(s: nito_nb.Stream) -> tuple[Any, ...]:
    snapshot = s.snapshot()
    calls = [(c.index, c.id, c.name, c.arguments) for c in snapshot.tool_calls]
    return snapshot.content, snapshot.reasoning, calls, snapshot.n_token_chunks


def feed(key: str, sent: bytes, reads: list[int], protect_at: int) -> tuple[Any, ...]:
    """The body fed in ``reads``, the key protected before read ``protect_at`` (a source may be
    protected when some of the body has arrived: the layouts learnt before are new to the
    redactor)."""
    source = nito_nb.StreamSource({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    s = source.stream
    views, chunks = [], []
    at = sorted({r % (len(sent) + 1) for r in reads})
    for i, (a, b) in enumerate(zip([0, *at], [*at, len(sent)], strict=True)):
        if i == protect_at:
            source.protect(key)
        chunks += list(source.feed(sent[a:b], a))
        views.append(seen(s))
    source.end(len(sent))
    views.append(seen(s))
    return s.log.body, views, chunks


@given(body(), st.lists(st.integers(0, 5000), max_size=5), st.sampled_from([0, 0, 0, 1, 2]))
@settings(max_examples=500, deadline=None)
def test_a_kept_layout_redacts_as_the_slow_path(
    keyed: tuple[str, bytes], reads: list[int], protect_at: int
) -> None:
    key, sent = keyed
    fast = feed(key, sent, reads, protect_at)
    with patch.object(layout, "MAX_TEMPLATES", 0):  # every chunk parsed, every one read whole
        slow = feed(key, sent, reads, protect_at)
    assert fast == slow
    if protect_at:
        return  # what arrived before the key was protected is as it came
    for line in fast[0].decode().splitlines():  # and the key is in no decoded string
        if line.startswith("data: {"):
            assert key not in json.dumps(json.loads(line[6:]), ensure_ascii=False)
    assert key not in json.dumps(fast[2], ensure_ascii=False)


def test_a_layout_learnt_before_the_key_was_protected() -> None:
    # Calls without an index: a fragment without an id continues the last call. Its layout is
    # learnt before the key is protected, so the redactor first meets it in a chunk it is not
    # handed (nothing to read in it): the call must still count, or the next call is taken for
    # it, and the key split across that call's fragments is looked for in the wrong one.
    def fragment(arguments: str, opening: str | None = None) -> bytes:
        call: dict[str, Any] = {"function": {"arguments": arguments}}
        if opening is not None:
            call = {"id": opening, "type": "function", "function": {"name": "f", "arguments": ""}}
        data = json.dumps(_chunk({"tool_calls": [call]}), separators=(",", ":"))
        return f"data: {data}\n\n".encode()

    key = KEYS[0]
    before = fragment("", "call_a") + fragment('{"a') + fragment('": 1')
    after = (
        fragment(', "b')  # the call's layout, met by the redactor for the first time
        + fragment("", "call_b")
        + fragment('{"k": "' + key[:5])
        + fragment(key[5:] + '"}')
        + b"data: [DONE]\n\n"
    )
    for templates in (layout.MAX_TEMPLATES, 0):
        with patch.object(layout, "MAX_TEMPLATES", templates):
            source = nito_nb.StreamSource({"model": "m", "messages": []})
            source.feed(before, 0)
            source.protect(key)
            source.feed(after, 1)
            source.end(2)
        s = source.stream
        assert [c.arguments for c in s.tool_calls] == [
            '{"a": 1, "b',
            '{"k": "' + MARK * 2 + '"}',
        ]  # each piece, in its event
        assert key[:5] not in s.log.body.decode()


def test_a_key_across_two_strings_rewrites_nothing() -> None:
    # The key's form is in the JSON of the chunk only across two of its strings (a list's items,
    # written with the separator json.dumps puts), so in none of them: the chunk stays as it came,
    # as a chunk of a kept layout does, which the redactor is not handed.
    key = 'QXQX", "QYQY'
    sent = (
        b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        b'[{"index":0,"delta":{"content":"\\u0051"},"finish_reason":null}],"x":["QXQX","QYQY"]}'
        b"\n\ndata: [DONE]\n\n"
    )
    source = nito_nb.StreamSource({"model": "m", "messages": []})
    source.protect(key)
    source.feed(sent, 0)
    source.end(1)
    assert source.stream.log.body == sent and source.stream.content == "Q"


def test_an_ended_keyed_stream_keeps_no_layout() -> None:
    # The redactor holds the layouts it read, as the parser does: both let go when the stream
    # ends (a run keeps its ended streams; a layout is a few KB).
    source = nito_nb.StreamSource({"model": "m"})
    source.protect(KEYS[0])
    body = "".join(
        f"data: {json.dumps(_chunk({'content': f'w{i}'}), separators=(',', ':'))}\n\n"
        for i in range(20)
    )
    source.feed(body.encode(), 5)
    redactor = source.stream._state.redactor
    assert redactor is not None and redactor.layout is not None  # read while the stream ran
    source.feed(b"data: [DONE]\n\n", 6)
    source.end(7)
    assert redactor.layout is None and not redactor._layouts
    assert source.stream.content == "".join(f"w{i}" for i in range(20))
