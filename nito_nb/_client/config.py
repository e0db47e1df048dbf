"""The client's limits: the timeouts, the largest SSE event and the largest body. No I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import httpx

from .._core.counts import whole
from .._core.errors import ConfigurationError

__all__ = [
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_MAX_EVENT_SIZE",
    "Timeout",
    "check_max_body_size",
    "check_max_event_size",
]

#: The default limit of one SSE event's bytes: far above any chunk a gateway sends (a whole
#: answer in one chunk included), far below what would exhaust a notebook's memory.
DEFAULT_MAX_EVENT_SIZE = 64 * 1024 * 1024
#: The default limit of a body's decoded bytes (the log holds them all): 256 MiB. The longest
#: answers stream about 32 MB (128k tokens of about 250-byte chunks), ten minutes of audio about
#: 40 MB of base64; no answer we know of comes near, and a stream past it is a faulty or hostile
#: server, which no longer fills the notebook's memory. A compressed body is also stopped much
#: earlier when it is a bomb (``_core/encoding.py``, whatever this limit).
DEFAULT_MAX_BODY_SIZE = 256 * 1024 * 1024


@dataclass(frozen=True)
class Timeout:
    """Seconds to wait: to connect, for the response's headers, between two events of the body,
    and (``total``, None by default: no limit) for the whole call.

    ``first_byte``, ``between_chunks`` and ``total`` are deadlines (``_core/deadlines.py``), not
    the timeout of one socket read: a server that trickles its headers or its body a byte at a
    time is cut at them. ``first_byte`` counts from each attempt's send and is long by default
    because a reasoning model may think for minutes before its headers; ``between_chunks`` counts
    from the headers, then from each complete event, and catches a stream that stalls after it
    started (keep-alive comments are events, so a thinking model that sends them never trips
    it); ``total`` counts from the first attempt's send, retries included.
    """

    connect: float = 10.0
    first_byte: float = 300.0
    between_chunks: float = 120.0
    write: float = 30.0
    total: float | None = None

    def __post_init__(self) -> None:
        # A negative or zero limit failed every request later, each with a timeout of its own;
        # NaN never fired; math.inf raised OverflowError from the socket (a long wait: a large number).
        for field in fields(self):
            value = getattr(self, field.name)
            if field.name == "total" and value is None:
                continue
            if not _seconds(value):
                raise ConfigurationError(
                    f"timeout {field.name} is seconds, a finite number > 0, not {value!r}"
                )

    @classmethod
    def of(cls, value: Timeout | float | dict[str, float] | None) -> Timeout:
        if value is None:
            return cls()
        if isinstance(value, Timeout):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not _seconds(value):
                raise ConfigurationError(f"timeout is seconds, a finite number > 0, not {value!r}")
            return cls(float(value), float(value), float(value), float(value))
        if isinstance(value, dict):
            unknown = set(value) - {field.name for field in fields(cls)}
            if unknown:
                raise ConfigurationError(
                    "timeout={...} takes connect, first_byte, between_chunks, write and total, not "
                    f"{', '.join(sorted(map(repr, unknown)))}"
                )
            return cls(**value)
        raise ConfigurationError(
            f"timeout must be seconds, a dict or nito_nb.Timeout, not {type(value).__name__}"
        )

    def httpx(self) -> httpx.Timeout:
        # httpx has one read timeout; it starts as first_byte and is switched to between_chunks
        # once the headers are in (see clients._between_chunks). The deadlines themselves are
        # kept apart (the clients, _transport/deadlines.py): a read's timeout never ends a trickle.
        return httpx.Timeout(
            connect=self.connect, read=self.first_byte, write=self.write, pool=self.connect
        )


def _seconds(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and 0 < value < math.inf


def check_max_event_size(value: Any) -> int:
    """``value`` if it is a valid limit of one event's bytes, else a ConfigurationError."""
    return whole(
        "max_event_size",
        value,
        hint=f"it is a number of bytes, {DEFAULT_MAX_EVENT_SIZE:,} (64 MiB) by default",
    )


def check_max_body_size(value: Any) -> int:
    """``value`` if it is a valid limit of a body's decoded bytes, else a ConfigurationError."""
    return whole(
        "max_body_size",
        value,
        hint=f"it is a number of bytes, {DEFAULT_MAX_BODY_SIZE:,} (256 MiB) by default",
    )
