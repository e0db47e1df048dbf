"""Non-streaming requests: the `chat.completion` object a buffering gateway makes of the chunks.

The answer is the merge of what the stream would send, made by nito_nb's own reading of it: the
body cut into events by `_core/sse.py`, each chunk read by `_core/chunk.py` and folded by
`_core/accumulate.py` (docs/PROTOCOL.md's rules), so that a non-streaming answer says what
nito_nb shows for the same request streamed. It is then shaped as the providers shape their
non-streaming answers:

- OpenAI: `message` with `role`, `content` (a string; null when the answer is only tool calls),
  `refusal` (null when none) and `tool_calls` (`{id, type, function: {name, arguments}}`, the
  arguments whole); a choice has `index`, `message`, `logprobs` (null unless asked: the chunks'
  token entries, merged) and `finish_reason`.
- OpenRouter: the reasoning as one `reasoning` string and `reasoning_details` merged per detail
  (one text per detail, with its signature, id and format; each encrypted block whole).
- Mistral (the stream sent thinking parts): `content` as a list of parts, one `thinking` part
  holding the reasoning as one text piece, then one `text` part with the answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

from .._core.accumulate import Accumulator
from .._core.choices import per_choice
from .._core.chunk import as_error_event, read_chunk
from .._core.logprobs import logprobs_of
from .._core.sse import ServerSentEvent, SSEDecoder
from ._reply import ErrorReply, Event, error_reply
from ._request import SimRequest


class _Choice:
    """One choice being merged: nito_nb's accumulator, and whether its reasoning came as Mistral's
    thinking parts (then the answer keeps Mistral's shape)."""

    __slots__ = ("accumulator", "logprobs", "thinking_parts")

    def __init__(self) -> None:
        self.accumulator = Accumulator()
        self.thinking_parts = False
        self.logprobs: dict[str, list[dict[str, Any]]] | None = None  # None: no chunk carried any

    def fold(self, chunk: dict[str, Any]) -> None:
        reading = read_chunk(chunk)
        if any(piece.type == "thinking" for piece in reading.reasoning):
            self.thinking_parts = True
        self.accumulator.fold(reading)
        tokens = logprobs_of(chunk)
        if tokens["content"] or tokens["refusal"]:
            if self.logprobs is None:
                self.logprobs = {"content": [], "refusal": []}
            for channel, entries in tokens.items():
                self.logprobs[channel].extend(entries)


def collect_completion(events: Iterable[Event], request: SimRequest) -> ErrorReply | dict[str, Any]:
    """A `chat.completion` object made from a scenario's events (for `stream: false`).

    A mid-stream error or a dropped connection becomes a 502 JSON error, as a gateway that
    buffers the upstream stream would answer. A data line that is not JSON is skipped.
    """
    choices: dict[int, _Choice] = {}
    decoder = SSEDecoder()
    for event in events:
        if event.kind == "drop":
            return error_reply(502, "Upstream connection dropped (simulated fault).")
        for sse in decoder.decode(event.data):
            ended = _take(sse, choices)
            if ended is not None:
                return _completion(choices, request) if ended == "done" else ended
    for sse in decoder.flush():  # a body that ends without a blank line (a replayed recording)
        ended = _take(sse, choices)
        if ended is not None:
            return _completion(choices, request) if ended == "done" else ended
    return _completion(choices, request)


def _take(sse: ServerSentEvent, choices: dict[int, _Choice]) -> ErrorReply | Literal["done"] | None:
    """Fold one event: "done" at `[DONE]`, the 502 of an error chunk, else None."""
    if sse.is_comment:
        return None
    if sse.data == "[DONE]":
        return "done"
    try:
        chunk = as_error_event(json.loads(sse.data), sse.event)
    except ValueError:
        return None
    if not isinstance(chunk, dict):
        return None
    error = chunk.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else error
        return error_reply(502, str(message))
    _fold(chunk, choices)
    return None


def _fold(chunk: dict[str, Any], choices: dict[int, _Choice]) -> None:
    """Fold one chunk into its choices. The accumulator reads choice 0 only (docs/PROTOCOL.md,
    rule 11): a chunk of another choice (`n` > 1) is folded by that choice's own accumulator, as
    its choice 0. The chunks without choices (the usage chunk) go to choice 0's."""
    # the one cut of a chunk into its choices (_core/choices.py)
    for index, one in per_choice(chunk):
        choices.setdefault(index, _Choice()).fold(one)


def _message(choice: _Choice) -> dict[str, Any]:
    merged = choice.accumulator
    message: dict[str, Any] = {"role": merged.role or "assistant"}
    if choice.thinking_parts:  # Mistral: the reasoning and the answer as parts of the content
        parts: list[dict[str, Any]] = []
        if merged.reasoning:
            parts.append(
                {"type": "thinking", "thinking": [{"type": "text", "text": merged.reasoning}]}
            )
        if merged.content:
            parts.append({"type": "text", "text": merged.content})
        message["content"] = parts
    else:
        message["content"] = merged.content or None
    message["refusal"] = merged.refusal
    if merged.tool_calls:
        message["tool_calls"] = [call.to_message() for call in merged.tool_calls]
    details = merged.reasoning_details
    if not choice.thinking_parts and (merged.reasoning or details):
        message["reasoning"] = merged.reasoning or None
        if details:
            message["reasoning_details"] = details
    return message


def _completion(choices: dict[int, _Choice], request: SimRequest) -> dict[str, Any]:
    first = choices.setdefault(0, _Choice()).accumulator
    completion: dict[str, Any] = {
        "id": first.id,
        "object": "chat.completion",
        "created": first.created,
        "model": first.model or request.model,
        "choices": [
            {
                "index": index,
                "message": _message(choices[index]),
                "logprobs": choices[index].logprobs,
                "finish_reason": choices[index].accumulator.finish_reason,
            }
            for index in sorted(choices)
        ],
    }
    for name in ("web_search", "free_tier"):
        value = getattr(first, name)
        if value is not None:
            completion[name] = value
    if first.usage is not None:
        completion["usage"] = first.usage
    return completion
