"""The chunk writer: the SSE bytes of one completion's chunks, and the tokens they count.

Every scenario writes through a `ChunkWriter`, which keeps the protocol's rules in one place.
The bytes of a chunk are built once, with a pre-encoded prefix and suffix, never re-serialised:
the server must not be the bottleneck of client benchmarks.

Token counting is deliberately simple and deterministic: a token is a run of whitespace followed
by up to 7 non-space characters (`tokenize`). Text is streamed one token per content or reasoning
chunk, so `usage.completion_tokens` equals the number of token-bearing fragments sent (tool-call
arguments, cut into small pieces, count the tokens of each piece).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ._logprobs import token_logprobs
from ._reply import DONE, Event, dumps
from ._request import SimRequest, message_text, request_digest

# Prices used for `usage.cost`, in dollars per token: the numbers are made up, the arithmetic is
# what a gateway does (cached prompt tokens are billed at a quarter of the price).
PRICE_PROMPT = 0.5e-6
PRICE_CACHED = 0.125e-6
PRICE_COMPLETION = 1.5e-6

_TOKEN = re.compile(r"\s*\S{1,7}|\s+")


def tokenize(text: str) -> list[str]:
    """Split text into token-ish fragments whose concatenation is exactly the text."""
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def _tokens_of(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(count_tokens(message_text(m)) + 3 for m in messages)


def _tools_tokens(request: SimRequest) -> int:
    return count_tokens(json.dumps(request.tools)) if request.tools else 0


def prompt_tokens(request: SimRequest) -> int:
    """The request's prompt tokens (its usage's, and what a capacity model's prefill reads)."""
    return _tokens_of(request.messages) + _tools_tokens(request)


def usage_for(request: SimRequest, completion_tokens: int, reasoning_tokens: int) -> dict[str, Any]:
    """A usage object consistent with what was sent.

    Prompt tokens: the tokens of every message's text, plus 3 per message and the tokens of the
    tools' JSON. Cached tokens: those of all messages before the last one, as if the gateway's
    prompt cache held the earlier turns of a conversation.
    """
    tools_tokens = _tools_tokens(request)
    prompt = prompt_tokens(request)
    cached = _tokens_of(request.messages[:-1]) + tools_tokens if len(request.messages) > 1 else 0
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
            + dumps(self.id)
            + b',"object":"chat.completion.chunk","created":'
            + str(created).encode()
            + b',"model":'
            + dumps(request.model)
        )
        self._content_prefix = (
            self._head + b',"choices":[{"index":' + str(choice).encode() + b',"delta":{"content":'
        )
        self._content_suffix = b'},"finish_reason":null}]}\n\n'
        self._role_sent = False
        self._position = 0  # content tokens sent: the next one's position in the answer (logprobs)
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
        return b"data: " + dumps(body) + b"\n\n"

    # -- token-bearing events

    def content(self, fragment: str) -> Event | None:
        if not self.spend(count_tokens(fragment) or 1):
            return None
        if self.request.top_logprobs is not None:
            return Event("token", self.content_with_logprobs(fragment))
        if not self._role_sent:
            return Event("token", self.chunk({"content": fragment}))
        return Event("token", self.content_data(fragment))

    def content_with_logprobs(self, fragment: str) -> bytes:
        """A content chunk whose choice carries the fragment's pseudo-logprobs (``_logprobs.py``),
        as OpenAI sends them when asked (``logprobs: true``): the slow path, built as a dict."""
        delta: dict[str, Any] = {"content": fragment}
        if not self._role_sent:
            delta = {"role": "assistant", **delta}
            self._role_sent = True
        # A choice of n > 1 has a seed of its own already (seed + its index: _scenarios._choices).
        entry = token_logprobs(
            fragment, self._position, self.request.options.seed, self.request.top_logprobs or 0
        )
        self._position += 1
        body = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.request.model,
            "choices": [
                {
                    "index": self.choice,
                    "delta": delta,
                    "logprobs": {"content": [entry], "refusal": None},
                    "finish_reason": None,
                }
            ],
        }
        return b"data: " + dumps(body) + b"\n\n"

    def content_data(self, fragment: str) -> bytes:
        """The bytes of a content chunk after the first one (no role), counting nothing."""
        return self._content_prefix + dumps(fragment) + self._content_suffix

    def contents(self, text: str) -> Iterator[Event]:
        """The text, cut at the first `stop` sequence, one token per chunk."""
        for stop in self.request.stop:
            cut = text.find(stop)
            if cut >= 0:
                text = text[:cut]
        for fragment in tokenize(text):
            if not self._role_sent:
                event = self.content(fragment)
                if event is None:
                    return
                yield event
            # A fragment of `tokenize` is one token: counting it again was a fifth of this
            # loop's cost per chunk (paced load runs stream hundreds of these a second).
            elif self.request.top_logprobs is not None:
                if not self.spend(1):
                    return
                yield Event("token", self.content_with_logprobs(fragment))
            elif self.spend(1):
                yield Event("token", self.content_data(fragment))
            else:
                return

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

    def error(self, message: str) -> Iterator[Event]:
        """A mid-stream error as gateways send it: a chunk with `error` and finish reason
        `error`, then `[DONE]` (no usage: the generation did not finish)."""
        error = {"code": 502, "message": message}
        yield Event("send", self.chunk({"content": ""}, "error", error=error))
        yield Event("send", DONE)

    def usage_and_done(self) -> Iterator[Event]:
        if self.request.include_usage:
            usage = usage_for(self.request, self.completion_tokens, self.reasoning_tokens)
            yield Event("send", self._head + b',"choices":[],"usage":' + dumps(usage) + b"}\n\n")
        yield Event("send", DONE)


def some(events: Iterable[Event | None]) -> Iterator[Event]:
    """The events that were written (a writer method returns None once the budget is spent)."""
    return (e for e in events if e is not None)


#: A scenario: the events of one completion, written through the writer it is given.
Generate = Callable[[ChunkWriter], Iterator[Event]]
