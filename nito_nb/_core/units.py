"""Nanoseconds and seconds: the one conversion.

Every arrival time is a nanosecond clock reading (``time.perf_counter_ns()``, a socket's stamp);
every figure a user reads is in seconds. Both functions take numbers or numpy arrays alike.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NS_PER_S", "to_ns", "to_seconds"]

NS_PER_S = 1_000_000_000


def to_seconds(ns: Any) -> Any:
    """Nanoseconds (a duration, or a difference of two clock readings) as seconds."""
    return ns / NS_PER_S


def to_ns(seconds: float) -> int:
    """Seconds as whole nanoseconds (rounded to the nearest)."""
    return round(seconds * NS_PER_S)
