"""The simulator's scenarios: pure functions from a chat request to the bytes of a reply.

Nothing here does I/O, reads the clock or the environment: a request (and, for replay, the bytes
of a recording) goes in, a `Reply` comes out. A streamed reply is a lazy sequence of `Event`s,
each already encoded as SSE bytes; `schedule()` turns them into `(time offset, bytes)` pairs
according to the pacing, and the ASGI shell in `_app.py` only sleeps and writes. Keeping the
generators pure lets the tests check every scenario without a server, and keeps the server fast:
the bytes of a chunk are built once, with a pre-encoded prefix and suffix, never re-serialised.

Token counting is deliberately simple and deterministic: a token is a run of whitespace followed
by up to 7 non-space characters (`tokenize`). Text is streamed one token per content or reasoning
chunk, so `usage.completion_tokens` equals the number of token-bearing fragments sent (tool-call
arguments, cut into small pieces, count the tokens of each piece).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import random
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# The scenario models, with the one-line description shown by `GET /v1/models`.
SIM_MODELS: dict[str, str] = {
    "sim/echo": "Answers with the prompt, word by word.",
    "sim/chat": "Plausible Markdown prose: headings, lists, a code block, a table, non-ASCII text.",
    "sim/reasoning": "reasoning_details of types text, summary and encrypted (readable ones with the"
    " same text in `reasoning`), then the answer.",
    "sim/mistral": "Mistral's format: `content` as a list of parts, thinking parts then text parts.",
    "sim/tools": "Parallel tool calls built from the request's `tools`; answers after a tool message.",
    "sim/websearch": "An answer with citations and a `web_search` object.",
    "sim/free": "An answer carrying a `free_tier` object.",
    "sim/slow": "Long thinking with keep-alive comments (`sim.think_s`), then a short answer.",
    "sim/error-midstream": "Some content, then an error chunk with finish_reason `error`.",
    "sim/drop": "Some content, then the connection is cut: no [DONE].",
    "sim/stall": "Some content, then silence for `sim.stall_s` (default 60 s), then the rest.",
    "sim/garbage": "A data line that is not JSON in the middle of a normal stream.",
    "sim/http-401": "HTTP 401 with a JSON error body.",
    "sim/http-402": "HTTP 402 (out of credits) with a JSON error body.",
    "sim/http-429": "HTTP 429 with `Retry-After` (`sim.retry_after`, default 1) and a JSON body.",
    "sim/http-500-html": "HTTP 500 with an HTML page (CRLF line ends).",
    "sim/http-503": "HTTP 503 (no provider available) with a JSON error body.",
    "sim/bigchunk": "One content delta of 1 MiB (`sim.size`).",
    "sim/long": "Tens of thousands of ~4-byte chunks of Markdown (`sim.chunks`, default 20000).",
    "sim/replay": "Replays a recorded .sse body or a nito_nb .jsonl log (`sim.replay`, `sim.speed`).",
}

KEEPALIVE = b": NITO PROCESSING\n\n"
DONE = b"data: [DONE]\n\n"

# Prices used for `usage.cost`, in dollars per token: the numbers are made up, the arithmetic is
# what a gateway does (cached prompt tokens are billed at a quarter of the price).
PRICE_PROMPT = 0.5e-6
PRICE_CACHED = 0.125e-6
PRICE_COMPLETION = 1.5e-6

DEFAULT_TTFT_MS = 400.0
MAX_CHOICES = 8  # the most choices (`n`) one request may ask for
DEFAULT_TPS = 80.0
DEFAULT_JITTER = 0.5

_TOKEN = re.compile(r"\s*\S{1,7}|\s+")


def tokenize(text: str) -> list[str]:
    """Split text into token-ish fragments whose concatenation is exactly the text."""
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


# --------------------------------------------------------------------------------------------
# Events and replies


EventKind = Literal["token", "send", "pause", "at", "drop"]


@dataclass(frozen=True, slots=True)
class Event:
    """One step of a streamed reply.

    `token`: SSE bytes of a token-bearing chunk, paced by the tokens-per-second setting.
    `send`: bytes sent at once (comments, the terminal and usage chunks, `[DONE]`, garbage).
    `pause`: silence for `seconds` (stalls, long thinking).
    `at`: bytes due `seconds` after the response started (replay of a timed log).
    `drop`: cut the connection here.
    """

    kind: EventKind
    data: bytes = b""
    seconds: float = 0.0


@dataclass(frozen=True)
class ErrorReply:
    """A complete non-streamed HTTP response (an error, or a replayed error body)."""

    status: int
    body: bytes
    content_type: str | None = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamReply:
    """A streamed response: its status line and headers, then the events of its body."""

    events: Iterable[Event]
    status: int = 200
    content_type: str | None = "text/event-stream"
    headers: Mapping[str, str] = field(default_factory=dict)
    # Replay of a timed log: how long the recorded gateway took to send its headers.
    headers_delay_s: float = 0.0


Reply = ErrorReply | StreamReply


def error_body(status: int, message: str, metadata: Mapping[str, Any] | None = None) -> bytes:
    error: dict[str, Any] = {"code": status, "message": message}
    if metadata:
        error["metadata"] = dict(metadata)
    return json.dumps({"error": error}).encode()


def error_reply(
    status: int, message: str, metadata: Mapping[str, Any] | None = None, **headers: str
) -> ErrorReply:
    return ErrorReply(status, error_body(status, message, metadata), headers=headers)


# --------------------------------------------------------------------------------------------
# The request


@dataclass(frozen=True)
class SimOptions:
    """Settings of one request: the body's `"sim"` object over the environment's defaults."""

    # Pacing (defaults: NITO_SIM_TTFT_MS, NITO_SIM_TPS, NITO_SIM_JITTER, else like a real model).
    ttft_ms: float = DEFAULT_TTFT_MS  # time to first token
    tps: float = DEFAULT_TPS  # tokens per second; 0 = as fast as possible (ttft, think_s 0)
    jitter: float = DEFAULT_JITTER  # each gap is 1/tps times a factor in [1 - jitter, 1 + jitter]
    seed: int = 0  # picks the text variant, tool arguments and jitter (also the body's `seed`)
    # Scenario settings.
    chunks: int = 20_000  # sim/long: number of content chunks
    size: int = 1 << 20  # sim/bigchunk: bytes of the big delta
    stall_s: float = 60.0  # sim/stall: silence in the middle of the stream
    think_s: float = 5.0  # sim/slow: thinking time, with keep-alive comments
    keepalive_s: float = 1.0  # interval of keep-alive comments while thinking
    retry_after: float = 1.0  # sim/http-429: the Retry-After header
    tool_calls: int | None = None  # sim/tools: number of calls (default: one per tool, up to 4)
    interleave: bool = False  # sim/tools: interleave the fragments of parallel calls
    # Faults of a flaky gateway, on any model (see `fault`).
    fail_rate: float = 0.0  # the share of distinct requests that fail, picked by hash
    fail_status: int | str = 429  # an HTTP status >= 400, "drop" or "error" (mid-stream)
    fail_attempts: int = 1  # a picked request fails this many times, then goes through
    # sim/replay.
    replay: str | None = None  # path of a .sse recording or a nito_nb .jsonl log
    speed: float = 1.0  # timing of a log divided by this; 0 = as fast as possible
    status: int | None = None  # override the recorded HTTP status
    content_type: str | None = None  # override the recorded content type


_NUMBER_OPTIONS = ("ttft_ms", "tps", "jitter", "stall_s", "think_s", "keepalive_s", "speed")
_INT_OPTIONS = ("seed", "chunks", "size", "status", "tool_calls", "fail_attempts")
FAULTS = ("drop", "error")
_ENV_OPTIONS = {"NITO_SIM_TPS": "tps", "NITO_SIM_TTFT_MS": "ttft_ms", "NITO_SIM_JITTER": "jitter"}


class OptionError(ValueError):
    """A `sim` option or a NITO_SIM_* variable that is not usable."""


def _number(name: str, value: Any, *, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OptionError(f"sim.{name} must be a number, got {value!r}")
    if value < 0 or value != value:
        raise OptionError(f"sim.{name} must be >= 0, got {value!r}")
    if integer and int(value) != value:
        raise OptionError(f"sim.{name} must be an integer, got {value!r}")
    return value


def parse_options(sim: Any, env: Mapping[str, str], seed: Any = None) -> SimOptions:
    """Merge the request's `"sim"` object over NITO_SIM_* variables over the defaults.

    `tps: 0` means as fast as possible: then the time to first token and sim/slow's thinking
    time are 0 too, unless given explicitly (in the request or the environment).
    """
    values: dict[str, Any] = {}
    for var, name in _ENV_OPTIONS.items():
        raw = env.get(var, "").strip()
        if raw:
            try:
                values[name] = _number(name, float(raw))
            except ValueError as exc:
                raise OptionError(f"{var}={raw!r} is not a number >= 0") from exc
    if seed is not None:
        values["seed"] = int(_number("seed", seed, integer=True))
    if sim is not None and not isinstance(sim, dict):
        raise OptionError(f"`sim` must be an object, got {sim!r}")
    for name, value in (sim or {}).items():
        if name in _NUMBER_OPTIONS:
            values[name] = float(_number(name, value))
        elif name in _INT_OPTIONS:
            values[name] = int(_number(name, value, integer=True))
        elif name == "retry_after":
            values[name] = _number(name, value)
        elif name in ("replay", "content_type"):
            if not isinstance(value, str):
                raise OptionError(f"sim.{name} must be a string, got {value!r}")
            values[name] = value
        elif name == "fail_rate":
            values[name] = _number(name, value)
            if values[name] > 1:
                raise OptionError(f"sim.fail_rate is a share between 0 and 1, got {value!r}")
        elif name == "fail_status":
            if value in FAULTS or (type(value) is int and 400 <= value <= 599):
                values[name] = value
            else:
                raise OptionError(
                    f"sim.fail_status must be an HTTP status 400-599, \"drop\" or \"error\", got {value!r}"
                )
        elif name == "interleave":
            if not isinstance(value, bool):
                raise OptionError(f"sim.interleave must be true or false, got {value!r}")
            values[name] = value
        else:
            raise OptionError(f"unknown sim option {name!r}")
    if "status" in values and not 100 <= values["status"] <= 599:
        raise OptionError(f"sim.status must be an HTTP status (100-599), got {values['status']}")
    if values.get("tps") == 0:
        # As fast as possible: no waiting unless asked for (sim/stall still stalls: that is
        # its point; sim/slow still sends its keep-alive comments, without the wait).
        values.setdefault("ttft_ms", 0.0)
        values.setdefault("think_s", 0.0)
    values["jitter"] = min(values.get("jitter", DEFAULT_JITTER), 1.0)
    return SimOptions(**values)


@dataclass(frozen=True)
class SimRequest:
    """The parts of a chat request that the scenarios use."""

    model: str
    messages: list[dict[str, Any]]
    stream: bool = True
    include_usage: bool = False
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = None
    reasoning_exclude: bool = False
    parallel_tool_calls: bool = True
    n: int = 1  # choices to generate, streamed interleaved
    options: SimOptions = field(default_factory=SimOptions)


def parse_request(body: Any, env: Mapping[str, str] | None = None) -> SimRequest | ErrorReply:
    """Validate a decoded JSON body like a gateway would: a 400 with a JSON error when it is wrong."""

    def bad(message: str) -> ErrorReply:
        return error_reply(400, message)

    if not isinstance(body, dict):
        return bad("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return bad("`model` is required: a model name such as 'sim/chat'.")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return bad("`messages` is required: a non-empty list of {role, content} objects.")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return bad(f"messages[{i}] must be an object with a string `role`.")
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        return bad("`stream_options` must be an object.")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        return bad(f"`max_tokens` must be a positive integer, got {max_tokens!r}.")
    stop = body.get("stop")
    if stop is None:
        stops: tuple[str, ...] = ()
    elif isinstance(stop, str):
        stops = (stop,)
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        stops = tuple(stop)
    else:
        return bad("`stop` must be a string or a list of strings.")
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        return bad("`tools` must be a list of function tool objects.")
    reasoning = body.get("reasoning")
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        return bad(f"`parallel_tool_calls` must be true or false, got {parallel!r}.")
    n = body.get("n", 1)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
        return bad(f"`n` must be an integer from 1 to {MAX_CHOICES}, got {n!r}.")
    try:
        options = parse_options(body.get("sim"), env or {}, body.get("seed"))
    except OptionError as exc:
        return bad(str(exc))
    return SimRequest(
        model=model,
        messages=messages,
        stream=body.get("stream") is True,
        include_usage=stream_options.get("include_usage") is True,
        max_tokens=max_tokens,
        stop=tuple(s for s in stops if s),
        tools=tools,
        tool_choice=body.get("tool_choice"),
        reasoning_exclude=isinstance(reasoning, dict) and reasoning.get("exclude") is True,
        parallel_tool_calls=parallel,
        n=n,
        options=options,
    )


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a message: a string content, or the text parts of a list content."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def usage_for(request: SimRequest, completion_tokens: int, reasoning_tokens: int) -> dict[str, Any]:
    """A usage object consistent with what was sent.

    Prompt tokens: the tokens of every message's text, plus 3 per message and the tokens of the
    tools' JSON. Cached tokens: those of all messages before the last one, as if the gateway's
    prompt cache held the earlier turns of a conversation.
    """

    def tokens_of(messages: Sequence[Mapping[str, Any]]) -> int:
        return sum(count_tokens(message_text(m)) + 3 for m in messages)

    tools_tokens = count_tokens(json.dumps(request.tools)) if request.tools else 0
    prompt = tokens_of(request.messages) + tools_tokens
    cached = tokens_of(request.messages[:-1]) + tools_tokens if len(request.messages) > 1 else 0
    cost = (
        (prompt - cached) * PRICE_PROMPT
        + cached * PRICE_CACHED
        + completion_tokens * PRICE_COMPLETION
    )
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "cost": round(cost, 12),
    }


# --------------------------------------------------------------------------------------------
# Writing chunks


def _dumps(obj: Any) -> bytes:
    # ensure_ascii=False: real gateways send UTF-8, and clients must cope with characters split
    # across network reads.
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


class ChunkWriter:
    """Builds the SSE bytes of one completion's chunks and counts what was generated.

    It enforces the protocol's rules for the scenario: `role` on the first delta only, a stable
    `id`, the `max_tokens` budget (after which nothing token-bearing is written and the finish
    reason becomes `length`), and the usage that the trailing chunk reports.
    """

    def __init__(
        self,
        request: SimRequest,
        created: int,
        nonce: str = "",
        choice: int = 0,
        completion_id: str | None = None,
    ) -> None:
        self.request = request
        # The content depends on the request alone; the id also on the nonce, which the server
        # draws for each request (a gateway never gives two completions the same id).
        digest = request_digest(request)
        self.id = completion_id or (
            f"gen-sim-{digest[:12]}{nonce}" if nonce else f"gen-sim-{digest[:24]}"
        )
        self.created = created
        self.choice = choice
        self._head = (
            b'data: {"id":'
            + _dumps(self.id)
            + b',"object":"chat.completion.chunk","created":'
            + str(created).encode()
            + b',"model":'
            + _dumps(request.model)
        )
        self._content_prefix = (
            self._head + b',"choices":[{"index":' + str(choice).encode() + b',"delta":{"content":'
        )
        self._content_suffix = b'},"finish_reason":null}]}\n\n'
        self._role_sent = False
        self.completion_tokens = 0
        self.reasoning_tokens = 0
        self.truncated = False

    # -- budget

    def spend(self, tokens: int) -> bool:
        """Count `tokens` as generated, unless that would pass `max_tokens` (then: truncated)."""
        limit = self.request.max_tokens
        if self.truncated or (limit is not None and self.completion_tokens + tokens > limit):
            self.truncated = True
            return False
        self.completion_tokens += tokens
        return True

    # -- raw chunks

    def chunk(
        self,
        delta: dict[str, Any],
        finish_reason: str | None = None,
        **extra: Any,
    ) -> bytes:
        """One chunk with any delta; `role` is added to the first delta written."""
        if not self._role_sent:
            delta = {"role": "assistant", **delta}
            self._role_sent = True
        body = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.request.model,
            **extra,
            "choices": [{"index": self.choice, "delta": delta, "finish_reason": finish_reason}],
        }
        return b"data: " + _dumps(body) + b"\n\n"

    # -- token-bearing events

    def content(self, fragment: str) -> Event | None:
        if not self.spend(count_tokens(fragment) or 1):
            return None
        if not self._role_sent:
            return Event("token", self.chunk({"content": fragment}))
        return Event("token", self.content_data(fragment))

    def content_data(self, fragment: str) -> bytes:
        """The bytes of a content chunk after the first one (no role), counting nothing."""
        return self._content_prefix + _dumps(fragment) + self._content_suffix

    def contents(self, text: str) -> Iterator[Event]:
        """The text, cut at the first `stop` sequence, one token per chunk."""
        for stop in self.request.stop:
            cut = text.find(stop)
            if cut >= 0:
                text = text[:cut]
        for fragment in tokenize(text):
            event = self.content(fragment)
            if event is None:
                return
            yield event

    def reasoning(self, kind: str, index: int, text: str, **extra: Any) -> Iterator[Event]:
        """Readable reasoning (`reasoning.text` / `reasoning.summary`), one token per chunk.

        As OpenRouter sends it: each detail's text also in `delta.reasoning`. A proxy such as
        LiteLLM drops a chunk whose delta carries only `reasoning_details`, and with it the text.
        """
        key = "text" if kind == "reasoning.text" else "summary"
        for fragment in tokenize(text):
            if not self.spend(1):
                return
            self.reasoning_tokens += 1
            detail = {"type": kind, key: fragment, "index": index, "format": "sim-v1"}
            yield Event("token", self.chunk({"reasoning": fragment, "reasoning_details": [detail]}))
        if extra and not self.truncated:
            detail = {"type": kind, key: "", "index": index, "format": "sim-v1", **extra}
            yield Event("send", self.chunk({"reasoning": None, "reasoning_details": [detail]}))

    def encrypted(self, index: int, data: str) -> Event | None:
        if self.truncated:
            return None
        detail = {"type": "reasoning.encrypted", "data": data, "index": index, "format": "sim-v1"}
        return Event("send", self.chunk({"reasoning": None, "reasoning_details": [detail]}))

    def parts(self, kind: str, text: str) -> Iterator[Event]:
        """Mistral's format: `text` (the answer) or `thinking` (reasoning) parts, one token each."""
        for fragment in tokenize(text):
            if not self.spend(1):
                return
            if kind == "thinking":
                self.reasoning_tokens += 1
                part = {"type": "thinking", "thinking": [{"type": "text", "text": fragment}]}
            else:
                part = {"type": "text", "text": fragment}
            yield Event("token", self.chunk({"content": [part]}))

    def tool_call_start(self, index: int, call_id: str, name: str) -> Event | None:
        if self.truncated:
            return None
        function = {"name": name, "arguments": ""}
        fragment = {"index": index, "id": call_id, "type": "function", "function": function}
        return Event("token", self.chunk({"tool_calls": [fragment]}))

    def tool_call_arguments(self, index: int, piece: str) -> Event | None:
        if not self.spend(count_tokens(piece) or 1):
            return None
        fragment = {"index": index, "function": {"arguments": piece}}
        return Event("token", self.chunk({"tool_calls": [fragment]}))

    # -- the end

    def finish(self, reason: str, **extra: Any) -> Iterator[Event]:
        """The terminal chunk, the usage chunk when asked for, and `[DONE]`."""
        if self.truncated:
            reason = "length"
        yield Event("send", self.chunk({}, reason, **extra))
        yield from self.usage_and_done()

    def usage_and_done(self) -> Iterator[Event]:
        if self.request.include_usage:
            usage = usage_for(self.request, self.completion_tokens, self.reasoning_tokens)
            yield Event("send", self._head + b',"choices":[],"usage":' + _dumps(usage) + b"}\n\n")
        yield Event("send", DONE)


