"""A response body read by its socket's own callback, read by read, framing removed (``framing.py``
says why: httpx's body layers were the client's largest cost in a load run)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

import httpx

from .framing import Chunked, FramingError, Length, UntilClose, body_framing
from .pump import SLICE, Pump, pump
from .streams import StampedSocketStream, StampedTLSStream, _put_back

__all__ = ["PushedBody", "pushed_body"]

_PENDING = object()  # the body's end not reached yet (None: ended well; else the error to raise)


class PushedBody:
    """A response body read by its socket's reader callback and handed on read by read, framing
    removed, without a task switch in between (a large read over several turns of the loop:
    ``pump.py``): ``await body(deliver)`` calls ``deliver(data,
    arrival_ns)`` for every read that carried some of the body (its bytes as they came: a content
    coding is the Stream's to decode), returns at its end, and raises what httpx would
    (``ReadError``, ``RemoteProtocolError`` for a body cut short). An exception of ``deliver`` ends
    the read and is raised as it is. Why: ``framing.py``. No timeout of its own: the call's
    deadlines are the AsyncStream's to keep (``_stream.py``), counted in events, not bytes."""

    def __init__(
        self,
        network: StampedSocketStream | StampedTLSStream,
        framing: Chunked | Length | UntilClose,
    ) -> None:
        self._network = network
        self._framing = framing
        self._deliver: Callable[[bytes, int], None] | None = None
        self._ended: asyncio.Future[None] | None = None
        # What has arrived and waits for its turn (pump.py), and how the body ends once it is
        # handed on: a read, the connection's end or its failure all queue behind it.
        self._backlog: collections.deque[tuple[bytes, int]] = collections.deque()
        self._queued = 0
        self._outcome: object = _PENDING
        # made where it is awaited, on that loop
        self._pump: Pump = pump(asyncio.get_running_loop())
        self._in_line = False  # in the pump's line: its next bytes wait for their turn

    async def __call__(self, deliver: Callable[[bytes, int], None]) -> None:
        self._deliver, self._ended = deliver, asyncio.get_running_loop().create_future()
        try:
            if self._framing.done:  # an empty body
                self._ended.set_result(None)
            else:
                self._network.push(self)
            await self._ended
        # stopped (cancelled): what arrived and waits for its turn is kept (an error ends a body
        # only once nothing waits)
        except BaseException:
            self._hand_on_all()
            raise
        finally:
            # No cycle outlives the body (the stream's receiver is this object, whose deliver
            # holds the Stream's state): see StampedSocketStream.unpush. The pump lets go of it at
            # its next turn.
            self._network.unpush()
            self._deliver = None
            self._drop_backlog()

    @property
    def waiting(self) -> bool:
        """Bytes have arrived and wait for their turn to be handed on (``pump.py``), or in the
        socket for a loop that was busy: a deadline counted in events waits for them (they may
        hold the event that keeps the body within it)."""
        return bool(self._backlog) or self._network.unread()

    def received(self, data: bytes, arrival_ns: int) -> None:
        ended = self._ended
        if ended is None or ended.done() or self._outcome is not _PENDING:  # past the body's end
            return
        try:
            if data:
                body = self._framing.feed(data)
                if body:
                    self._backlog.append((body, arrival_ns))
                    self._queued += len(body)
                    self._pump.queued += len(body)
                if self._framing.done:
                    self._outcome = None
            else:
                self._framing.end()
                self._outcome = None
        except FramingError as exc:
            self._outcome = httpx.RemoteProtocolError(str(exc))
        self._go_on()

    def failed(self, error: OSError) -> None:
        if self._ended is not None and not self._ended.done() and self._outcome is _PENDING:
            self._outcome = httpx.ReadError(str(error))
            self._go_on()

    def _go_on(self) -> None:
        """Hand on a first slice now, unless earlier bytes wait for their turn; the rest joins the
        pump's line."""
        if not self._in_line and self.hand_on():
            self._in_line = True
            self._pump.join(self)

    def hand_on(self) -> bool:
        """Hand the stream the backlog's next SLICE bytes, in order; at the backlog's end, end the
        body as it ended. True if bytes are left for a later turn (pump.py)."""
        ended = self._ended
        if ended is None or ended.done() or self._deliver is None:
            # Over (what waits is the stopping body's to hand on: __call__), or let go of.
            self._in_line = False
            return False
        try:
            self._hand_on_up_to(SLICE)
        # the consumer's (an event too large): raised where the body is awaited
        except Exception as exc:
            self._drop_backlog()
            ended.set_exception(exc)
            return False
        if self._backlog:
            return True
        self._in_line = False
        if self._outcome is None:
            ended.set_result(None)
        elif isinstance(self._outcome, BaseException):
            ended.set_exception(self._outcome)
        return False

    def _hand_on_all(self) -> None:
        """Hand on everything waiting at once, as the body is being stopped."""
        if self._deliver is not None:
            try:
                self._hand_on_up_to(self._queued)
            except Exception:  # the stream takes no more (an event too large): the rest goes
                pass

    def _hand_on_up_to(self, budget: int) -> None:
        """Hand the stream up to ``budget`` bytes of the backlog, in order, each with its arrival
        time (an exception of the stream's goes through)."""
        deliver = self._deliver
        assert deliver is not None
        while self._backlog and budget > 0:
            body, arrival_ns = self._backlog.popleft()
            body = _put_back(self._backlog, body, budget, arrival_ns)
            budget -= len(body)
            self._queued -= len(body)
            self._pump.queued -= len(body)
            deliver(body, arrival_ns)

    def _drop_backlog(self) -> None:
        self._pump.queued -= self._queued
        self._backlog.clear()
        self._queued = 0
        self._in_line = False


def pushed_body(response: httpx.Response) -> PushedBody | None:
    """The body of ``response`` as a :class:`PushedBody` when the stamping transport carried it and
    its framing is one ``framing.py`` reads; None otherwise (another transport, a transfer coding
    other than chunked): then httpx reads it. Its bytes are handed on as they came, content
    coding included (the Stream decodes it: ``_core/encoding.py``)."""
    network = response.extensions.get("network_stream")
    if not isinstance(network, (StampedSocketStream, StampedTLSStream)):
        return None
    framing = body_framing(
        response.headers.get("transfer-encoding"), response.headers.get("content-length")
    )
    return None if framing is None else PushedBody(network, framing)
