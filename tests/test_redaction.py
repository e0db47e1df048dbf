"""The key taken out of the decoded text of a stream: split across chunks, spelled with JSON
escapes, on every text channel; what a reader sees while the stream runs; the log, the saved file,
the frame and a Stream loaded again, all without it and all agreeing.

Streams fed by hand here (one layer: the state, its log and the frame made of it); the same
attacks over HTTP, through every place a user looks, are in test_redaction_places.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nito_nb
from nito_nb._core.errors import Secret

#: The issue's key, and one for the properties: capital letters that nothing else of a stream, a
#: saved log or a frame ever holds (no True, None, NaN, no date), with a start that repeats
#: inside it (QXQX...), so that a held-back end can be the start of the key twice over.
KEY = "sk-test-SECRET123"
KEY_H = "QXQXWJVKQXQY"
MARK = "[redacted]"


def escaped(text: str, positions: set[int] = frozenset()) -> str:  # type: ignore[assignment]
    """``text`` as a JSON string literal, the characters at ``positions`` as ``\\uXXXX``."""
    return (
        '"'
        + "".join(
            (f"\\u{ord(c):04x}" if i % 2 else f"\\u{ord(c):04X}")
            if i in positions
            else json.dumps(c)[1:-1]
            for i, c in enumerate(text)
        )
        + '"'
    )


# Each text channel: how a piece of it is sent (the delta, or the chunk's top level), how a
# snapshot or a Stream shows it, and the frame's column of it.
def _tool(piece: str) -> dict[str, Any]:
    return {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "f", "arguments": piece},
            }
        ]
    }


CHANNELS: dict[str, tuple[Callable[[str], dict[str, Any]], Callable[[Any], str], str]] = {
    "content": (lambda p: {"content": p}, lambda s: s.content, "content"),
    "text part": (
        lambda p: {"content": [{"type": "text", "text": p}]},
        lambda s: s.content,
        "content",
    ),
    "thinking": (
        lambda p: {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": p}]}]},
        lambda s: s.reasoning,
        "reasoning",
    ),
    "reasoning": (lambda p: {"reasoning": p}, lambda s: s.reasoning, "reasoning"),
    "reasoning_content": (lambda p: {"reasoning_content": p}, lambda s: s.reasoning, "reasoning"),
    "detail": (
        lambda p: {"reasoning_details": [{"type": "reasoning.text", "index": 0, "text": p}]},
        lambda s: s.reasoning,
        "reasoning",
    ),
    # OpenRouter's: the piece twice, as reasoning and as its detail's (its own fast path)
    "reasoning and detail": (
        lambda p: {
            "content": "",
            "role": "assistant",
            "reasoning": p,
            "reasoning_details": [
                {"type": "reasoning.summary", "summary": p, "format": "x", "index": 0}
            ],
        },
        lambda s: s.reasoning,
        "reasoning",
    ),
    "refusal": (lambda p: {"refusal": p}, lambda s: s.refusal or "", "refusal"),
    "tool": (_tool, lambda s: s.tool_calls[0].arguments if s.tool_calls else "", "tool_args"),
    "custom tool": (
        lambda p: {
            "tool_calls": [{"index": 0, "type": "custom", "custom": {"name": "f", "input": p}}]
        },
        lambda s: s.tool_calls[0].arguments if s.tool_calls else "",
        "tool_args",
    ),
    "transcript": (
        lambda p: {"audio": {"id": "a1", "transcript": p}},
        lambda s: s.audio_transcript or "",
        "audio",
    ),
    "error": (
        lambda p: {"error": {"message": p}},
        lambda s: (s.error or {}).get("message", ""),
        "error_message",
    ),
}

_PLACE = "\x00piece\x00"


def event(channel: str, piece: str, positions: set[int] = frozenset()) -> bytes:  # type: ignore[assignment]
    """One chunk of ``channel`` carrying ``piece``, the characters at ``positions`` escaped."""
    build = CHANNELS[channel][0]
    sent = build(_PLACE)
    chunk: dict[str, Any] = {
        "id": "g",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
    }
    if channel == "error":
        chunk.update(sent)
    else:
        chunk["choices"] = [{"index": 0, "delta": sent, "finish_reason": None}]
    text = json.dumps(chunk, ensure_ascii=False).replace(
        json.dumps(_PLACE), escaped(piece, positions)
    )
    return b"data: " + text.encode() + b"\n\n"


def protected(key: str = KEY) -> nito_nb.StreamSource:
    source = nito_nb.StreamSource({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    source.protect(key)
    return source


def frame_text(s: nito_nb.Stream, column: str) -> list[str]:
    """The channel's text on each row of the frame (the transcript is in the audio column's JSON)."""
    values = s.frame()[column].dropna().tolist()
    if column == "audio":
        return [json.loads(v).get("transcript", "") for v in values]
    return values


def decoded_strings(s: nito_nb.Stream) -> list[str]:
    """Every string of every logged chunk, decoded (escapes read)."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(k)
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for e in s.log:
        if e.kind == "chunk":
            walk(json.loads(e.data))
    return out


