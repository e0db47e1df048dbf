"""A network layer for httpx that stamps each socket read the moment its bytes arrived.

httpx hands a body's bytes to its caller only when the task that iterates the body runs again:
on an event loop busy with hundreds of streams, that is long after the bytes came (the load
benchmark measured medians of 220 ms at 500 streams × 20 chunks/s). The rule of this project is
that a timing is the moment bytes reached the process, so for load runs the socket itself is
read here, by a callback of the event loop (``loop.add_reader``), and every read carries its own
time:

- on Linux, the kernel's receive time of the read's last packet (``SO_TIMESTAMPNS``: the
  realtime clock, mapped onto ``time.perf_counter_ns`` at the read), which no lateness of the
  loop changes;
- elsewhere, ``perf_counter_ns()`` in the read callback (as late as the loop's selector is).

A read that takes several packets at once (the loop was later than the gap between two chunks of
one stream) carries the time of the last one: an upper bound for the earlier ones. It cannot be
split: the kernel merges packets that wait in a socket's queue and keeps the newest time (peeking
up to each event's end was tried, and gave every event the same time).

``StampingBackend`` is an httpcore network backend (plain TCP, TLS through ``ssl.MemoryBIO``);
``arrival_clock(response)`` returns the function that gives the stamp of the read that carried
the bytes httpx just yielded (``response.extensions["network_stream"]``), or
``time.perf_counter_ns`` for any other transport. ``AsyncClient`` (``nito_nb.astream``, load runs
and their worker processes) uses it for the httpx client it makes for each stream, unless the
environment sets a proxy (a transport given to httpx turns off its proxy settings). An httpx client
of the user's keeps its own transport. The sync ``Client`` does not need it: its reader thread
does nothing but read, and stamps each read as the blocking call returns.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import socket
import ssl
import struct
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import httpcore
import httpx

__all__ = ["StampingBackend", "StampingTransport", "arrival_clock", "stamping_transport"]

#: Linux's SO_TIMESTAMPNS / SCM_TIMESTAMPNS (asm-generic/socket.h); the socket module lacks them.
_SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("qq")
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
#: Bytes one socket read takes at most (httpcore asks for 64 KiB).
READ_SIZE = 64 * 1024
#: Reading from the socket pauses while this many bytes wait for httpx (a consumer that stopped).
HIGH_WATER = 4 * 1024 * 1024


def _kernel_stamps(sock: socket.socket) -> bool:
    """Ask the kernel to time-stamp every received packet (Linux); False where it cannot."""
    if not sys.platform.startswith("linux") or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


class StampedSocketStream(httpcore.AsyncNetworkStream):
    """A connected non-blocking socket, read by the loop's reader callback into stamped pieces."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        self._sock = sock
        self._loop = loop
        self._fd = sock.fileno()
        self._kernel = _kernel_stamps(sock)
        self._pieces: collections.deque[tuple[bytes, int]] = collections.deque()
        self._buffered = 0
        self._eof = False
        self._error: OSError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._reading = False
        self._closed = False
        #: The arrival time (perf_counter ns) of the read that the last ``read()`` returned.
        self.arrival_ns = time.perf_counter_ns()
        self._resume()

    # -- the loop's side: read what arrived, with its time -----------------------------------

    def _resume(self) -> None:
        if not self._reading and not self._closed and not self._eof and self._error is None:
            self._loop.add_reader(self._fd, self._on_readable)
            self._reading = True

    def _pause(self) -> None:
        if self._reading:
            self._loop.remove_reader(self._fd)
            self._reading = False

    def _on_readable(self) -> None:
        try:
            if self._kernel:
                data, ancillary, _, _ = self._sock.recvmsg(READ_SIZE, _ANCILLARY)
            else:
                data, ancillary = self._sock.recv(READ_SIZE), []
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._error = exc
            self._pause()
            self._wake()
            return
        now = time.perf_counter_ns()
        if ancillary:  # realtime -> perf_counter: the realtime read between two perf_counter reads
            realtime = time.clock_gettime_ns(time.CLOCK_REALTIME)
            offset = (now + time.perf_counter_ns()) // 2 - realtime
        if not data:
            self._eof = True
            self._pause()
        else:
            stamp = now
            for level, kind, value in ancillary:
                if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(value) >= _TIMESPEC.size:
                    seconds, nanoseconds = _TIMESPEC.unpack_from(value)
                    if seconds <= 0:  # not stamped
                        continue
                    # A step of the realtime clock between the packet and this read is the only
                    # error (besides a microsecond of mapping); the stamp never passes the read.
                    kernel = seconds * 1_000_000_000 + nanoseconds + offset
                    if kernel < now:
                        stamp = kernel
            self._pieces.append((data, stamp))
            self._buffered += len(data)
            if self._buffered > HIGH_WATER:
                self._pause()
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- httpcore's side ------------------------------------------------------------------------

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        while not self._pieces:
            if self._error is not None:
                raise httpcore.ReadError(str(self._error))
            if self._eof or self._closed:
                return b""
            waiter = self._waiter = self._loop.create_future()
            timer = None if timeout is None else self._loop.call_later(timeout, _time_out, waiter)
            try:
                await waiter
            finally:
                if timer is not None:
                    timer.cancel()
        data, stamp = self._pieces.popleft()
        if len(data) > max_bytes:  # the rest stays first, with the same time
            self._pieces.appendleft((data[max_bytes:], stamp))
            data = data[:max_bytes]
        self._buffered -= len(data)
        if self._buffered <= HIGH_WATER // 2:
            self._resume()
        self.arrival_ns = stamp
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            await asyncio.wait_for(self._loop.sock_sendall(self._sock, buffer), timeout)
        except asyncio.TimeoutError:
            raise httpcore.WriteTimeout("writing the request timed out") from None
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from exc

    async def aclose(self) -> None:
        if not self._closed:
            self._pause()
            self._closed = True
            self._wake()
            self._sock.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        tls = StampedTLSStream(self, ssl_context, server_hostname)
        try:
            await asyncio.wait_for(tls.handshake(), timeout)
        except asyncio.TimeoutError:
            await self.aclose()
            raise httpcore.ConnectTimeout("the TLS handshake timed out") from None
        except (ssl.SSLError, OSError, httpcore.ReadError, httpcore.WriteError) as exc:
            await self.aclose()
            raise httpcore.ConnectError(str(exc)) from exc
        return tls

    def get_extra_info(self, info: str) -> Any:
        if info == "socket":
            return self._sock
        if info in ("client_addr", "server_addr"):
            try:
                return self._sock.getsockname() if info == "client_addr" else self._sock.getpeername()
            except OSError:  # closed
                return None
        if info == "is_readable":  # an idle pooled connection that the server closed, or talked on
            return bool(self._pieces) or self._eof or self._error is not None
        return None


