"""A response body read by its socket's own callback, read by read, framing removed (``framing.py``
says why: httpx's body layers were the client's largest cost in a load run)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

import httpx

from .framing import Chunked, FramingError, Length, UntilClose, body_framing
from .streams import StampedSocketStream, StampedTLSStream, _put_back

__all__ = ["BACKLOG_LIMIT", "SLICE", "PushedBody", "pushed_body"]

#: The stream is handed at most this many bytes of a body per turn of the event loop; the rest
#: waits, in order and with its arrival time, for the next turns. Parsing is most of a load run's
#: client work (25 µs a chunk in a run), and a due send, a timer, runs only once the callbacks of
#: its turn are done: a 16 KiB read parsed at once held the loop 0.5-1 ms, two or three of them in
#: one turn longer. Handing a read on in pieces changes nothing in the Stream: its events are the
#: same, with the same time, as the parser reads across any split (tests/test_sse.py).
SLICE = 4096
#: Past this many bytes waiting in one body (a loop that cannot keep up), all of them are handed
#: on at once: memory stays bounded, and the loop parses instead of reading more.
BACKLOG_LIMIT = 1 << 20
_PENDING = object()  # the body's end not reached yet (None: ended well; else the error to raise)


class PushedBody:
    """A response body read by its socket's reader callback and handed on read by read, framing
    removed, without a task switch in between: ``await body(deliver)`` calls ``deliver(data,
    arrival_ns)`` for every read that carried some of the body, returns at its end, and raises
    what httpx would (``ReadTimeout`` past ``read_timeout`` without a byte, ``ReadError``,
    ``RemoteProtocolError`` for a body cut short). An exception of ``deliver`` ends the read and
    is raised as it is. Why: ``framing.py``."""

    def __init__(self, network: StampedSocketStream | StampedTLSStream, framing: Chunked | Length | UntilClose,
                 read_timeout: float | None) -> None:
        self._network = network
        self._framing = framing
        self._timeout = read_timeout
        self._deliver: Callable[[bytes, int], None] | None = None
        self._ended: asyncio.Future[None] | None = None
        self._last = 0.0
        self._watchdog: asyncio.TimerHandle | None = None
        # What has arrived and waits for its turn (SLICE), and how the body ends once it is
        # handed on: a read, the connection's end or its failure all queue behind it.
        self._backlog: collections.deque[tuple[bytes, int]] = collections.deque()
        self._queued = 0
        self._outcome: object = _PENDING
        self._turn: asyncio.Handle | None = None

    async def __call__(self, deliver: Callable[[bytes, int], None]) -> None:
        loop = asyncio.get_running_loop()
        self._deliver, self._ended, self._last = deliver, loop.create_future(), loop.time()
        if self._timeout is not None:
            self._watchdog = loop.call_later(self._timeout, self._check)
        try:
            if self._framing.done:  # an empty body
                self._ended.set_result(None)
            else:
                self._network.push(self)
            await self._ended
        finally:
            if self._watchdog is not None:
                self._watchdog.cancel()
            if self._turn is not None:
                self._turn.cancel()
            # No cycle outlives the body (the stream's receiver is this object, whose deliver
            # holds the Stream's state): see StampedSocketStream.unpush.
            self._network.unpush()
            self._deliver = self._watchdog = self._turn = None
            self._backlog.clear()

    def received(self, data: bytes, arrival_ns: int) -> None:
        ended = self._ended
        if ended is None or ended.done() or self._outcome is not _PENDING:  # past the body's end
            return
        self._last = ended.get_loop().time()
        try:
            if data:
                body = self._framing.feed(data)
                if body:
                    self._backlog.append((body, arrival_ns))
                    self._queued += len(body)
                if self._framing.done:
                    self._outcome = None
            else:
                self._framing.end()
                self._outcome = None
        except FramingError as exc:
            self._outcome = httpx.RemoteProtocolError(str(exc))
        if self._turn is None or self._queued > BACKLOG_LIMIT:
            self._hand_on()

    def failed(self, error: OSError) -> None:
        if self._ended is not None and not self._ended.done() and self._outcome is _PENDING:
            self._outcome = httpx.ReadError(str(error))
            if self._turn is None:
                self._hand_on()

    def _hand_on(self) -> None:
        """Hand the stream the backlog's next SLICE bytes (all of it past BACKLOG_LIMIT); the rest
        at the loop's next turn; then end the body as it ended."""
        if self._turn is not None:
            self._turn.cancel()
        self._turn = None
        ended = self._ended
        if ended is None or ended.done() or self._deliver is None:
            return
        budget = SLICE if self._queued <= BACKLOG_LIMIT else self._queued
        try:
            while self._backlog and budget > 0:
                body, arrival_ns = self._backlog.popleft()
                body = _put_back(self._backlog, body, budget, arrival_ns)
                budget -= len(body)
                self._queued -= len(body)
                self._deliver(body, arrival_ns)
        except Exception as exc:  # the consumer's (an event too large): raised where the body is awaited
            self._backlog.clear()
            ended.set_exception(exc)
            return
        if self._backlog:
            self._turn = ended.get_loop().call_soon(self._hand_on)
        elif self._outcome is None:
            ended.set_result(None)
        elif isinstance(self._outcome, BaseException):
            ended.set_exception(self._outcome)

    def _check(self) -> None:
        """The between-chunks timeout: one timer, moved on only when it fires (re-arming a timer
        on every read would cost more than the read)."""
        ended = self._ended
        if ended is None or ended.done() or self._timeout is None:
            return
        loop = ended.get_loop()
        idle = loop.time() - self._last
        if idle >= self._timeout:
            ended.set_exception(httpx.ReadTimeout("no data within the between-chunks timeout"))
        else:
            self._watchdog = loop.call_later(self._timeout - idle, self._check)


def pushed_body(response: httpx.Response, read_timeout: float | None) -> PushedBody | None:
    """The body of ``response`` as a :class:`PushedBody` when the stamping transport carried it and
    its framing is one ``framing.py`` reads; None otherwise (another transport, a content coding
    httpx must decode, a transfer coding other than chunked): then httpx reads it."""
    network = response.extensions.get("network_stream")
    if not isinstance(network, (StampedSocketStream, StampedTLSStream)):
        return None
    if response.headers.get("content-encoding", "identity").strip().lower() not in ("", "identity"):
        return None
    framing = body_framing(response.headers.get("transfer-encoding"), response.headers.get("content-length"))
    return None if framing is None else PushedBody(network, framing, read_timeout)