def without_key_chars(text: str, key: str = KEY_H) -> bool:
    return not set(text.replace(MARK, "")) & set(key)


# -- the two attacks of the issue, on every channel, at every split --------------------------------


@pytest.mark.parametrize("channel", list(CHANNELS))
@pytest.mark.parametrize("cut", range(1, len(KEY)))
def test_a_key_split_at_any_point_never_shows_and_leaves_a_marker(
    channel: str, cut: int, tmp_path: Path
) -> None:
    _, shown, column = CHANNELS[channel]
    source = protected()
    s = source.stream
    source.feed(event(channel, f"your key is {KEY[:cut]}"), 1)
    assert shown(s.snapshot()) == "your key is "  # the start of the key is held back
    source.feed(event(channel, f"{KEY[cut:]} ok"), 2)
    source.feed(b"data: [DONE]\n\n", 3)
    source.end(4)
    if channel != "error":  # an error's message is the last one's; the frame keeps each one
        assert shown(s) == f"your key is {MARK}{MARK} ok"
    assert shown(s.snapshot()) == shown(s)
    assert "".join(frame_text(s, column)) == f"your key is {MARK}{MARK} ok"
    saved = s.save(tmp_path / "s.jsonl").read_text()
    assert KEY not in saved and KEY not in s.log.body.decode() and KEY not in repr(s)
    assert KEY not in "".join(decoded_strings(s))
    loaded = nito_nb.load(tmp_path / "s.jsonl")
    assert shown(loaded) == shown(s) and loaded.log.body == s.log.body


@pytest.mark.parametrize("channel", list(CHANNELS))
def test_a_key_spelled_with_json_escapes_is_redacted(channel: str, tmp_path: Path) -> None:
    _, shown, column = CHANNELS[channel]
    source = protected()
    s = source.stream
    body = event(channel, f"a {KEY} b", {2 + KEY.index("S")})  # "sk-test-\u0053ECRET123"
    assert b"\\u0053ECRET123" in body and KEY.encode() not in body
    source.feed(body, 1)
    source.end(2)
    assert shown(s) == f"a {MARK} b" and frame_text(s, column) == [f"a {MARK} b"]
    assert KEY not in s.save(tmp_path / "s.jsonl").read_text() and KEY not in repr(s)
    assert KEY not in json.dumps(json.loads(s.log[0].data), ensure_ascii=False)


def test_an_escaped_key_anywhere_in_a_chunk_is_redacted() -> None:
    # Not a text channel: a vendor field, the model, a tool's name. Every string of the chunk.
    source = protected()
    s = source.stream
    source.feed(
        b'data: {"id":"g","model":"sk-test-\\u0053ECRET123","provider":{"note":"sk\\u002dtest-SECRET123"},'
        b'"choices":[{"index":0,"delta":{"content":"hi","tool_calls":[{"index":0,"id":"c",'
        b'"function":{"name":"sk-test-SECR\\u0045T123","arguments":"{}"}}]}}]}\n\n',
        1,
    )
    source.end(2)
    assert s.model == MARK and s.tool_calls[0].name == MARK
    assert KEY not in s.frame().to_csv() and KEY not in json.dumps(s.log[0].chunk)


def test_an_escaped_key_in_an_http_error_body_is_redacted() -> None:
    source = protected()
    s = source.stream
    source.fail_http(
        401,
        {"content-type": "application/json"},
        b'{"error": {"message": "bad key sk-test-\\u0053ECRET123"}}',
        1,
    )
    shown = [
        json.dumps(s.error),
        str(s.exception),
        repr(s),
        s.frame().to_csv(),
        s.log.body.decode(),
    ]
    assert not [text for text in shown if KEY in text]
    assert s.error["message"] == f"bad key {MARK}"


