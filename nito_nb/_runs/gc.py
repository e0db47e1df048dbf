"""During a run, Python's cyclic garbage collector leaves alone what is already old.

A full pass of the collector walks every object that can hold references, with every thread
stopped: with pandas imported and a run's Streams kept, passes long enough to stop the sending
loop came every second or two, so requests left late and chunks were read late
(bench/bench_load.py; docs/BENCHMARKS.md).

So while some run is going, ``gc.freeze()`` moves every object alive into the collector's
permanent generation: once when the run starts, and again every quarter of a second
(``settle``, from the run's writer thread), so a pass only walks what was made since. Frozen
objects are still freed as soon as nothing refers to them (reference counting does not stop);
only a reference cycle that becomes garbage while frozen waits, until the last run ends and
``gc.unfreeze()`` hands everything back to the collector. A request leaves no such cycle (httpx's Response/body cycle is
broken when the response closes: ``_client/clients.py`` ``_close``); what other code in the
process makes meanwhile is kept for the length of the run. A program that calls ``gc.freeze()``
itself (before forking workers) has it undone when a run ends.

And while some run is going, the young pass waits for ``YOUNG_THRESHOLD`` new objects instead of
Python's 700: a request's objects (its coroutines, futures, handles, state) come and go in
bursts, and at 700 the young pass ran every few requests over the 64 requests in flight, to
free nothing (reference counting frees them; a request leaves no cycle): 75-95 µs of the
sending loop's time per ``sim/chat`` request at concurrency 64 (bench/bench_runs_floor.py's
profile), against 1-2 µs at 10,000. A threshold the program set itself above it, or 0 (the
collector off), is left as it is; the last run to end puts back what was there.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time

__all__ = ["SETTLE_EVERY", "YOUNG_THRESHOLD", "begin", "end", "settle", "settling"]

#: While a run goes, what is alive is frozen at most this often (seconds): a full pass then walks
#: at most what the last quarter of a second left, shorter than when it was once a second
#: (bench/bench_load.py's send delay; docs/BENCHMARKS.md).
SETTLE_EVERY = 0.25
#: While some run is going, the young generation's threshold (the module's docstring says why).
YOUNG_THRESHOLD = 10_000

_lock = threading.Lock()
_active = 0
_last = 0.0
_thresholds: tuple[int, ...] | None = None  # the collector's before the runs raised it


def begin() -> None:
    """A run starts: freeze what exists (runs may overlap; the last ``end`` unfreezes)."""
    global _active, _thresholds
    with _lock:
        _active += 1
        gc.freeze()
        young, *older = gc.get_threshold()
        if _thresholds is None and 0 < young < YOUNG_THRESHOLD:
            _thresholds = (young, *older)
            gc.set_threshold(YOUNG_THRESHOLD, *older)


def settle() -> None:
    """Freeze what finished requests left (their rows, their Streams when there is no store),
    while some run is going, at most every ``SETTLE_EVERY`` seconds (a run's writer thread
    calls this on every turn)."""
    global _last
    with _lock:
        now = time.monotonic()
        if _active and now - _last >= SETTLE_EVERY:
            gc.freeze()
            _last = now


async def settling() -> None:
    """``settle`` every ``SETTLE_EVERY`` seconds until cancelled: for a loop with no writer thread
    (a worker process's, a Ray actor's), whose requests' objects a full pass would otherwise walk."""
    while True:
        await asyncio.sleep(SETTLE_EVERY)
        settle()


def end() -> None:
    """A run ended: when it was the last, give every frozen object back to the collector, and
    its young threshold (unless the program set another meanwhile)."""
    global _active, _thresholds
    with _lock:
        _active -= 1
        if _active == 0:
            gc.unfreeze()
            if _thresholds is not None and gc.get_threshold()[0] == YOUNG_THRESHOLD:
                gc.set_threshold(*_thresholds)
            _thresholds = None
