"""The stamping transport for httpx: an httpcore network backend over stamped sockets, one
connection per request, and what the client asks of a response (its arrival clock)."""

from __future__ import annotations

import asyncio
import errno
import functools
import socket
import ssl
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import httpcore
import httpx

from .streams import StampedSocketStream, StampedTLSStream, within

__all__ = ["StampingBackend", "StampingTransport", "arrival_clock", "stamping_allowed"]


@functools.lru_cache(maxsize=64)
def _numeric_address(host: str, port: int) -> tuple[Any, ...] | None:
    """The address of a host written as an IP address, found without a resolver; None for a name.
    asyncio's ``getaddrinfo`` always hands the call to a thread, even for ``127.0.0.1``: a thread
    wake-up and a GIL hand-over on every connection of a load run. Kept (a numeric host's address
    never changes, and a name's None neither): the call took 7 µs, every request of a run."""
    try:
        return tuple(
            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
        )
    except (socket.gaierror, UnicodeError):
        return None


async def _connect(
    loop: asyncio.AbstractEventLoop, sock: socket.socket, address: Any, timeout: float | None
) -> None:
    """``loop.sock_connect(sock, address)`` within ``timeout`` seconds (``TimeoutError`` after),
    with asyncio's errors and words, without ``asyncio.timeout`` around it: that took 10-14 µs
    of each request's fixed work in a run, for a connection that opens at the loop's next turn.
    One timer on the loop's heap instead, cancelled with the wait."""
    try:
        sock.connect(address)
        return
    except (BlockingIOError, InterruptedError):
        pass
    # On loopback (and to a near host) the handshake is done by now: a second connect says so (0,
    # or EISCONN), without polling the socket for it, a turn of the loop and two epoll calls;
    # EALREADY: still under way.
    error = sock.connect_ex(address)
    if error in (0, errno.EISCONN):
        return
    if error not in (errno.EALREADY, errno.EINPROGRESS, errno.EINTR):
        raise OSError(error, f"Connect call failed {address}")  # asyncio's words (below)
    fd = sock.fileno()
    connected = loop.create_future()
    loop.add_writer(fd, _settle, connected, None)
    timer = None if timeout is None else loop.call_later(timeout, _settle, connected, TimeoutError)
    try:
        await connected
    finally:
        loop.remove_writer(fd)
        if timer is not None:
            timer.cancel()
    error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if error:  # asyncio's words (selector_events.py)
        raise OSError(error, f"Connect call failed {address}")


def _settle(future: asyncio.Future[None], error: type[BaseException] | None) -> None:
    if not future.done():
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error())


class StampingBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend for asyncio, with :class:`StampedSocketStream` connections."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        infos: tuple[Any, ...] | None = _numeric_address(host, port)
        if infos is None:
            try:
                infos = tuple(
                    await within(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout)
                )
            except asyncio.TimeoutError:
                raise httpcore.ConnectTimeout(f"resolving {host} timed out") from None
            except OSError as exc:
                raise httpcore.ConnectError(str(exc)) from exc
        error: Exception = httpcore.ConnectError(f"no address for {host}")
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as asyncio does
                for option in socket_options or ():
                    sock.setsockopt(*option)
                if local_address is not None:
                    sock.bind((local_address, 0))
                await _connect(loop, sock, address, timeout)
            except (asyncio.TimeoutError, TimeoutError):
                sock.close()
                error = httpcore.ConnectTimeout(f"connecting to {host}:{port} timed out")
                continue
            except OSError as exc:
                sock.close()
                error = httpcore.ConnectError(str(exc))
                continue
            except BaseException:
                sock.close()
                raise
            return StampedSocketStream(sock, loop)
        raise error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            for option in socket_options or ():
                sock.setsockopt(*option)
            await within(loop.sock_connect(sock, path), timeout)
        except asyncio.TimeoutError:
            sock.close()
            raise httpcore.ConnectTimeout(f"connecting to {path} timed out") from None
        except OSError as exc:
            sock.close()
            raise httpcore.ConnectError(str(exc)) from exc
        return StampedSocketStream(sock, loop)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _ConnectionPerRequest:
    """In place of httpcore's pool: every request on a connection of its own, closed with its
    response (as one httpx client per stream did). httpcore's pool scans all its connections on
    every request and every close, which at 500 concurrent streams cost more than the streams."""

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        self._ssl_context = ssl_context
        self._backend = StampingBackend()
        self._open: set[httpcore.AsyncHTTPConnection] = set()

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        connection = httpcore.AsyncHTTPConnection(
            origin=request.url.origin, ssl_context=self._ssl_context, network_backend=self._backend
        )
        self._open.add(connection)
        try:
            response = await connection.handle_async_request(request)
        except BaseException:
            await self._close(connection)
            raise
        return httpcore.Response(
            status=response.status,
            headers=response.headers,
            content=_ClosingBody(response, functools.partial(self._close, connection)),
            extensions=response.extensions,
        )

    async def _close(self, connection: httpcore.AsyncHTTPConnection) -> None:
        self._open.discard(connection)
        await connection.aclose()

    async def aclose(self) -> None:
        for connection in list(self._open):
            await self._close(connection)


class _ClosingBody:
    """A response body that closes its connection when it is closed."""

    def __init__(self, response: httpcore.Response, close: Callable[[], Awaitable[None]]) -> None:
        self._body: Any = response.stream
        self._close = close

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._body.__aiter__()  # no layer of our own per read

    async def aclose(self) -> None:
        try:
            if hasattr(self._body, "aclose"):
                await self._body.aclose()
        finally:
            await self._close()


class StampingTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (HTTP/1.1, its error mapping), with the stamping backend and one
    connection per request."""

    def __init__(self, *, verify: ssl.SSLContext) -> None:
        super().__init__(verify=verify)
        # httpx builds its pool with httpcore's default backend and has no parameter for another;
        # its handle_async_request only calls the pool's (tests/test_transport.py fails if httpx
        # changes this).
        self._pool = _ConnectionPerRequest(verify)  # type: ignore[assignment]


def arrival_clock(response: httpx.Response) -> Callable[[], int]:
    """The arrival time (perf_counter ns) of the bytes ``response`` yielded last: its stamping
    network stream's, else the time of the call (any other transport)."""
    network_stream = response.extensions.get("network_stream")
    if isinstance(network_stream, (StampedSocketStream, StampedTLSStream)):
        return lambda: network_stream.arrival_ns
    return time.perf_counter_ns


def stamping_allowed() -> bool:
    """False when the environment sets a proxy (a transport given to httpx turns off its proxy
    settings) or on Windows (its Proactor loop cannot watch a socket): httpx's own transport then
    serves, stamped as the body is read. Reading the environment's proxies walks all of it (a
    fifth of a millisecond, a tenth of a small request's CPU in a load run): a client asks once,
    when it is made, as httpx reads them once per client."""
    if any(name in ("http", "https", "all") for name in urllib.request.getproxies()):
        return False
    return sys.platform != "win32"  # asyncio's default loop there (Proactor) has no add_reader
