"""Honesty about the client: is the notebook, not the gateway, what limits a load run?

A sampler on the run's own event loop sleeps ``LAG_INTERVAL`` seconds at a time; how much later
than asked it wakes up is the loop's *lag*, the delay that every chunk's arrival stamp and
every scheduled send suffered at that moment. Every ``CPU_INTERVAL`` seconds it also reads the
process's CPU time: a share near 1.0 (one core: the GIL) means Python itself is saturated.
The verdict (``client_bound``) and its figures go to the summary and the panel. It warns only
when the client changed a result: when its delays (the loop's lag, in every arrival stamp; its
own lateness in sending a scheduled request, the gateway's 429 pauses left out) exceed
``DISTORTION_SHARE`` of the requests' median time to first token, and ``LAG_BOUND_S``. A busy
CPU or a lag of a few milliseconds beside answers of a second changes nothing: an ordinary
batch on a shared machine said "the client was the bottleneck" every time.

A lag has two causes that call for different cures: the loop was busy with the client's own work
(a read being parsed: use more workers), or its thread was ready to run and no CPU was free, the
machine's other processes holding them (a gateway or simulator on the same machine, another
run, the browser: fewer busy processes, or more cores). On Linux each sample also reads the
thread's run-queue wait (``/proc/thread-self/schedstat``, the scheduler's own count of the
time a ready thread waited for a CPU), and the report says which share of the lag's tail was
that wait (``client_lag_waiting_cpu``): with ``engine="processes"`` on a 2-core machine it
covered the whole of the long lags (docs/BENCHMARKS.md).

With ``engine="processes"`` or ``"ray"`` the client is also each worker: every worker samples
its own loop the same way and sends its new samples back with each log (``drain``); the driver
pools them with its own (``add``): the percentiles are over every loop's samples together, the
maximum is the worst loop's.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .._core.units import to_seconds

__all__ = [
    "CPU_BOUND_SHARE",
    "DISTORTION_SHARE",
    "LAG_BOUND_S",
    "ClientMonitor",
    "Health",
    "verdict",
    "waiting_share",
]

#: What a worker's monitor sends back with each log (``drain``): lag samples, CPU shares, and
#: (lag, run-queue wait) pairs.
Health = tuple[list[float], list[float], list[tuple[float, float]]]

#: The loop is sampled this often (seconds).
LAG_INTERVAL = 0.010
#: The process's CPU share is computed over windows of this many seconds.
CPU_INTERVAL = 0.5
#: The client is said to have changed a result when its p99 delay (the loop's lag, or how late it
#: sent a scheduled request by its own doing) exceeds this share of the median time to first token...
DISTORTION_SHARE = 0.10
#: ... and this many seconds (a delay below it is the noise of any timing on a shared machine).
LAG_BOUND_S = 0.005
#: A process that used at least this share of one core in some window is said to, beside a delay.
CPU_BOUND_SHARE = 0.9
#: Samples kept (an hour of lag samples); older ones are dropped.
MAX_SAMPLES = 360_000
#: The lag's tail whose run-queue wait is reported: the samples at or above this percentile.
TAIL_PERCENTILE = 99
#: A note blames the machine when at least this share of the lag's tail was run-queue wait.
WAITING_SHARE = 0.5
#: Where Linux keeps a thread's scheduler statistics: run time, run-queue wait (ns), time slices.
SCHEDSTAT = "/proc/thread-self/schedstat"


class RunQueueClock:
    """The calling thread's total run-queue wait so far (ns): the time it was ready to run and had
    no CPU. ``open()`` gives None where the kernel does not say (not Linux, no schedstat). The file
    stays open: a ``pread`` of it costs a few microseconds, an ``open`` about ten."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def open(cls) -> RunQueueClock | None:
        try:
            fd = os.open(SCHEDSTAT, os.O_RDONLY)
        except OSError:
            return None
        clock = cls(fd)
        try:
            clock()
        except (OSError, ValueError, IndexError, AttributeError):  # AttributeError: no os.pread
            clock.close()
            return None
        return clock

    def __call__(self) -> int:
        return int(os.pread(self._fd, 128, 0).split()[1])

    def close(self) -> None:
        os.close(self._fd)


