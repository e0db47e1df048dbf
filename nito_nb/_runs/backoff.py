"""The run's shared rate-limit backoff. Pure: the runner brings the clock and the waiting.

A 429 is a message about the whole key, not about one request: so it pauses every request of
the run (for ``Retry-After`` when the gateway sends one, else an exponential wait) and halves the
number of requests allowed in flight; each success then gives one slot back, up to the run's
concurrency (additive increase, multiplicative decrease, as TCP does).
"""

from __future__ import annotations

__all__ = ["Backoff"]

#: Without Retry-After, the n-th 429 in a row pauses 2**n times this long (capped at MAX_PAUSE).
BASE_PAUSE = 0.5
MAX_PAUSE = 30.0


class Backoff:
    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        #: Requests allowed in flight right now (between 1 and ``concurrency``).
        self.limit = concurrency
        #: No request is sent before this time (the runner's clock, seconds).
        self.resume_at = 0.0
        self.n_rate_limited = 0
        self._streak = 0  # 429s since the last success

    def rate_limited(self, now: float, retry_after: float | None) -> float:
        """A 429 arrived at ``now``: pause everything, halve the limit; return the pause (s)."""
        self.n_rate_limited += 1
        if retry_after is None:
            pause = min(MAX_PAUSE, BASE_PAUSE * 2**self._streak)
        else:
            pause = min(MAX_PAUSE, max(0.0, retry_after))
        # One burst of 429s (the requests that were in flight together) halves the limit once.
        if now >= self.resume_at:
            self.limit = max(1, self.limit // 2)
        self._streak += 1
        self.resume_at = max(self.resume_at, now + pause)
        return pause

    def succeeded(self) -> None:
        """A request got through: ramp back up by one slot."""
        self._streak = 0
        if self.limit < self.concurrency:
            self.limit += 1

    def wait(self, now: float) -> float:
        """Seconds to wait before sending (0: go)."""
        return max(0.0, self.resume_at - now)
