"""The timing metrics: one definition each (docs/METRICS.md), as pure functions of arrival times
(seconds from t0, the request being sent) and counts.

The stream's state (``state.py``: its snapshot, a run's results), the frame accessor
(``df.nito.metrics()``: on its ``t`` column, the same readings as seconds since t0), the magic's
comparison table and history and the status line all call these, so a figure means the same
wherever it is shown. Which metric is a column of which table: ``fields.py``. An undefined value
is None (the frame shows it as NaN); a NaN time (a recording without arrival times) gives NaN or
None, never an error.

- **K**: the token-bearing chunks (chunks with content, reasoning, refusal or tool-call text).
- **N**: ``usage.completion_tokens`` of the last usage object; None when the gateway sent none
  (:func:`n_output_tokens`). Never replaced by K: a chunk may carry several tokens, so every
  metric is either per chunk (K, always defined) or per token (N, undefined without usage).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .units import to_seconds

__all__ = [
    "connect",
    "e2e",
    "itl",
    "n_output_tokens",
    "of_stream",
    "output_chunks_per_s",
    "output_tps",
    "quantile",
    "seconds",
    "since",
    "token_gaps",
    "tpot",
    "ttfb",
    "ttft",
]


def seconds(t_ns: int | None, t0_ns: int) -> float | None:
    """A nanosecond clock reading as seconds since t0, never below 0 (None stays None)."""
    return None if t_ns is None else to_seconds(max(0, t_ns - t0_ns))


def since(t_ns: int | None, t0_ns: int) -> float | None:
    """A nanosecond clock reading as seconds since t0 (None stays None)."""
    return None if t_ns is None else to_seconds(t_ns - t0_ns)


def connect(connect_ns: int | float | None) -> float | None:
    """Seconds the attempt that got the response spent opening its connection: from its first
    connect started to its last connect or TLS handshake completed (name lookup, TCP, TLS; a
    proxy's tunnel too), ``connect_ns`` long. Part of ttfb and ttft. None when unknown or when no
    connection was opened (one reused from a pool)."""
    return None if connect_ns is None else to_seconds(connect_ns)


def ttfb(headers_ns: int | None, t0_ns: int) -> float | None:
    """Response headers received − t0 (None when the headers time is unknown)."""
    return since(headers_ns, t0_ns)


def ttft(first_token_ns: int | None, t0_ns: int) -> float | None:
    """First token-bearing event − t0 (None when K = 0)."""
    return since(first_token_ns, t0_ns)


def e2e(last_event_ns: int | None, t0_ns: int) -> float | None:
    """Last event of the stream − t0 (None when there is no event)."""
    return seconds(last_event_ns, t0_ns)


def n_output_tokens(usage: Mapping[str, Any] | None) -> int | float | None:
    """N: the usage's ``completion_tokens`` when it is a number, else None (no usage, or no count
    in it). Never K instead: a column holds one unit."""
    completion = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
    if isinstance(completion, (int, float)) and not isinstance(completion, bool):
        return completion
    return None


def itl(first_token: float | None, last_token: float | None, k: int) -> float | None:
    """Inter-token latency, per chunk (vLLM's ITL): the mean gap between consecutive token-bearing
    chunks, (t_last − t_first) / (K − 1); None when K < 2."""
    if k < 2 or first_token is None or last_token is None:
        return None
    return (last_token - first_token) / (k - 1)


def tpot(
    first_token: float | None, last_token: float | None, k: int, n: float | None
) -> float | None:
    """Time per output token: (t_last − t_first) / (N − 1); None without usage (N None), when
    N < 2, or when K < 2 (one chunk spans no time)."""
    if n is None or n < 2 or k < 2 or first_token is None or last_token is None:
        return None
    return (last_token - first_token) / (n - 1)


def output_tps(n: float | None, ttft: float | None, e2e: float | None) -> float | None:
    """Output tokens per second: N / (e2e − ttft); None without usage (N None), when K = 0 (no
    ttft) or e2e = ttft. For a live stream, ``e2e`` is the time elapsed so far."""
    return _per_second(n, ttft, e2e)


def output_chunks_per_s(k: int, ttft: float | None, e2e: float | None) -> float | None:
    """Token-bearing chunks per second: K / (e2e − ttft), defined with or without usage; None when
    K = 0 (no ttft) or e2e = ttft."""
    return _per_second(k, ttft, e2e)


def of_stream(
    first_token: float | None, last_token: float | None, k: int, n: float | None, e2e: float | None
) -> dict[str, float | None]:
    """The metrics of one stream that follow from its first and last token-bearing chunks, K, N
    and e2e: the one place both a run's result rows (``_runs/results.py``) and the frame
    (``df.nito.metrics()``) compute them, so a metric added here is in both (``fields.py`` says
    which tables show it)."""
    return {
        "itl": itl(first_token, last_token, k),
        "tpot": tpot(first_token, last_token, k, n),
        "output_tps": output_tps(n, first_token, e2e),
        "output_chunks_per_s": output_chunks_per_s(k, first_token, e2e),
    }


def _per_second(count: float | None, ttft: float | None, e2e: float | None) -> float | None:
    if count is None or ttft is None or e2e is None:
        return None
    duration = e2e - ttft
    if not duration > 0:  # also NaN
        return None
    return count / duration


def token_gaps(token_times: Sequence[float]) -> list[float]:
    """The K − 1 gaps between consecutive token-bearing chunks (times in arrival order): the
    samples of ``itl_p50``... ``itl_max``."""
    return [b - a for a, b in itertools.pairwise(token_times)]


def quantile(values: Iterable[float | None], q: float) -> float | None:
    """The q-quantile, linearly interpolated between the closest ranks (numpy's default): a
    stream's ``itl_p50``/``p90``/``p99`` over its token gaps (q = 1 is ``itl_max``), a run
    summary's p50/p90/p99 over its requests of ttft, itl and e2e. None when there is no value
    (for the gaps: K < 2); None and NaN are left out."""
    values = sorted(v for v in values if v is not None and not math.isnan(v))
    if not values:
        return None
    position = (len(values) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)