class ClientMonitor:
    """Samples the event loop's lag and the process's CPU share while a run sends; ``worker``:
    also keeps the samples not yet sent to the driver (``drain``)."""

    def __init__(self, *, worker: bool = False, simulator: bool = False) -> None:
        #: The run sends to the embedded simulator in the client's own process (a ``sim/`` model
        #: without a base URL where the simulator process could not start, or a Ray actor on
        #: another node than the driver's; ``nito_nb/sim/_process.py``): its work counts here.
        self.simulator = simulator
        self.lags: deque[float] = deque(maxlen=MAX_SAMPLES)
        self.cpu: deque[float] = deque(maxlen=MAX_SAMPLES)
        #: Per lag sample, the part of it the loop's thread waited for a CPU (s; the run-queue
        #: wait in the sample's window, at most its lag); empty where the kernel does not say.
        self.waits: deque[tuple[float, float]] = deque(maxlen=MAX_SAMPLES)
        #: How late the client sent each scheduled request by its own doing (s): its send delay
        #: less the time the run's gate held it (a 429's pause, the in-flight limit). The driver's.
        self.late: deque[float] = deque(maxlen=MAX_SAMPLES)
        self._new: Health | None = ([], [], []) if worker else None

    def drain(self) -> Health:
        """(lag samples, CPU shares, (lag, wait) pairs) taken since the last call: a worker's, for the driver."""
        assert self._new is not None, (
            "drain() is for a worker's monitor (ClientMonitor(worker=True))"
        )
        new, self._new = self._new, ([], [], [])
        return new

    def sent_late(self, seconds: float) -> None:
        """A scheduled request was sent ``seconds`` late by the client's own doing."""
        self.late.append(max(0.0, seconds))

    def add(
        self, lags: list[float], cpu: list[float], waits: list[tuple[float, float]] | None = None
    ) -> None:
        """A worker's samples (``drain``), pooled with this loop's own."""
        self.lags.extend(lags)
        self.cpu.extend(cpu)
        self.waits.extend(waits or ())

    async def sample(self) -> None:
        """Run on the run's loop until cancelled."""
        clock, cpu_clock = time.perf_counter, time.process_time
        waited = RunQueueClock.open()  # of this thread: the loop's
        try:
            await self._sample(clock, cpu_clock, waited)
        finally:
            if waited is not None:
                waited.close()

    async def _sample(
        self,
        clock: Callable[[], float],
        cpu_clock: Callable[[], float],
        waited: RunQueueClock | None,
    ) -> None:
        cpu_start, cpu_wall = cpu_clock(), clock()
        while True:
            before = clock()
            wait_before = waited() if waited is not None else 0
            await asyncio.sleep(LAG_INTERVAL)
            now = clock()
            lag = max(0.0, now - before - LAG_INTERVAL)
            self.lags.append(lag)
            if self._new is not None:
                self._new[0].append(lag)
            if waited is not None:
                # The window's run-queue wait may have come before the timer was due, when it made
                # nothing late: a lag is at most that wait's doing, hence the cap. Still an upper
                # bound: the kernel gives no time of the wait within the window.
                pair = (lag, min(lag, to_seconds(waited() - wait_before)))
                self.waits.append(pair)
                if self._new is not None:
                    self._new[2].append(pair)
            if now - cpu_wall >= CPU_INTERVAL:
                cpu_now = cpu_clock()
                share = (cpu_now - cpu_start) / (now - cpu_wall)
                self.cpu.append(share)
                if self._new is not None:
                    self._new[1].append(share)
                cpu_start, cpu_wall = cpu_now, now

    def report(self, recent: int | None = None, ttft_p50: float | None = None) -> dict[str, Any]:
        """``client_lag_p50/p99/max`` (s), ``client_cpu_max`` (share of one core),
        ``client_lag_waiting_cpu`` (``waiting_share``), ``client_send_late_p99`` (s),
        ``client_bound`` and ``client_note`` (``verdict``, against ``ttft_p50``); over the last
        ``recent`` samples only when given (the panel's live view: cheap, and about the last few
        seconds)."""
        import itertools

        import numpy as np

        lag_list = (
            list(self.lags)
            if recent is None
            else list(itertools.islice(reversed(self.lags), recent))
        )
        cpu_list = (
            list(self.cpu)
            if recent is None
            else list(
                itertools.islice(
                    reversed(self.cpu), max(1, int(recent * LAG_INTERVAL / CPU_INTERVAL))
                )
            )
        )
        lags = np.asarray(lag_list, dtype=float)
        cpu = np.asarray(cpu_list, dtype=float)
        wait_list = (
            list(self.waits)
            if recent is None
            else list(itertools.islice(reversed(self.waits), recent))
        )
        late = np.asarray(
            list(self.late)
            if recent is None
            else list(itertools.islice(reversed(self.late), recent)),
            dtype=float,
        )
        out: dict[str, Any] = {
            "client_lag_p50": float(np.percentile(lags, 50)) if len(lags) else float("nan"),
            "client_lag_p99": float(np.percentile(lags, 99)) if len(lags) else float("nan"),
            "client_lag_max": float(lags.max()) if len(lags) else float("nan"),
            "client_cpu_max": float(cpu.max()) if len(cpu) else float("nan"),
            "client_lag_waiting_cpu": waiting_share(wait_list),
            "client_send_late_p99": float(np.percentile(late, 99)) if len(late) else float("nan"),
            "client_runs_simulator": self.simulator,
        }
        out["client_bound"], out["client_note"] = verdict(out, ttft_p50)
        return out


