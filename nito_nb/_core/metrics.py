"""The timing metrics: one definition each (docs/METRICS.md), as pure functions of arrival times
(seconds from t0, the request being sent) and counts.

The frame accessor (``df.nito.metrics()``), the magic's comparison table and history and the
status line all call these, so a figure means the same wherever it is shown. An undefined value
is None (the frame shows it as NaN); a NaN time (a recording without arrival times) gives NaN or
None, never an error.

- **K**: the token-bearing events (chunks with content, reasoning, refusal or tool-call text).
- **N**: ``usage.completion_tokens`` of the last usage object when the gateway sent one, else K
  (:func:`n_tokens`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "e2e",
    "itl",
    "n_tokens",
    "output_tps",
    "quantile",
    "seconds",
    "token_gaps",
    "tpot",
    "ttfb",
    "ttft",
]


def seconds(t_ns: int | None, t0_ns: int) -> float | None:
    """Nanosecond clock readings to seconds since t0 (None stays None)."""
    return None if t_ns is None else max(0, t_ns - t0_ns) / 1e9


def ttfb(headers: float | None) -> float | None:
    """Response headers received − t0."""
    return headers


def ttft(first_token: float | None) -> float | None:
    """First token-bearing event − t0 (None when K = 0)."""
    return first_token


def e2e(last_event: float | None) -> float | None:
    """Last event of the stream − t0 (None when there is no event)."""
    return last_event


def n_tokens(usage: Mapping[str, Any] | None, k: int) -> tuple[int | float, str]:
    """(N, where it comes from): the usage's ``completion_tokens`` (``"usage"``) when it is a
    number, else the count of token-bearing events K (``"chunks"``)."""
    completion = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
    if isinstance(completion, (int, float)) and not isinstance(completion, bool):
        return completion, "usage"
    return k, "chunks"


def itl(first_token: float | None, last_token: float | None, k: int) -> float | None:
    """The mean gap between consecutive token-bearing events: (t_last − t_first) / (K − 1);
    None when K < 2."""
    if k < 2 or first_token is None or last_token is None:
        return None
    return (last_token - first_token) / (k - 1)


def tpot(first_token: float | None, last_token: float | None, k: int, n: float) -> float | None:
    """Time per output token: (t_last − t_first) / (N − 1); None when N < 2 or K < 2 (one event
    spans no time)."""
    if n < 2 or k < 2 or first_token is None or last_token is None:
        return None
    return (last_token - first_token) / (n - 1)


def output_tps(n: float | None, ttft: float | None, e2e: float | None) -> float | None:
    """Tokens per second: N / (e2e − ttft); None when K = 0 (no ttft) or e2e = ttft. For a live
    stream, ``e2e`` is the time elapsed so far."""
    if n is None or ttft is None or e2e is None:
        return None
    duration = e2e - ttft
    if not duration > 0:  # also NaN
        return None
    return n / duration


def token_gaps(token_times: Sequence[float]) -> list[float]:
    """The K − 1 gaps between consecutive token-bearing events (times in arrival order)."""
    return [b - a for a, b in itertools.pairwise(token_times)]


def quantile(values: Iterable[float | None], q: float) -> float | None:
    """The q-quantile, linearly interpolated between the closest ranks (numpy's default): the
    gaps' ``gap_p50``/``p90``/``p99`` (q = 1 is ``gap_max``), a run's p50/p90/p99 of ttft, itl
    and e2e. None when there is no value (for the gaps: K < 2); None and NaN are left out."""
    values = sorted(v for v in values if v is not None and not math.isnan(v))
    if not values:
        return None
    position = (len(values) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)