def _some(events: Iterable[Event | None]) -> Iterator[Event]:
    return (e for e in events if e is not None)


# --------------------------------------------------------------------------------------------
# Texts


_CHAT_ANSWERS = (
    """## Streaming, in short

A **gateway** sits between your code and many model providers: one key, one endpoint, one bill. \
When you ask for `stream: true`, the answer comes back as *Server-Sent Events*, a few characters \
at a time, so you can read it while the model is still writing.

What happens on the wire:

1. The client sends one `POST /v1/chat/completions`.
2. The gateway answers `200` with `Content-Type: text/event-stream`.
3. Every event carries one JSON chunk; the last one is `data: [DONE]`.

Things worth measuring:

- **Time to first token**: how long before anything shows up.
- **Tokens per second**: how fast the rest arrives.
- **Stalls**: the longest gap between two chunks.

A minimal client in Python:

```python
import httpx

with httpx.stream("POST", url, json=body) as response:
    for line in response.iter_lines():
        if line.startswith("data: "):
            print(line[6:])
```

| metric | typical value | what it tells you |
| --- | ---: | --- |
| TTFT | 0.4 s | queueing and prompt processing |
| TPS | 80 tok/s | decoding speed |
| ITL p99 | 45 ms | jitter of the network and the model |

Non-ASCII travels fine: café, naïve, Grüße, 日本語のテキスト, Ελληνικά, emoji 🚀✨, and \
math like ∑ xᵢ ≤ ∞.

> Tip: when a stream fails halfway, keep what arrived: it is still the user's answer.
""",
    """## Three days in Lyon

Lyon rewards a slow pace: *bouchons*, traboules and two rivers. Here is a plan that keeps the \
walking reasonable and the lunches long.

**Day 1: Vieux-Lyon and Fourvière**

- Morning: the traboules of Saint-Jean, then the funicular up to the basilica.
- Afternoon: the Roman theatres, with a view over the Saône.
- Evening: a bouchon, for a *salade lyonnaise* and a quenelle.

**Day 2: Presqu'île and Croix-Rousse**

1. Place Bellecour, then north along Rue de la République.
2. The Mur des Canuts, the largest trompe-l'œil in Europe.
3. Sunset on the quays of the Rhône.

**Day 3: Halles Paul Bocuse and the Confluence**

| stop | time | cost |
| --- | ---: | ---: |
| Halles Paul Bocuse | 2 h | 25 € |
| Musée des Confluences | 3 h | 12 € |
| Boat on the Saône | 1 h | 15 € |

To keep the budget in a notebook:

```python
costs = {"halles": 25, "musée": 12, "bateau": 15}
print(sum(costs.values()), "€")
```

Useful words: *merci*, *s'il vous plaît*, *l'addition*. Bon voyage, and ありがとう for asking! 🇫🇷
""",
)

