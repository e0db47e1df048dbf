"""The client's limits: the timeouts and the largest SSE event. No I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import httpx

from .._core.checks import whole
from .._core.errors import ConfigurationError

__all__ = ["DEFAULT_MAX_EVENT_SIZE", "Timeout", "check_max_event_size"]

#: The default limit of one SSE event's bytes: far above any chunk a gateway sends (a whole
#: answer in one chunk included), far below what would exhaust a notebook's memory.
DEFAULT_MAX_EVENT_SIZE = 64 * 1024 * 1024


@dataclass(frozen=True)
class Timeout:
    """Seconds to wait: to connect, for the response to start, and between two reads of the body.

    ``first_byte`` is long by default because a reasoning model may think for minutes before its
    headers; ``between_chunks`` catches a stream that stalls after it started (keep-alive comments
    count as data, so a thinking model that sends them never trips it).
    """

    connect: float = 10.0
    first_byte: float = 300.0
    between_chunks: float = 120.0
    write: float = 30.0

    def __post_init__(self) -> None:
        # A negative or zero limit failed every request later, each with a timeout of its own;
        # NaN never fired; math.inf raised OverflowError from the socket (a long wait: a large number).
        for field in fields(self):
            value = getattr(self, field.name)
            if not _seconds(value):
                raise ConfigurationError(f"timeout {field.name} is seconds, a finite number > 0, not {value!r}")

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
                    f"timeout={{...}} takes connect, first_byte, between_chunks and write, not {', '.join(sorted(map(repr, unknown)))}"
                )
            return cls(**value)
        raise ConfigurationError(
            f"timeout must be seconds, a dict or nito_nb.Timeout, not {type(value).__name__}"
        )

    def httpx(self) -> httpx.Timeout:
        # httpx has one read timeout; it starts as first_byte and is switched to between_chunks
        # once the headers are in (see clients._between_chunks).
        return httpx.Timeout(connect=self.connect, read=self.first_byte, write=self.write, pool=self.connect)


def _seconds(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and 0 < value < math.inf


def check_max_event_size(value: Any) -> int:
    """``value`` if it is a valid limit of one event's bytes, else a ConfigurationError."""
    return whole("max_event_size", value,
                 hint=f"it is a number of bytes, {DEFAULT_MAX_EVENT_SIZE:,} (64 MiB) by default")
