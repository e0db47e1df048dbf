"""The scenarios that answer normally: echo, prose, a server with a capacity, reasoning, Mistral's
parts, web search, the free tier, a long think, a big chunk and a long stream.

Those that answer in words answer JSON instead when the request's `response_format` asks for it
(`_structured.answer_text`); the big chunk and the long stream, which measure a client, do not.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator

from ._attachments import received
from ._reply import KEEPALIVE, Event
from ._request import message_text
from ._structured import answer_text
from ._texts import (
    CHAT_ANSWERS,
    FREE_ANSWER,
    REASONING_ANSWER,
    REASONING_SUMMARY,
    REASONING_TEXT,
    SERVER_ANSWER,
    SLOW_ANSWER,
    WEB_ANSWER,
    long_fragments,
)
from ._writer import ChunkWriter, Generate, some


def _echo(w: ChunkWriter) -> Iterator[Event]:
    users = [m for m in w.request.messages if m.get("role") == "user"]
    text = message_text(users[-1]) if users else ""
    parts = [line for m in users for line in received(m)]
    if parts:  # the images and files of the whole request, for a test to check (none is looked at)
        text += f"\n\n[received {len(parts)}: " + "; ".join(parts) + "]"
    yield from w.contents(answer_text(w.request, text))
    yield from w.finish("stop")


def _chat(w: ChunkWriter) -> Iterator[Event]:
    # n > 1: choice k answers with seed + k, so its texts alternate; past the second choice, the
    # simulator's other answers follow, so that every choice of n up to 2 + len(_MORE) differs.
    index = w.request.options.seed % len(CHAT_ANSWERS)
    text = (
        CHAT_ANSWERS[index] if w.choice < len(CHAT_ANSWERS) else _MORE[(w.choice - 2) % len(_MORE)]
    )
    yield from w.contents(answer_text(w.request, text))
    yield from w.finish("stop")


_MORE = (SERVER_ANSWER, WEB_ANSWER, FREE_ANSWER, SLOW_ANSWER)


def _server(w: ChunkWriter) -> Iterator[Event]:
    # Paced by the capacity model (`_capacity.py`), which the request parser turns on for it.
    yield from w.contents(answer_text(w.request, SERVER_ANSWER))
    yield from w.finish("stop")


def _mistral(w: ChunkWriter) -> Iterator[Event]:
    # As Magistral streams: a role chunk with empty content, thinking parts, then text parts.
    yield Event("send", w.chunk({"content": ""}))
    if not w.request.reasoning_exclude:
        yield from w.parts("thinking", REASONING_TEXT)
    yield from w.parts("text", answer_text(w.request, REASONING_ANSWER))
    yield from w.finish("stop")


def _reasoning(w: ChunkWriter) -> Iterator[Event]:
    if not w.request.reasoning_exclude:
        signature = base64.b64encode(hashlib.sha256(w.id.encode()).digest()).decode()
        yield from w.reasoning("reasoning.text", 0, REASONING_TEXT, signature=signature)
        yield from w.reasoning("reasoning.summary", 1, REASONING_SUMMARY)
        blob = base64.b64encode(hashlib.sha512(REASONING_TEXT.encode()).digest() * 4).decode()
        yield from some([w.encrypted(2, blob)])
    yield from w.contents(answer_text(w.request, REASONING_ANSWER))
    yield from w.finish("stop")


def _websearch(w: ChunkWriter) -> Iterator[Event]:
    query = message_text(w.request.messages[-1])[:100] or "server-sent events"
    web_search = {
        "query": query,
        "results": [
            {
                "title": "Streaming responses",
                "url": "https://example.com/streaming",
                "snippet": "Stream model output with server-sent events.",
            },
            {
                "title": "HTML Living Standard: server-sent events",
                "url": "https://html.spec.whatwg.org/multipage/server-sent-events.html",
                "snippet": "The text/event-stream format.",
            },
        ],
    }
    yield Event("send", w.chunk({"content": ""}, web_search=web_search))
    yield from w.contents(answer_text(w.request, WEB_ANSWER))
    yield from w.finish("stop")


def _free(w: ChunkWriter) -> Iterator[Event]:
    free_tier = {"eligible": True, "plan": "free", "requests_remaining": 41, "daily_limit": 50}
    yield Event("send", w.chunk({"content": ""}, free_tier=free_tier))
    yield from w.contents(answer_text(w.request, FREE_ANSWER))
    yield from w.finish("stop")


def _slow(w: ChunkWriter) -> Iterator[Event]:
    options = w.request.options
    # At least a few comments, even for a short think, so that clients always meet some.
    beats = max(3, round(options.think_s / options.keepalive_s)) if options.keepalive_s else 3
    for _ in range(beats):
        yield Event("send", KEEPALIVE)
        yield Event("pause", seconds=options.think_s / beats)
    yield from w.contents(answer_text(w.request, SLOW_ANSWER))
    yield from w.finish("stop")


def _bigchunk(w: ChunkWriter) -> Iterator[Event]:
    size = w.request.options.size
    line = "Line {:07d}: the quick brown fox jumps over the lazy dog, again and again.\n"
    per_line = len(line.format(0))
    text = "".join(line.format(i) for i in range(size // per_line + 1))[:size]
    yield from w.contents("Here comes a big one:\n\n")
    # One delta, whatever its size: that is the point of this scenario.
    yield from some([w.content(text)])
    yield from w.contents("\n\nThat was it.")
    yield from w.finish("stop")


def _long(w: ChunkWriter) -> Iterator[Event]:
    fragments = long_fragments(w.request.options.seed)
    count = w.request.options.chunks
    if w.request.stop:
        # Rare, and exactness matters more than speed here: cut the whole text at the stop.
        period = "".join(fragments)
        text = period * (count // len(fragments)) + "".join(fragments[: count % len(fragments)])
        yield from w.contents(text)
        yield from w.finish("stop")
        return
    # Encode each distinct fragment once: sim/long feeds the client benchmarks, and the server
    # must not be their bottleneck. Every fragment is one token (see `tokenize`).
    cache: dict[str, bytes] = {}
    first = w.content(fragments[0]) if count else None
    if first is not None:
        yield first
    for i in range(1, count):
        if not w.spend(1):
            break
        fragment = fragments[i % len(fragments)]
        data = cache.get(fragment)
        if data is None:
            data = cache[fragment] = w.content_data(fragment)
        yield Event("token", data)
    yield from w.finish("stop")


STORIES: dict[str, Generate] = {
    "sim/echo": _echo,
    "sim/chat": _chat,
    "sim/server": _server,
    "sim/reasoning": _reasoning,
    "sim/mistral": _mistral,
    "sim/websearch": _websearch,
    "sim/free": _free,
    "sim/slow": _slow,
    "sim/bigchunk": _bigchunk,
    "sim/long": _long,
}
