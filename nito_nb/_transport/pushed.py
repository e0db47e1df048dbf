"""A response body read by its socket's own callback, read by read, framing removed (``framing.py``
says why: httpx's body layers were the client's largest cost in a load run)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

from .framing import Chunked, FramingError, Length, UntilClose, body_framing
from .streams import StampedSocketStream, StampedTLSStream

__all__ = ["PushedBody", "pushed_body"]


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
            # No cycle outlives the body (the stream's receiver is this object, whose deliver
            # holds the Stream's state): see StampedSocketStream.unpush.
            self._network.unpush()
            self._deliver = self._watchdog = None

    def received(self, data: bytes, arrival_ns: int) -> None:
        ended = self._ended
        if ended is None or ended.done():  # past the body's end: nothing more is read
            return
        self._last = ended.get_loop().time()
        try:
            if data:
                body = self._framing.feed(data)
                if body:
                    self._deliver(body, arrival_ns)  # type: ignore[misc]
                if self._framing.done:
                    ended.set_result(None)
            else:
                self._framing.end()
                ended.set_result(None)
        except FramingError as exc:
            ended.set_exception(httpx.RemoteProtocolError(str(exc)))
        except Exception as exc:  # the consumer's (an event too large): raised where the body is awaited
            ended.set_exception(exc)

    def failed(self, error: OSError) -> None:
        if self._ended is not None and not self._ended.done():
            self._ended.set_exception(httpx.ReadError(str(error)))

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
