"""Who may send now: the run's slots under its shared backoff, handed to waiters in order.

Every attempt of a run, on any engine, waits here first (``acquire``): for the backoff's pause
after a 429 to end (``backoff.py``), then for a free slot under the backoff's limit (the run's
``concurrency``, halved by a 429, given back one slot per success). ``release`` gives the slot
back; ``succeeded`` tells the backoff that a request got through. Used on the run's loop
thread only (``dispatch.py``), so it needs no lock.
"""

from __future__ import annotations

import asyncio
import collections

from .backoff import Backoff

__all__ = ["Gate"]


class Gate:
    """The slots of one run. Waiters are served in order, one per freed slot (``_hand_over``):
    an Event that woke every waiter on every release cost 409,063 wake-ups for 1,000 requests
    behind a limit of 64 (bench/bench_load.py's maximum rate)."""

    def __init__(self, backoff: Backoff) -> None:
        self.backoff = backoff
        #: Slots taken now (attempts being sent or streaming).
        self.sending = 0
        #: Attempts waiting for a slot, first come first served.
        self.waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    async def acquire(self) -> None:
        """Wait for the backoff's pause to end and for a free slot under its limit; take it."""
        loop = asyncio.get_running_loop()
        while True:
            pause = self.backoff.wait(loop.time())
            if pause > 0:
                await asyncio.sleep(pause)
                continue
            if self.sending < self.backoff.limit and not self.waiting:
                self.sending += 1
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self.waiting.append(waiter)
            try:
                await waiter  # a slot was handed over to this waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():  # handed over as it was cancelled
                    self.release()
                raise
            if self.backoff.wait(loop.time()) <= 0:
                return
            self.release()  # a pause began meanwhile: wait it out, then in line again

    def release(self) -> None:
        """An attempt ended (or gave up its slot): the slot goes to the next waiter."""
        self.sending -= 1
        self._hand_over()

    def succeeded(self) -> None:
        """A request ended done: the backoff's limit may rise, and a waiter get the new slot."""
        self.backoff.succeeded()
        self._hand_over()

    def _hand_over(self) -> None:
        """The free slots go to the waiters, in order (one cancelled meanwhile is skipped)."""
        while self.waiting and self.sending < self.backoff.limit:
            waiter = self.waiting.popleft()
            if not waiter.done():
                self.sending += 1
                waiter.set_result(None)