_REASONING_TEXT = (
    "The user asked a question; let me work out what they need. First, restate it: they want a "
    "short, correct answer with one example. Options: explain the idea in one paragraph, or give "
    "a list. A list is easier to scan. Check the edge cases: empty input, very long input, and "
    "non-ASCII text such as “naïve” or 東京. All fine. Now draft the answer."
)
_REASONING_SUMMARY = (
    "**Planning the answer**: restate the question, pick a list format, check edge cases, draft."
)
_REASONING_ANSWER = """Here is the short version:

- Restate the question before answering it.
- Prefer a list when the answer has several parts.
- Check the edge cases: empty input, very long input, non-ASCII text (naïve, 東京).

That is all there is to it."""

_WEB_ANSWER = (
    "According to recent sources, server-sent events remain the usual way to stream model output "
    "over HTTP [1]. The format is a plain-text protocol defined by the HTML standard [2], and "
    "OpenAI-compatible gateways add a final `data: [DONE]` event [1].\n\n"
    "Sources:\n"
    "1. [Streaming responses](https://example.com/streaming)\n"
    "2. [HTML Living Standard: server-sent events](https://html.spec.whatwg.org/multipage/server-sent-events.html)\n"
)
_FREE_ANSWER = (
    "This answer was served on the Free plan: same model, same format, a daily request limit. "
    "The `free_tier` object on this stream says how many requests are left today."
)
_SLOW_ANSWER = "After a long think: the answer is **42**. Thanks for waiting."


