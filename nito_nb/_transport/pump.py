"""The turns in which the pushed bodies of one event loop are handed to their Streams (parsed).

Parsing is most of a load run's client work, and a request's send is a timer: it runs once the
callbacks of its turn of the loop are done. So parsing is spread over the loop's turns, a little
each: every body with bytes waiting gets, in turn, up to ``SLICE`` bytes handed on, until ``BUDGET``
of the turn is spent; then the loop goes round (its reads, its timers, the tasks that send) before
the next bodies get theirs. A body whose reads are small and come one at a time (a streaming
answer's chunks, the common case) never waits here: each read is handed on in its own callback
(``pushed.py``); only a read past ``SLICE`` bytes, or one that arrives while earlier bytes of its
body wait, goes through the pump. Times are not touched: each read carries its arrival time from the
socket, so a body parsed later keeps the times its bytes came at.

When the loop cannot keep up (more arrives than it can parse), what waits grows; past ``LIMIT``
bytes over all bodies the pump parses without a budget until it is below again, so memory and
the open connections (a body's connection is closed at its end, once parsed) stay bounded: the
loop then parses instead of sending, and requests leave late, as they must.

Spreading the parsing this way kept the send delay's tail shorter than one slice per body each
turn, or a whole read parsed in its callback (bench/bench_load.py's open loop;
docs/BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
import collections
import time
import weakref
from typing import Protocol

__all__ = ["BUDGET", "LIMIT", "SLICE", "Pump", "pump"]

#: Bytes of one body handed on in one go: a whole socket read (``streams.READ_SIZE``), about 80
#: chunks of an answer, so the pump only serves reads that queue behind a body's earlier ones.
#: It was 4 KiB (a read handed on over four turns): a run of 1,000 ``sim/chat`` requests at 64 in
#: flight cost 2.64 ms of CPU a request against 1.99 ms with 16 KiB (medians of 4 interleaved
#: rounds; 8 KiB 2.29 ms): every slice is a parse of another body's state, and its own trip through
#: the loop. A turn of the loop grows by at most one read's parsing (about 0.2 ms).
SLICE = 16 * 1024
#: Parsing per turn of the loop, over all the bodies that wait (seconds).
BUDGET = 0.0005
#: Past this many bytes waiting over all the bodies of a loop, parse without a budget.
LIMIT = 16 << 20


class Waiting(Protocol):
    def hand_on(self) -> bool:
        """Hand on up to SLICE bytes; True if more are left for a later turn."""


class Pump:
    """The bodies of one loop that have bytes waiting, served in turn."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._line: collections.deque[Waiting] = collections.deque()
        self._handle: asyncio.Handle | None = None
        #: Bytes waiting over all the bodies (each body keeps it up to date).
        self.queued = 0

    def join(self, body: Waiting) -> None:
        """``body`` has bytes left: it gets turns until it has none."""
        self._line.append(body)
        if self._handle is None:
            self._handle = self._loop.call_soon(self._turn)

    def _turn(self) -> None:
        self._handle = None
        line, clock = self._line, time.perf_counter
        deadline = clock() + BUDGET
        while line:  # at least one slice a turn, whatever the budget
            body = line.popleft()
            if body.hand_on():
                line.append(body)
            if clock() >= deadline and self.queued <= LIMIT:
                break
        if line:
            self._handle = self._loop.call_soon(self._turn)


_pumps: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Pump] = weakref.WeakKeyDictionary()


def pump(loop: asyncio.AbstractEventLoop) -> Pump:
    """The pump of ``loop`` (made on first use)."""
    found = _pumps.get(loop)
    if found is None:
        found = _pumps[loop] = Pump(loop)
    return found
