"""One timeline for a run whose requests are sent by other processes or nodes.

A worker's ``perf_counter`` is not the driver's: another node's has another origin, and so does
another process's on some systems. A duration (ttft, itl, e2e...) is a difference of two readings
of one clock, so it stays on the worker's clock, untouched. A time that lines requests up across
workers (when a request was sent, when a pause ends) goes through the wall clock: each process
knows its own offset ``wall − perf_counter``; a worker sends its offset with each result, and
the driver moves the worker's times by the difference of the two offsets. On one machine the two
wall clocks are the same clock, so the mapping is exact up to the two readings (microseconds);
across nodes it is as good as their wall clocks' synchronisation (NTP: about a millisecond).

``Hold`` and ``loop_time`` are the other direction: a worker told "send nothing before this wall
time" (the run's shared 429 pause, ``_backoff.py``), or "send this request at this wall time" (an
open-loop schedule, handed over a little ahead), waits until then on its own clock.
"""

from __future__ import annotations

import asyncio
import time

from .._core.units import to_seconds

__all__ = ["Hold", "loop_time", "offset_ns", "to_local_ns"]


def offset_ns() -> int:
    """This process's ``wall − perf_counter`` now, in nanoseconds."""
    return time.time_ns() - time.perf_counter_ns()


def to_local_ns(t_ns: int, remote_offset_ns: int, local_offset_ns: int) -> int:
    """A ``perf_counter_ns`` reading of another process (whose offset is ``remote_offset_ns``) as
    a reading of this process's ``perf_counter_ns`` (offset ``local_offset_ns``): the same wall
    time. Pure."""
    return t_ns + remote_offset_ns - local_offset_ns


def loop_time(wall_ns: int) -> float:
    """The running loop's ``time()`` at the wall time ``wall_ns``."""
    return asyncio.get_running_loop().time() + to_seconds(wall_ns - time.time_ns())


class Hold:
    """A worker's "send nothing before": the driver gives a wall time, the worker waits on its own
    clock (a later pause only ever extends it)."""

    def __init__(self) -> None:
        self.resume_ns = 0  # this process's perf_counter_ns

    def until(self, wall_ns: int) -> None:
        self.resume_ns = max(self.resume_ns, wall_ns - offset_ns())

    async def wait(self) -> None:
        while (left := self.resume_ns - time.perf_counter_ns()) > 0:
            await asyncio.sleep(to_seconds(left))