def _long_fragments(seed: int) -> list[str]:
    """A period of ~4-byte Markdown fragments: bold headings, sentences and paragraphs."""
    rng = random.Random(seed)
    words = [
        "the", "and", "api", "key", "log", "row", "sse", "tok", "run", "gap",
        "bit", "raw", "new", "old", "one", "two", "map", "sum", "add", "end",
    ]  # fmt: skip
    fragments: list[str] = []
    for paragraph in range(13):
        fragments.extend(["**Part", f" {paragraph + 1}.**", "\n\n"])
        for _ in range(rng.randint(3, 6)):
            fragments.append(" " + rng.choice(words).capitalize())
            fragments.extend(" " + rng.choice(words) for _ in range(rng.randint(4, 12)))
            fragments[-1] += "."
        fragments[-1] += "\n\n"
    return fragments


# --------------------------------------------------------------------------------------------
# Scenarios


def _echo(w: ChunkWriter) -> Iterator[Event]:
    users = [m for m in w.request.messages if m.get("role") == "user"]
    yield from w.contents(message_text(users[-1]) if users else "")
    yield from w.finish("stop")


def _chat(w: ChunkWriter) -> Iterator[Event]:
    yield from w.contents(_CHAT_ANSWERS[w.request.options.seed % len(_CHAT_ANSWERS)])
    yield from w.finish("stop")


