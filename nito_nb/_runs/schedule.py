"""Open-loop schedules of a load run: when each request is to be sent, computed up front. Pure.

Open loop means a request is sent at its scheduled time whether or not earlier ones have
finished (a closed loop, ``concurrency=N``, sends the next one when one ends, so a slow gateway
silently lowers the load it is measured at: coordinated omission). The runner records each
request's ``scheduled_at`` and ``sent_at``; their difference, ``send_delay``, shows when the
client could not keep to the schedule.

Inter-arrival times: ``"constant"`` is ``1/rate``; ``"poisson"`` draws them from a gamma
distribution of shape ``burstiness`` and mean ``1/rate`` (shape 1 is the exponential, i.e. a
Poisson process; below 1 burstier, above 1 more regular): the same rule as vLLM's
``bench serve --burstiness``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .._core.counts import whole
from .._core.errors import ConfigurationError

__all__ = ["SCHEDULES", "Schedule", "phase"]

SCHEDULES = ("constant", "poisson")
#: A schedule is computed up front, so its size is bounded (about 100 MB of requests and keys).
MAX_SCHEDULED = 1_000_000


def check_rate(rate: Any) -> None:
    """One clear error for a rate that is not a finite number of requests per second > 0."""
    if (
        isinstance(rate, bool)
        or not isinstance(rate, int | float)
        or not rate > 0
        or math.isinf(rate)
    ):
        raise ConfigurationError(f"rate is requests per second, a number > 0, not {rate!r}")


@dataclass(frozen=True, slots=True)
class Schedule:
    """An open-loop schedule: ``rate`` requests/s for ``duration`` s or ``max_requests``."""

    rate: float
    kind: str = "constant"
    burstiness: float = 1.0
    duration: float | None = None
    max_requests: int | None = None
    warmup: float = 0.0
    cooldown: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        check_rate(self.rate)
        if self.kind not in SCHEDULES:
            raise ConfigurationError(
                f"schedule must be one of {', '.join(SCHEDULES)}, not {self.kind!r}"
            )
        if (
            not isinstance(self.burstiness, int | float)
            or not self.burstiness > 0
            or math.isinf(self.burstiness)
        ):
            raise ConfigurationError(
                f"burstiness is the gamma shape, a number > 0, not {self.burstiness!r}"
            )
        if self.burstiness != 1.0 and self.kind != "poisson":
            raise ConfigurationError("burstiness applies to schedule='poisson' only")
        if self.duration is None and self.max_requests is None:
            raise ConfigurationError(
                "an open-loop run (rate=...) needs duration=SECONDS or max_requests=N"
            )
        if self.duration is not None and (
            not isinstance(self.duration, int | float)
            or not self.duration > 0
            or math.isinf(self.duration)
        ):  # the schedule is computed up front
            raise ConfigurationError(
                f"duration is in seconds, a finite number > 0, not {self.duration!r} "
                "(for no time limit, leave it out and set max_requests=N)"
            )
        if self.max_requests is not None:  # (frozen: the checked int is set as __init__ would)
            object.__setattr__(self, "max_requests", whole("max_requests", self.max_requests))
        planned = self.max_requests if self.max_requests is not None else math.inf
        if self.duration is not None:
            planned = min(
                planned,
                math.ceil(self.rate * self.duration * (1 if self.kind == "constant" else 1.1)),
            )
        if planned > MAX_SCHEDULED:
            raise ConfigurationError(
                f"rate={self.rate:g} for duration={self.duration:g} s is more than {MAX_SCHEDULED:,} requests:"
                " lower the rate or the duration, or set max_requests"
            )
        for name in ("warmup", "cooldown"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not value >= 0
                or math.isinf(value)
            ):
                raise ConfigurationError(f"{name} is in seconds, a number >= 0, not {value!r}")

    def offsets(self) -> list[float]:
        """Each request's send time, in seconds after the run's start (the first is 0)."""
        import numpy as np

        limit = self.max_requests if self.max_requests is not None else math.inf
        horizon = self.duration if self.duration is not None else math.inf
        rng = np.random.default_rng(self.seed)
        out: list[float] = []
        t = 0.0
        while len(out) < limit and t < horizon:
            out.append(t)
            if self.kind == "constant":
                t = len(out) / self.rate  # no accumulated float error
            else:
                t += float(rng.gamma(self.burstiness, 1.0 / (self.rate * self.burstiness)))
        return out

    def end(self, offsets: list[float]) -> float:
        """The end of the schedule's window: ``duration``, else just after the last send."""
        if self.duration is not None:
            return float(self.duration)
        return (offsets[-1] if offsets else 0.0) + 1.0 / self.rate


def phase(scheduled_at: float, warmup: float, cooldown: float, end: float) -> str:
    """``warmup``, ``measure`` or ``cooldown``: where a request's scheduled time falls. Only
    ``measure`` requests enter the summary."""
    if scheduled_at < warmup:
        return "warmup"
    if scheduled_at >= end - cooldown:
        return "cooldown"
    return "measure"
