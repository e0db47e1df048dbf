"""What a scenario returns: the events of a streamed body, or a whole (error) response.

The simulator's lowest layer (standard library only): the event and reply types, the JSON error
body of a gateway and the compact JSON encoding of every chunk. (How an SSE body is cut into
events is nito_nb's decoder's, `_core/sse.py`: `_recordings.sse_events`.)
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

KEEPALIVE = b": NITO PROCESSING\n\n"
DONE = b"data: [DONE]\n\n"


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


def round_robin(streams: Iterable[Iterator[Event]]) -> Iterator[Event]:
    """One event of each stream in turn, until all are exhausted (interleaved fragments)."""
    pending = list(streams)
    while pending:
        for stream in list(pending):
            event = next(stream, None)
            if event is None:
                pending.remove(stream)
            else:
                yield event


# ensure_ascii=False: real gateways send UTF-8, and clients must cope with characters split
# across network reads. One encoder for every chunk: json.dumps with options builds a new one
# per call, which costs ten times the encoding of a token's string.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(obj: Any) -> bytes:
    """The compact JSON bytes of a chunk."""
    return _ENCODER.encode(obj).encode()


#: OpenAI's padding alphabet and lengths, as in its recordings (tests/data/real/openai-*.sse).
_PADDING_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_PADDING_MAX = 15


def padded(events: Iterable[Event], seed: int) -> Iterator[Event]:
    """The events with OpenAI's ``"obfuscation"`` field last in every JSON chunk: a string of
    random letters and digits of random length (0 to 15), drawn from ``seed`` (`"sim":
    {"obfuscation": true}`). Real OpenAI and Azure chunks carry it, so no two chunks share a byte
    layout: clients and benchmarks meet it here as they would there."""
    rng = random.Random(seed)
    choices, randint = rng.choices, rng.randint
    for event in events:
        data = event.data
        if data.startswith(b"data: {") and data.endswith(b"}\n\n") and data.count(b"\n") == 2:
            padding = "".join(choices(_PADDING_ALPHABET, k=randint(0, _PADDING_MAX))).encode()
            event = Event(
                event.kind, data[:-3] + b',"obfuscation":"' + padding + b'"}\n\n', event.seconds
            )
        yield event