def waiting_share(pairs: list[tuple[float, float]]) -> float:
    """The share of the lag's tail (the samples at or above its p99) that the loop's thread spent
    waiting for a CPU, at most (each pair's wait is an upper bound); NaN without samples or lag."""
    import numpy as np

    if not pairs:
        return float("nan")
    table = np.asarray(pairs, dtype=float)
    lags, waits = table[:, 0], table[:, 1]
    tail = lags >= np.percentile(lags, TAIL_PERCENTILE)
    total = lags[tail].sum()
    return float(waits[tail].sum() / total) if total > 0 else float("nan")


def verdict(report: dict[str, Any], ttft_p50: float | None = None) -> tuple[bool, str]:
    """(whether the client changed a result, one line saying how and by how much).

    It did when a delay of its own exceeds ``DISTORTION_SHARE`` of ``ttft_p50`` (the median
    time to first token of the requests judged) and ``LAG_BOUND_S``: its loop's p99 lag (late
    arrival stamps: every timing), or its p99 lateness in sending scheduled requests (an open
    loop that fell behind; a 429's pause is the gateway's, not counted). Without a ``ttft_p50``
    (nothing ended yet) a lag is not judged, a lateness against ``LAG_BOUND_S`` alone. Its CPU
    share and the run-queue wait say why, beside a delay; alone they change nothing."""
    ttft = ttft_p50 if ttft_p50 is not None and ttft_p50 == ttft_p50 else None  # NaN: none
    bound = None if ttft is None else max(LAG_BOUND_S, DISTORTION_SHARE * ttft)
    of_ttft = (
        "" if ttft is None else f"; {DISTORTION_SHARE:.0%} of the median TTFT, {ttft * 1e3:.0f} ms"
    )
    reasons = []
    lag = report.get("client_lag_p99")
    if bound is not None and lag is not None and lag == lag and lag > bound:
        reason = (
            f"its event loop lagged {lag * 1e3:.1f} ms at p99 (bound {bound * 1e3:.3g} ms{of_ttft})"
        )
        waiting = report.get("client_lag_waiting_cpu")
        if waiting is not None and waiting == waiting and waiting >= WAITING_SHARE:
            reason += f", {waiting:.0%} of it waiting for a CPU other processes held"
        reasons.append(reason)
    late = report.get("client_send_late_p99")
    late_bound = LAG_BOUND_S if bound is None else bound
    if late is not None and late == late and late > late_bound:
        reasons.append(
            f"it sent requests {late * 1e3:.1f} ms late at p99, 429 pauses aside "
            f"(bound {late_bound * 1e3:.3g} ms{of_ttft})"
        )
    if not reasons:
        return False, ""
    cpu = report.get("client_cpu_max")
    if cpu is not None and cpu == cpu and cpu >= CPU_BOUND_SHARE:
        reasons.append(f"it used {cpu:.0%} of a core")
    note = "the client skewed the timings: " + "; ".join(reasons)
    # else a user reads the simulator's work as the client's
    if report.get("client_runs_simulator"):
        note += " (its process also runs the sim/ simulator: start `python -m nito_nb.sim` and pass base_url=)"
    return True, note