def test_a_key_split_across_many_chunks_and_reads() -> None:
    source = protected()
    s = source.stream
    body = b"".join(event("content", piece) for piece in ["x ", *KEY, " y"])
    for i in range(0, len(body), 7):
        source.feed(body[i : i + 7], i)
        assert KEY[:2] not in s.snapshot().content
    source.end(len(body))
    assert s.content == "x " + MARK * len(KEY) + " y"
    # replayed from the log
    assert "".join(chunk["choices"][0]["delta"]["content"] for chunk in s) == s.content
    # Events written again keep their time and kind (as without a key); the offsets still cut
    # the body into them.
    plain = nito_nb.StreamSource({"model": "m"})
    for i in range(0, len(body), 7):
        plain.feed(body[i : i + 7], i)
    log = s.log
    assert [(e.t_ns, e.kind) for e in log] == [(e.t_ns, e.kind) for e in plain.stream.log]
    ends = list(log.offsets())
    assert [log.body[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)] == [
        e.raw for e in log
    ]
    assert s.frame()["token"].sum() == len(KEY) + 2  # every chunk that carried text still does


def test_two_parts_of_one_chunk_and_a_key_after_done() -> None:
    source = protected()
    s = source.stream
    source.feed(
        b'data: {"id":"g","model":"m","choices":[{"index":0,"delta":{"content":['
        b'{"type":"text","text":"a sk-test-"},{"type":"text","text":"SECRET123 b"}]}}]}\n\n',
        1,
    )
    assert s.snapshot().content == f"a {MARK}{MARK} b"
    source.feed(
        event("content", "c sk-test-S")
        + b"data: [DONE]\n\n"
        + event("content", "ECRET123 ignored"),
        2,
    )
    source.end(3)
    assert s.content == f"a {MARK}{MARK} bc {MARK}"  # the chunk after [DONE] is ignored...
    # ...but logged
    assert KEY not in s.log.body.decode() and f"{MARK} ignored" in s.log.body.decode()


def test_what_cannot_become_the_key_shows_as_it_came() -> None:
    # Ends that could start the key are held back only until they cannot; then shown, and the
    # log keeps the bytes as they came.
    source = protected()
    s = source.stream
    sent = [
        event("content", piece)
        for piece in ["use sk-te", "rrible", " plans, ", "sk-test-SECRET12", "x!"]
    ]
    views = []
    for t, body in enumerate(sent):
        source.feed(body, t)
        views.append(s.snapshot().content)
    source.end(9)
    assert views == [
        "use ",
        "use sk-terrible",
        "use sk-terrible plans, ",
        "use sk-terrible plans, ",
        "use sk-terrible plans, sk-test-SECRET12x!",
    ]
    assert s.content == "use sk-terrible plans, sk-test-SECRET12x!"
    assert [e.raw for e in s.log] == sent


def test_a_key_whose_forms_start_differently() -> None:
    # "/" is written "\/" by some JSON encoders and "%2F" in a URL: three first characters.
    key = "/az/SECRET+base64=key0123"
    source = protected(key)
    s = source.stream
    sent = [
        "path ",
        "/az/SEC",
        "",
        "RET+base64=k",
        "ey0123 and %2Faz%2FSEC",
        "RET%2Bbase64%3Dkey0123!",
    ]
    for t, piece in enumerate(sent):
        source.feed(event("content", piece), t)
        assert "SEC" not in s.snapshot().content
    source.end(9)
    assert s.content == f"path {MARK}{MARK}{MARK} and {MARK}{MARK}!"
    assert "SEC" not in s.log.body.decode()


def test_the_end_of_the_stream_shows_what_was_held_back() -> None:
    source = protected()
    s = source.stream
    source.feed(event("content", "cut at sk-test-SEC"), 1)
    assert s.snapshot().content == "cut at "
    source.end(2)
    assert s.content == "cut at sk-test-SEC" and s.status == "truncated"


def test_a_key_split_across_two_error_chunks() -> None:
    source = protected()
    s = source.stream
    source.feed(event("content", "hi") + event("error", "rejected sk-test-SE"), 1)
    assert s.snapshot().error["message"] == "rejected "
    source.feed(event("error", "CRET123, retry"), 2)
    source.end(3)
    assert s.error["message"] == f"{MARK}, retry" and KEY not in str(s.exception)
    assert s.frame()["error_message"].dropna().tolist() == [f"rejected {MARK}", f"{MARK}, retry"]


# -- any split, any escapes, any reads ---------------------------------------------------------------

_AROUND = st.text(alphabet="abcdefghijlmnoprstu ,.!", max_size=8)


