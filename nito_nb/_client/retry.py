"""The retry policy: whether an attempt that failed before the body is tried again, and when.

No I/O and no sleeping: the clients (and a Run, for every attempt of its requests) ask
``retry_delay`` and do the waiting themselves.
"""

from __future__ import annotations

import random

from .._core.errors import (
    APIError,
    ConnectionFailed,
    ConnectTimeout,
    NitoError,
    RateLimitError,
    ServerError,
)

__all__ = ["RETRY_STATUSES", "retry_delay"]

RETRY_STATUSES = frozenset({429, 502, 503, 504})


def retry_delay(
    attempt: int, error: NitoError, max_retries: int, max_retry_wait: float
) -> float | None:
    """Seconds to wait before trying again, or None to give up. Only errors that happened
    before the first byte of the body come here; ``attempt`` counts from 0."""
    if attempt >= max_retries:
        return None
    if isinstance(error, RateLimitError) and error.retry_after is not None:
        return error.retry_after if error.retry_after <= max_retry_wait else None
    retryable = isinstance(error, (ConnectionFailed, RateLimitError)) or (
        isinstance(error, (APIError, ServerError)) and error.status_code in RETRY_STATUSES
    )
    if not retryable or isinstance(error, ConnectTimeout):
        return None
    return min(max_retry_wait, 0.5 * 2**attempt) * (0.75 + random.random() / 2)