def _time_out(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(httpcore.ReadTimeout("no data within the read timeout"))


class StampedTLSStream(httpcore.AsyncNetworkStream):
    """TLS over a :class:`StampedSocketStream` (``ssl.MemoryBIO``): decrypted bytes carry the
    arrival time of the raw read that completed them."""

    def __init__(self, raw: StampedSocketStream, context: ssl.SSLContext, server_hostname: str | None) -> None:
        self._raw = raw
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=server_hostname)
        self.arrival_ns = raw.arrival_ns

    async def _flush(self, timeout: float | None = None) -> None:
        data = self._outgoing.read()
        if data:
            await self._raw.write(data, timeout)

    async def _fill(self, timeout: float | None = None) -> None:
        data = await self._raw.read(READ_SIZE, timeout)
        if data:
            self._incoming.write(data)
            self.arrival_ns = self._raw.arrival_ns
        else:
            self._incoming.write_eof()

    async def handshake(self) -> None:
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                await self._fill()
        await self._flush()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        while True:
            try:
                return self._tls.read(max_bytes)
            except ssl.SSLWantReadError:
                await self._flush(timeout)
                await self._fill(timeout)
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""
            except ssl.SSLError as exc:
                raise httpcore.ReadError(str(exc)) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        view = memoryview(buffer)
        while view:
            try:
                written = self._tls.write(view)
            except ssl.SSLWantReadError:  # renegotiation: rare
                await self._flush(timeout)
                await self._fill(timeout)
                continue
            view = view[written:]
            await self._flush(timeout)

    async def aclose(self) -> None:
        try:
            self._tls.unwrap()
            await self._flush()
        except (ssl.SSLError, OSError, httpcore.NetworkError, asyncio.TimeoutError):
            pass
        await self._raw.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("TLS inside TLS (an HTTPS proxy to an HTTPS server) is not supported here")

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._tls
        if info == "is_readable":
            return self._incoming.pending > 0 or self._raw.get_extra_info("is_readable")
        return self._raw.get_extra_info(info)


class StampingBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend for asyncio, with :class:`StampedSocketStream` connections."""

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout)
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
                await asyncio.wait_for(loop.sock_connect(sock, address), timeout)
            except asyncio.TimeoutError:
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

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            for option in socket_options or ():
                sock.setsockopt(*option)
            await asyncio.wait_for(loop.sock_connect(sock, path), timeout)
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


def stamping_transport(verify: ssl.SSLContext) -> StampingTransport | None:
    """The stamping transport, or None when the environment sets a proxy (a transport given to
    httpx turns off its proxy settings) or on Windows (its Proactor loop cannot watch a socket):
    httpx's own then serves, stamped as the body is read."""
    if any(name in ("http", "https", "all") for name in urllib.request.getproxies()):
        return None
    if sys.platform == "win32":  # asyncio's default loop there (Proactor) has no add_reader
        return None
    return StampingTransport(verify=verify)