def _mistral(w: ChunkWriter) -> Iterator[Event]:
    # As Magistral streams: a role chunk with empty content, thinking parts, then text parts.
    yield Event("send", w.chunk({"content": ""}))
    if not w.request.reasoning_exclude:
        yield from w.parts("thinking", _REASONING_TEXT)
    yield from w.parts("text", _REASONING_ANSWER)
    yield from w.finish("stop")


def _reasoning(w: ChunkWriter) -> Iterator[Event]:
    if not w.request.reasoning_exclude:
        signature = base64.b64encode(hashlib.sha256(w.id.encode()).digest()).decode()
        yield from w.reasoning("reasoning.text", 0, _REASONING_TEXT, signature=signature)
        yield from w.reasoning("reasoning.summary", 1, _REASONING_SUMMARY)
        blob = base64.b64encode(hashlib.sha512(_REASONING_TEXT.encode()).digest() * 4).decode()
        yield from _some([w.encrypted(2, blob)])
    yield from w.contents(_REASONING_ANSWER)
    yield from w.finish("stop")


_DEFAULT_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Local time in a time zone.",
            "parameters": {
                "type": "object",
                "properties": {"timezone": {"type": "string"}},
                "required": ["timezone"],
            },
        },
    },
]

_SAMPLE_STRINGS = {
    "city": ["Paris", "São Paulo", "Tokyo", "Zürich"],
    "location": ["Paris, France", "Kraków, Poland", "Osaka, Japan"],
    "timezone": ["Europe/Paris", "Asia/Tokyo", "America/New_York"],
    "query": ["streaming chat completions", "server-sent events"],
}


def _sample_value(name: str, schema: Any, rng: random.Random, depth: int = 0) -> Any:
    """A plausible value for a JSON-schema property (good enough for demos, not a validator)."""
    if not isinstance(schema, dict):
        return "example"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "integer":
        return rng.randint(1, 10)
    if kind == "number":
        return round(rng.uniform(0, 100), 1)
    if kind == "boolean":
        return True
    if kind == "array":
        return [_sample_value(name, schema.get("items"), rng, depth + 1)] if depth < 3 else []
    if kind == "object":
        return _sample_object(schema, rng, depth + 1) if depth < 3 else {}
    return rng.choice(_SAMPLE_STRINGS.get(name.lower(), ["example"]))


def _sample_object(schema: Mapping[str, Any], rng: random.Random, depth: int = 0) -> dict:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    return {k: _sample_value(k, v, rng, depth) for k, v in properties.items()}


