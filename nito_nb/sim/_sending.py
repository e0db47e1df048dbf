"""Writing a paced body on the event loop: the schedule's waits, batched writes, the simulated
connection drop, and the shutdown that ends the streams in progress at once."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

# Bytes are written in batches of about this size when the schedule lets them pile up (no
# pacing): one ASGI message per chunk would make the server the bottleneck of client benchmarks.
BATCH_BYTES = 64 * 1024
# Waits shorter than this are not worth a sleep (the event loop's timer is not that precise);
# the schedule is absolute, so the time is caught up on the next token.
MIN_SLEEP_S = 0.0005


class SimulatedDrop(Exception):
    """Raised inside a response body to cut the connection mid-stream (sim/drop)."""


class _HideSimulatedDrops(logging.Filter):
    # uvicorn logs every exception that escapes the app, with a traceback; a drop that the
    # simulator does on purpose is not news.
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, SimulatedDrop)


class Shutdown:
    """Tells the streams in progress that the server is stopping, so that they end at once.

    Without it a stalled stream (sim/stall sleeps a minute) would hold uvicorn's graceful
    shutdown until its timeout, and uvicorn would log the cancelled task as an error.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        # The futures of the sleeps in progress: the shutdown wakes them all at once.
        self._sleepers: set[asyncio.Future[bool]] = set()

    @property
    def stopping(self) -> bool:
        return self._stopping

    def trigger(self) -> None:
        """Safe to call from any thread."""
        # The flag first: a stream that has not slept yet (so the loop is not known here) sees
        # it at its first sleep. sleep() binds the loop before it reads the flag.
        self._stopping = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._stop)

    def _stop(self) -> None:
        for sleeper in self._sleepers:
            if not sleeper.done():
                sleeper.set_result(True)
        self._sleepers.clear()

    async def sleep(self, seconds: float) -> None:
        """Sleep, or raise SimulatedDrop as soon as the server stops."""
        # One future and one timer per sleep, as asyncio.sleep itself does. Not
        # wait_for(event.wait(), seconds): its extra task and cancel-and-wait were about a
        # sixth of the simulator's CPU under 500 paced streams (one sleep per chunk).
        loop = self._loop
        if loop is None:
            # Bound on first use, inside the server's event loop (the app is built outside it).
            loop = self._loop = asyncio.get_running_loop()
        if self._stopping:
            raise SimulatedDrop("the simulator is shutting down")
        sleeper: asyncio.Future[bool] = loop.create_future()
        timer = loop.call_later(seconds, _wake, sleeper)
        self._sleepers.add(sleeper)
        try:
            stopping = await sleeper
        finally:
            timer.cancel()
            self._sleepers.discard(sleeper)
        if stopping:
            raise SimulatedDrop("the simulator is shutting down")

    async def wait(self, event: asyncio.Future[Any], seconds: float) -> None:
        """Until `event` is done or `seconds` have passed, whichever comes first; SimulatedDrop
        as soon as the server stops (a request waiting in a capacity's queue)."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        if self._stopping:
            raise SimulatedDrop("the simulator is shutting down")
        sleeper: asyncio.Future[bool] = loop.create_future()
        timer = loop.call_later(seconds, _wake, sleeper)

        def done(_: asyncio.Future[Any]) -> None:
            _wake(sleeper)

        event.add_done_callback(done)
        self._sleepers.add(sleeper)
        try:
            stopping = await sleeper
        finally:
            timer.cancel()
            event.remove_done_callback(done)
            self._sleepers.discard(sleeper)
        if stopping:
            raise SimulatedDrop("the simulator is shutting down")


def _wake(sleeper: asyncio.Future[bool]) -> None:
    if not sleeper.done():  # not cancelled, not woken by the shutdown
        sleeper.set_result(False)


def install_log_filter() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _HideSimulatedDrops) for f in logger.filters):
        logger.addFilter(_HideSimulatedDrops())


#: The extra field of a stamped chunk (`"sim": {"stamp": true}`).
STAMP_FIELD = b"sim_sent_ns"


def stamped(data: bytes) -> bytes:
    """`data` with `"sim_sent_ns": now` first in every JSON object event: the moment the bytes
    leave for the socket (uvicorn writes them to the transport in the same turn of the loop)."""
    field = b'{"' + STAMP_FIELD + b'":' + str(time.perf_counter_ns()).encode() + b","
    if data.startswith(b"data: {"):
        data = b"data: " + field + data[7:]
    return data.replace(b"\n\ndata: {", b"\n\ndata: " + field)


async def stamped_body(
    pieces: Iterable[tuple[float, bytes | None]], shutdown: Shutdown
) -> AsyncIterator[bytes]:
    """The paced body, one write per piece, each stamped as it is written (no batching: a
    batched piece would carry the time it was built, not the time it was sent)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    for due, data in pieces:
        wait = start + due - loop.time()
        if wait > MIN_SLEEP_S:
            await shutdown.sleep(wait)
        if data is None:
            await asyncio.sleep(0.01)
            raise SimulatedDrop("simulated connection drop")
        yield stamped(data)


async def paced_body(
    pieces: Iterable[tuple[float, bytes | None]], shutdown: Shutdown
) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    start = loop.time()
    buffer = bytearray()
    for due, data in pieces:
        wait = start + due - loop.time()
        if wait > MIN_SLEEP_S:
            if buffer:
                yield bytes(buffer)
                buffer.clear()
            await shutdown.sleep(wait)
        if data is None:
            if buffer:
                yield bytes(buffer)
            # Let the bytes already written leave before the connection is cut.
            await asyncio.sleep(0.01)
            raise SimulatedDrop("simulated connection drop")
        buffer += data
        if len(buffer) >= BATCH_BYTES:
            yield bytes(buffer)
            buffer.clear()
            # Give the other streams a turn: writing to a socket that is not full never waits.
            await asyncio.sleep(0)
    if buffer:
        yield bytes(buffer)