@given(
    channel=st.sampled_from(list(CHANNELS)),
    before=_AROUND,
    after=_AROUND,
    cuts=st.lists(st.integers(0, 40), max_size=6),
    escapes=st.sets(st.integers(0, len(KEY_H) - 1), max_size=4),
    reads=st.lists(st.integers(0, 2000), max_size=5),
    between=st.lists(
        st.sampled_from([b"", b": ping\n\n", b'data: {"id":"g","model":"m","choices":[]}\n\n']),
        min_size=8,
        max_size=8,
    ),
)
@settings(max_examples=400, deadline=None)
def test_any_split_and_escapes_never_show_the_key(
    channel: str,
    before: str,
    after: str,
    cuts: list[int],
    escapes: set[int],
    reads: list[int],
    between: list[bytes],
) -> None:
    _, shown, column = CHANNELS[channel]
    text = before + KEY_H + after
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces, escaped_at = [], []
    for a, b in zip([0, *points], [*points, len(text)], strict=True):
        pieces.append(text[a:b])
        escaped_at.append({i - a for i in range(a, b) if i - len(before) in escapes})
    # Events without text of the channel between its pieces (a keep-alive, a chunk of no text).
    body = (
        b"".join(
            event(channel, p, e) + between[i]
            for i, (p, e) in enumerate(zip(pieces, escaped_at, strict=True))
        )
        + b"data: [DONE]\n\n"
    )
    source = protected(KEY_H)
    s = source.stream
    at = sorted({r % (len(body) + 1) for r in reads})
    for a, b in zip([0, *at], [*at, len(body)], strict=True):
        source.feed(body[a:b], a)
        snapshot = s.snapshot()
        assert without_key_chars(shown(snapshot)), shown(snapshot)  # not one character of it, ever
    source.end(len(body))
    final = shown(s)
    if channel != "error":
        assert re.fullmatch(
            f"{re.escape(before)}(?:{re.escape(MARK)})+{re.escape(after)}", final
        ), final
    rows = frame_text(s, column)
    if channel != "error":
        assert "".join(rows) == final  # the frame and the Stream agree
    assert all(without_key_chars(row) for row in rows)
    assert all(without_key_chars(t) for t in decoded_strings(s))
    assert without_key_chars(s.log.body.decode()) and KEY_H not in repr(s)
    assert s.frame()["token"].sum() == s.snapshot().n_token_chunks
    again = nito_nb.read_sse(s.log.body)
    assert shown(again) == final and again.n_chunks == s.n_chunks


def _token_entry(token: str) -> dict[str, Any]:
    # The top alternative is the token itself (as OpenAI sends it), the second another case.
    return {
        "token": token,
        "logprob": -0.5,
        "bytes": list(token.encode()),
        "top_logprobs": [
            {"token": t, "logprob": -0.5, "bytes": list(t.encode())} for t in (token, token.lower())
        ],
    }


def _token_texts(entries: list[dict[str, Any]]) -> list[str]:
    """Each token and alternative of ``entries``, and what each list of bytes spells."""
    out = []
    for entry in entries:
        for one in (entry, *entry.get("top_logprobs", [])):
            out += [one["token"], bytes(one["bytes"]).decode("utf-8", "replace")]
    return out