def _tool_function(tool: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    assert isinstance(function, dict)
    name = function.get("name")
    parameters = function.get("parameters")
    return (
        name if isinstance(name, str) and name else "tool",
        parameters if isinstance(parameters, dict) else {},
    )


def _split_arguments(arguments: str, rng: random.Random) -> list[str]:
    """Cut a JSON string into pieces of 1 to 6 characters, as providers stream them."""
    pieces = []
    i = 0
    while i < len(arguments):
        n = rng.randint(1, 6)
        pieces.append(arguments[i : i + n])
        i += n
    return pieces


def _tools(w: ChunkWriter) -> Iterator[Event]:
    request = w.request
    if request.messages[-1].get("role") == "tool":
        yield from _answer_tool_results(w)
        return
    if request.tool_choice == "none":
        yield from w.contents("I will answer without calling a tool: no tool was needed.")
        yield from w.finish("stop")
        return
    tools = request.tools or _DEFAULT_TOOLS
    choice = request.tool_choice
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        wanted = choice["function"].get("name")
        tools = [t for t in tools if _tool_function(t)[0] == wanted] or tools[:1]
    count = request.options.tool_calls or min(len(tools), 4)
    if not request.parallel_tool_calls:
        count = 1  # the request forbids several calls in one answer
    rng = random.Random(request.options.seed)
    calls = []
    for index in range(count):
        name, parameters = _tool_function(tools[index % len(tools)])
        arguments = json.dumps(_sample_object(parameters, rng), ensure_ascii=False)
        call_id = f"call_sim_{w.id[-8:]}_{index}"
        calls.append((index, call_id, name, _split_arguments(arguments, rng)))

    def one_call(index: int, call_id: str, name: str, pieces: list[str]) -> Iterator[Event]:
        yield from _some([w.tool_call_start(index, call_id, name)])
        for piece in pieces:
            event = w.tool_call_arguments(index, piece)
            if event is None:
                return
            yield event

    streams = [one_call(*call) for call in calls]
    if request.options.interleave:
        # Round-robin over the calls: docs/PROTOCOL.md allows the fragments of parallel calls to mix.
        while streams:
            for s in list(streams):
                event = next(s, None)
                if event is None:
                    streams.remove(s)
                else:
                    yield event
    else:
        for s in streams:
            yield from s
    yield from w.finish("tool_calls")


def _answer_tool_results(w: ChunkWriter) -> Iterator[Event]:
    results = []
    for message in reversed(w.request.messages):
        if message.get("role") != "tool":
            break
        text = message_text(message)
        results.append(f"- `{message.get('tool_call_id', '?')}`: {text[:200]}")
    lines = "\n".join(reversed(results))
    yield from w.contents(f"Here is what the tools returned:\n\n{lines}\n\nAll done.")
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
    yield from w.contents(_WEB_ANSWER)
    yield from w.finish("stop")


def _free(w: ChunkWriter) -> Iterator[Event]:
    free_tier = {"eligible": True, "plan": "free", "requests_remaining": 41, "daily_limit": 50}
    yield Event("send", w.chunk({"content": ""}, free_tier=free_tier))
    yield from w.contents(_FREE_ANSWER)
    yield from w.finish("stop")


def _slow(w: ChunkWriter) -> Iterator[Event]:
    options = w.request.options
    # At least a few comments, even for a short think, so that clients always meet some.
    beats = max(3, round(options.think_s / options.keepalive_s)) if options.keepalive_s else 3
    for _ in range(beats):
        yield Event("send", KEEPALIVE)
        yield Event("pause", seconds=options.think_s / beats)
    yield from w.contents(_SLOW_ANSWER)
    yield from w.finish("stop")


def _partial_chat(w: ChunkWriter, tokens: int) -> tuple[list[Event], list[Event]]:
    events = list(w.contents(_CHAT_ANSWERS[0]))
    return events[:tokens], events[tokens:]


def _error_midstream(w: ChunkWriter) -> Iterator[Event]:
    head, _ = _partial_chat(w, 40)
    yield from head
    error = {"code": 502, "message": "Upstream provider disconnected (simulated fault)."}
    yield Event("send", w.chunk({"content": ""}, "error", error=error))
    yield Event("send", DONE)


def _drop(w: ChunkWriter) -> Iterator[Event]:
    head, _ = _partial_chat(w, 40)
    yield from head
    yield Event("drop")


def _stall(w: ChunkWriter) -> Iterator[Event]:
    head, tail = _partial_chat(w, 30)
    yield from head
    yield Event("pause", seconds=w.request.options.stall_s)
    yield from tail
    yield from w.finish("stop")


def _garbage(w: ChunkWriter) -> Iterator[Event]:
    head, tail = _partial_chat(w, 30)
    yield from head
    yield Event("send", b'data: {"id": "' + w.id.encode() + b'", this is not JSON\n\n')
    yield from tail
    yield from w.finish("stop")


def _bigchunk(w: ChunkWriter) -> Iterator[Event]:
    size = w.request.options.size
    line = "Line {:07d}: the quick brown fox jumps over the lazy dog, again and again.\n"
    per_line = len(line.format(0))
    text = "".join(line.format(i) for i in range(size // per_line + 1))[:size]
    yield from w.contents("Here comes a big one:\n\n")
    # One delta, whatever its size: that is the point of this scenario.
    yield from _some([w.content(text)])
    yield from w.contents("\n\nThat was it.")
    yield from w.finish("stop")


def _long(w: ChunkWriter) -> Iterator[Event]:
    fragments = _long_fragments(w.request.options.seed)
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


def _http_error(model: str, options: SimOptions) -> ErrorReply:
    if model == "sim/http-401":
        return error_reply(401, "No auth credentials found (simulated: sim/http-401).")
    if model == "sim/http-402":
        return error_reply(
            402,
            "Insufficient credits: add credits to continue (simulated: sim/http-402).",
            {"balance": 0.0},
        )
    if model == "sim/http-429":
        retry = options.retry_after
        retry_text = str(int(retry)) if retry == int(retry) else str(retry)
        return error_reply(
            429,
            "Rate limit exceeded: retry shortly (simulated: sim/http-429).",
            {"provider_name": "sim", "retry_after_seconds": retry},
            **{"Retry-After": retry_text},
        )
    if model == "sim/http-503":
        return error_reply(503, "No provider available for this model (simulated: sim/http-503).")
    html = (
        "<html>\r\n<head><title>500 Internal Server Error</title></head>\r\n<body>\r\n"
        "<center><h1>500 Internal Server Error</h1></center>\r\n"
        "<hr><center>nito_nb-sim</center>\r\n</body>\r\n</html>\r\n"
    )
    return ErrorReply(500, html.encode(), "text/html")


_STREAMS = {
    "sim/echo": _echo,
    "sim/chat": _chat,
    "sim/reasoning": _reasoning,
    "sim/mistral": _mistral,
    "sim/tools": _tools,
    "sim/websearch": _websearch,
    "sim/free": _free,
    "sim/slow": _slow,
    "sim/error-midstream": _error_midstream,
    "sim/drop": _drop,
    "sim/stall": _stall,
    "sim/garbage": _garbage,
    "sim/bigchunk": _bigchunk,
    "sim/long": _long,
}


def request_digest(request: SimRequest) -> str:
    """What identifies a request for the faults: its model, messages and seed."""
    return hashlib.sha256(
        _dumps([request.model, request.messages, request.options.seed])
    ).hexdigest()


def picked_to_fail(request: SimRequest) -> bool:
    """Whether `sim.fail_rate` picks this request: a pure function of (model, messages, seed),
    so that a flaky run is the same run every time."""
    rate = request.options.fail_rate
    if rate <= 0:
        return False
    return int(request_digest(request)[:12], 16) / float(1 << 48) < rate


def scenario(request: SimRequest, created: int, nonce: str = "", seen: int = 0) -> Reply:
    """The reply of a scenario model to a validated request (not `sim/replay`: see `replay_*`).

    ``nonce`` goes into the completion id only (the server draws one per request), so the same
    request and seed give the same content under a new id. `seen`: how many times the server
    already answered this same request (`request_digest`); a request picked by `sim.fail_rate`
    fails its first `sim.fail_attempts` times.
    """
    model = request.model
    options = request.options
    faulty = picked_to_fail(request) and seen < options.fail_attempts
    if faulty and isinstance(options.fail_status, int):
        return _fault_status(options)
    if model.startswith("sim/http-") and model in SIM_MODELS:
        return _http_error(model, request.options)
    generate = _STREAMS.get(model)
    if generate is None:
        return error_reply(
            404,
            f"Model {model!r} not found: the simulator serves {', '.join(SIM_MODELS)}.",
        )
    if request.n > 1:
        total = ChunkWriter(request, created, nonce)
        events: Iterable[Event] = _choices(generate, request, total)
        writer = total
    else:
        writer = ChunkWriter(request, created, nonce)
        events = generate(writer)
    if faulty:
        events = _fault_midstream(events, writer, str(options.fail_status))
    return StreamReply(events)


def _choices(
    generate: Callable[[ChunkWriter], Iterator[Event]],
    request: SimRequest,
    total: ChunkWriter,
) -> Iterator[Event]:
    """``n`` choices interleaved as OpenAI streams them: one choice per chunk, in turn, each with
    its own role, text (seed + its index) and terminal chunk; then one usage chunk for all
    (``total``: the completion's writer, one id and one usage chunk)."""
    created = total.created
    writers = []
    streams = []
    for index in range(request.n):
        options = dataclasses.replace(request.options, seed=request.options.seed + index)
        one = dataclasses.replace(request, options=options, include_usage=False)
        writer = ChunkWriter(one, created, choice=index, completion_id=total.id)
        writers.append(writer)
        streams.append(generate(writer))
    while streams:
        for stream in list(streams):
            event = next(stream, None)
            if event is None:
                streams.remove(stream)
            elif event.data != DONE:
                yield event
    total.completion_tokens = sum(w.completion_tokens for w in writers)
    total.reasoning_tokens = sum(w.reasoning_tokens for w in writers)
    yield from total.usage_and_done()



def _fault_status(options: SimOptions) -> ErrorReply:
    status = int(options.fail_status)
    message = f"Simulated fault (sim.fail_rate): HTTP {status}."
    if status == 429:
        retry = options.retry_after
        return error_reply(
            429, message, {"provider_name": "sim"}, **{"Retry-After": f"{retry:g}"}
        )
    return error_reply(status, message)


#: A mid-stream fault comes after this many events of the answer (fewer if it is shorter).
FAULT_AFTER_EVENTS = 8


def _fault_midstream(events: Iterable[Event], w: ChunkWriter, kind: str) -> Iterator[Event]:
    """The first events of the answer, then the connection cut ("drop") or an error chunk."""
    for n, event in enumerate(events):
        if n >= FAULT_AFTER_EVENTS or event.data == DONE:
            break
        yield event
    if kind == "drop":
        yield Event("drop")
        return
    error = {"code": 502, "message": "Upstream provider disconnected (simulated: sim.fail_rate)."}
    yield Event("send", w.chunk({"content": ""}, "error", error=error))
    yield Event("send", DONE)


# --------------------------------------------------------------------------------------------
# Replay

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


def split_sse(body: bytes) -> list[bytes]:
    """Cut an SSE body after each blank line; the pieces concatenate back to the body."""
    pieces = []
    start = 0
    for match in _EVENT_END.finditer(body):
        pieces.append(body[start : match.end()])
        start = match.end()
    if start < len(body):
        pieces.append(body[start:])
    return pieces


def _is_data(piece: bytes) -> bool:
    return any(line.startswith(b"data:") for line in piece.lstrip().splitlines())


def replay_sse(body: bytes, status: int = 200, content_type: str | None = None) -> Reply:
    """Replay a recorded SSE body byte for byte, its data events paced like tokens.

    A recording without timing gets the request's pacing; an error status returns the body whole.
    """
    if status != 200:
        return ErrorReply(status, body, content_type)
    events = [Event("token" if _is_data(p) else "send", p) for p in split_sse(body)]
    return StreamReply(events, status, content_type or "text/event-stream")


_NOT_REPLAYED_HEADERS = frozenset(
    {"content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive",
     "date", "server"}
)  # fmt: skip


def replay_log(lines: Sequence[str], speed: float) -> Reply:
    """Replay a saved nito_nb log (JSON Lines) with its recorded timing divided by `speed`.

    `speed` 0 means as fast as possible. A log that ended truncated is replayed with the
    connection cut at the same place.
    """
    header = json.loads(lines[0])
    if not isinstance(header, dict) or "nito_nb_log" not in header:
        raise ValueError("not a nito_nb log: the first line has no 'nito_nb_log' key")
    scale = 0.0 if speed == 0 else 1.0 / speed
    headers_dt = (header.get("headers_dt_ns") or 0) / 1e9
    events: list[Event] = []
    body = bytearray()
    truncated = False
    for line in lines[1:]:
        if not line.strip():
            continue
        record = json.loads(line)
        if "end" in record:
            end = record["end"]
            truncated = isinstance(end, dict) and end.get("status") == "truncated"
            continue
        if "raw_b64" in record:
            raw = base64.b64decode(record["raw_b64"])
        else:
            raw = str(record.get("raw", "")).encode()
        body += raw
        offset = max(0.0, record.get("dt_ns", 0) / 1e9 - headers_dt) * scale
        events.append(Event("at", raw, seconds=offset))
    if truncated:
        events.append(Event("drop"))
    status = int(header.get("status_code") or 200)
    recorded = {str(k).lower(): str(v) for k, v in (header.get("headers") or {}).items()}
    content_type = recorded.pop("content-type", None)
    # Keep what the gateway said (retry-after, request ids...), not how the bytes were framed:
    # the log holds the decoded body, and the server frames it anew.
    headers = {k: v for k, v in recorded.items() if k not in _NOT_REPLAYED_HEADERS}
    if status != 200:
        return ErrorReply(status, bytes(body), content_type, headers)
    return StreamReply(
        events,
        status,
        content_type or "text/event-stream",
        headers,
        headers_delay_s=headers_dt * scale,
    )


def recorded_status(sources_tsv: str, filename: str) -> tuple[int, str | None] | None:
    """The `http_status` and `content_type` of a recording, from a SOURCES.tsv table."""
    rows = [line.split("\t") for line in sources_tsv.splitlines() if line.strip()]
    if not rows:
        return None
    columns = rows[0]
    try:
        file_col, status_col = columns.index("file"), columns.index("http_status")
    except ValueError:
        return None
    type_col = columns.index("content_type") if "content_type" in columns else None
    for row in rows[1:]:
        if len(row) > max(file_col, status_col) and row[file_col] == filename:
            content_type = row[type_col] if type_col is not None and len(row) > type_col else ""
            try:
                return int(row[status_col]), content_type or None
            except ValueError:
                return None
    return None


# --------------------------------------------------------------------------------------------
# Pacing


@dataclass(frozen=True)
class Pacing:
    ttft_s: float
    tps: float
    jitter: float
    seed: int

    @classmethod
    def of(cls, options: SimOptions) -> Pacing:
        return cls(options.ttft_ms / 1000, options.tps, options.jitter, options.seed)


def schedule(
    events: Iterable[Event], pacing: Pacing, keepalive_s: float = 1.0
) -> Iterator[tuple[float, bytes | None]]:
    """When each piece of the body is due: `(seconds since the response started, bytes)`.

    `None` for bytes means: cut the connection. The first chunk is due after the time to first
    token, with a keep-alive comment at once and then every `keepalive_s` while waiting (as
    gateways do while the model thinks); each later token after 1/tps seconds, times a random
    jitter factor in [1 - jitter, 1 + jitter] drawn from the request's seed. Other chunks (the
    terminal and usage chunks, `[DONE]`) follow the token before them at once.
    """
    rng = random.Random(pacing.seed)
    gap = 1.0 / pacing.tps if pacing.tps > 0 else 0.0
    low, high = 1.0 - pacing.jitter, 1.0 + pacing.jitter
    t = 0.0
    waiting_first = pacing.ttft_s > 0
    for event in events:
        kind = event.kind
        if waiting_first and kind in ("token", "send") and event.data.startswith(b"data:"):
            # The model "thinks" before its first chunk, whatever that chunk carries.
            waiting_first = False
            yield t, KEEPALIVE
            beat = t + keepalive_s
            t += pacing.ttft_s
            while keepalive_s > 0 and beat < t:
                yield beat, KEEPALIVE
                beat += keepalive_s
            yield t, event.data
        elif kind == "token":
            if gap:
                t += gap * rng.uniform(low, high)
            yield t, event.data
        elif kind == "send":
            yield t, event.data
        elif kind == "pause":
            t += event.seconds
        elif kind == "at":
            t = max(t, event.seconds)
            yield t, event.data
        else:
            yield t, None
            return


# --------------------------------------------------------------------------------------------
# Non-streaming requests


def collect_completion(events: Iterable[Event], request: SimRequest) -> ErrorReply | dict[str, Any]:
    """A `chat.completion` object made from a scenario's chunks (for `stream: false`).

    A mid-stream error or a dropped connection becomes a 502 JSON error, as a gateway that
    buffers the upstream stream would answer.
    """
    # Per choice index (several when the request asked for `n`): content, details, calls, finish.
    choices: dict[int, dict[str, Any]] = {}
    first: dict[str, Any] = {}
    usage = None
    extras: dict[str, Any] = {}
    for event in events:
        if event.kind == "drop":
            return error_reply(502, "Upstream connection dropped (simulated fault).")
        for piece in split_sse(event.data):
            line = piece.strip()
            if not line.startswith(b"data: ") or line == DONE.strip():
                continue
            try:
                chunk = json.loads(line[6:])
            except ValueError:
                continue
            if chunk.get("error"):
                return error_reply(502, str(chunk["error"].get("message")))
            first = first or chunk
            usage = chunk.get("usage") or usage
            for key in ("web_search", "free_tier"):
                if key in chunk:
                    extras[key] = chunk[key]
            for choice in chunk.get("choices") or []:
                state = choices.setdefault(
                    choice.get("index", 0),
                    {"content": [], "details": [], "calls": {}, "finish": None},
                )
                delta = choice.get("delta") or {}
                content = delta.get("content") or ""
                if isinstance(content, list):  # sim/mistral's parts: kept as parts
                    state["content"].extend(content)
                else:
                    state["content"].append(content)
                state["details"].extend(delta.get("reasoning_details") or [])
                for fragment in delta.get("tool_calls") or []:
                    call = state["calls"].setdefault(
                        fragment["index"],
                        {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                    )
                    call["id"] = fragment.get("id") or call["id"]
                    function = fragment.get("function") or {}
                    call["function"]["name"] += function.get("name") or ""
                    call["function"]["arguments"] += function.get("arguments") or ""
                state["finish"] = choice.get("finish_reason") or state["finish"]
    out = []
    for index in sorted(choices):
        state = choices[index]
        pieces = state["content"]
        if all(isinstance(p, str) for p in pieces):
            text: Any = "".join(pieces) or None
        else:  # Mistral's non-streamed message keeps the parts too
            text = [p if isinstance(p, dict) else {"type": "text", "text": p} for p in pieces if p]
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if state["calls"]:
            message["tool_calls"] = [state["calls"][i] for i in sorted(state["calls"])]
        if state["details"]:
            message["reasoning_details"] = state["details"]
        out.append({"index": index, "message": message, "finish_reason": state["finish"]})
    completion = {
        "id": first.get("id"),
        "object": "chat.completion",
        "created": first.get("created"),
        "model": request.model,
        "choices": out,
        **extras,
    }
    if usage is not None:
        completion["usage"] = usage
    return completion