@given(
    before=_AROUND,
    after=_AROUND,
    cuts=st.lists(st.integers(0, 40), max_size=8),
    groups=st.lists(st.integers(0, 10), max_size=4),
    escapes=st.sets(st.sampled_from(sorted(set(KEY_H))), max_size=3),
    reads=st.lists(st.integers(0, 4000), max_size=5),
)
@settings(max_examples=300, deadline=None)
def test_any_split_of_the_logprobs_tokens_never_shows_the_key(
    before: str,
    after: str,
    cuts: list[int],
    groups: list[int],
    escapes: set[str],
    reads: list[int],
) -> None:
    # The key in the tokens of logprobs, cut into tokens anywhere, the tokens into chunks anywhere,
    # some of its letters JSON-escaped (in every string of the chunk: the content and the tokens).
    text = before + KEY_H + after
    points = sorted({c % (len(text) + 1) for c in cuts})
    tokens = [
        t for t in (text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)) if t
    ]
    bounds = sorted({g % (len(tokens) + 1) for g in groups})
    body = b""
    for a, b in zip([0, *bounds], [*bounds, len(tokens)], strict=True):
        if a == b:
            continue
        chunk = {
            "id": "g",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": "".join(tokens[a:b])},
                    "logprobs": {"content": [_token_entry(t) for t in tokens[a:b]]},
                    "finish_reason": None,
                }
            ],
        }
        data = json.dumps(chunk)
        for letter in escapes:
            data = data.replace(letter, f"\\u{ord(letter):04X}")
        body += b"data: " + data.encode() + b"\n\n"
    body += b"data: [DONE]\n\n"
    source = protected(KEY_H)
    s = source.stream
    at = sorted({r % (len(body) + 1) for r in reads})
    for a, b in zip([0, *at], [*at, len(body)], strict=True):
        source.feed(body[a:b], a)
        # held back while it arrives
        assert all(without_key_chars(t) for t in _token_texts(s.logprobs))
    source.end(len(body))
    shown = [t["token"] for t in s.logprobs]
    assert len(shown) == len(tokens)  # every token keeps its place
    assert re.fullmatch(
        f"{re.escape(before)}(?:{re.escape(MARK)})+{re.escape(after)}", "".join(shown)
    ), shown
    assert all(without_key_chars(t) for t in _token_texts(s.logprobs))
    assert all(without_key_chars(t) for t in decoded_strings(s))
    assert all(without_key_chars(bytes(e["bytes"]).decode()) for e in s.logprobs)
    rows = s.frame().nito.tokens()
    assert rows["token"].tolist() == shown and without_key_chars(rows.to_csv())
    assert without_key_chars(s.log.body.decode())


def test_secret_helpers() -> None:
    secret = Secret(KEY)
    assert [
        secret.partial_at_end(t) for t in ("", "s", "xs", "sk-test-SEC", "sk-test", "this", KEY)
    ] == [0, 1, 1, 11, 7, 1, 0]
    assert (
        Secret(KEY_H).partial_at_end("aQXQXQX") == 4 and Secret(KEY_H).partial_at_end("aQXQ") == 3
    )  # the longest
    assert secret.hold_back("your key is sk-t") == "your key is "
    assert secret.spans(f"a {KEY} b {KEY}") == [(2, 19), (22, 39)]
    assert secret.escaped_in(b'"sk-test-\\u0053ECRET123"') and not secret.escaped_in(
        b'"caf\\u00e9 \\n"'
    )


def test_a_tool_call_of_a_stream_still_arriving_pickles_without_the_key() -> None:
    import pickle

    source = protected()
    s = source.stream
    source.feed(event("tool", '{"q": "sk-te'), 1)
    call = s.tool_calls[0]
    assert call.arguments == '{"q": "'
    assert b"SECRET" not in pickle.dumps(call) and KEY not in repr(call)


@pytest.mark.parametrize(
    ("key", "content"),
    [
        ("/JJJJJJ/xyz", "\\/JJJJJJ/xyz"),  # the key's "/" sent escaped: \/
        ("nvapi-0123456789", "a\\nvapi-0123456789 b"),  # a line break, then the key's rest
        ("nvapi-0123456789", "a\\\\nvapi-0123456789 b"),  # an escaped backslash, then the key
    ],
)
def test_a_key_right_after_an_escape_leaves_the_chunk_json(key: str, content: str) -> None:
    # The read's byte search found the key one byte after a backslash; replacing it alone left
    # "\[redacted]", no JSON escape: the chunk was lost as bad data. The backslash goes with it.
    body = (
        b'data: {"id":"g","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        b'[{"index":0,"delta":{"content":"' + content.encode() + b'"},"finish_reason":null}]}\n\n'
        b"data: [DONE]\n\n"
    )
    source = protected(key)
    s = source.stream
    source.feed(body, 1)
    source.end(2)
    assert [a.kind for a in s.anomalies] == []
    assert MARK in s.content and key not in s.content
    for event in s.log:
        if event.kind == "chunk":
            assert key not in json.dumps(json.loads(event.data), ensure_ascii=False)
    assert key.encode() not in s.log.body


def test_a_key_right_after_an_escape_leaves_an_error_body_json() -> None:
    # The HTTP error body is the gateway's JSON too: its message is read from it, not the raw body.
    key = "/JJJJJJ/xyz"
    source = protected(key)
    body = b'{"error":{"message":"bad key \\/JJJJJJ/xyz here","code":401}}'
    error = source.fail_http(401, {"content-type": "application/json"}, body, 1)
    assert error.message == f"bad key {MARK} here"
    assert json.loads(source.stream.log.body)["error"]["message"] == f"bad key {MARK} here"
