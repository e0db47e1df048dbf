"""The network streams: a connected socket read by the event loop's reader callback, each read
stamped with the moment its bytes arrived (the package's docstring says why and how), and TLS
over it."""

from __future__ import annotations

import asyncio
import collections
import select
import socket
import ssl
import struct
import sys
import time
from typing import Any, Protocol

import httpcore

from .._core.units import NS_PER_S
from .framing import HeaderEnd

__all__ = [
    "HIGH_WATER",
    "READ_SIZE",
    "Receiver",
    "StampedSocketStream",
    "StampedTLSStream",
    "readable",
    "within",
]

#: Linux's SO_TIMESTAMPNS / SCM_TIMESTAMPNS (asm-generic/socket.h); the socket module lacks them.
_SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("qq")
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
#: Bytes one socket read takes at most; the rest waits in the socket for the loop's next turn. How
#: much of a pushed body is parsed per turn is bounded apart (pump.py). Reads of 4 KiB were tried:
#: 15-30% more CPU per request (bench/bench_load.py's open loop at 110/s) for no shorter turns.
READ_SIZE = 16 * 1024
#: Reading from the socket pauses while this many bytes wait for httpx (a consumer that stopped).
HIGH_WATER = 4 * 1024 * 1024


if sys.version_info >= (3, 11):

    async def within(awaitable: Any, timeout: float | None) -> Any:
        """``await awaitable``, raising ``TimeoutError`` after ``timeout`` seconds. Not
        ``asyncio.wait_for`` (before Python 3.12): with a timeout, it wraps the work in a task of
        its own, one more task and one more turn of the loop for each connect and each write
        of a request; on a busy loop each turn can take a millisecond."""
        async with asyncio.timeout(timeout):
            return await awaitable

else:  # pragma: no cover - Python 3.10 has no asyncio.timeout
    within = asyncio.wait_for


def _kernel_stamps(sock: socket.socket) -> bool:
    """Ask the kernel to time-stamp every received packet (Linux); False where it cannot."""
    if not sys.platform.startswith("linux") or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def _put_back(
    pieces: collections.deque[tuple[bytes, int]], data: bytes, keep: int, stamp: int
) -> bytes:
    """``data[:keep]``; the rest goes back first in ``pieces``, with the same arrival time."""
    if len(data) <= keep:
        return data
    pieces.appendleft((data[keep:], stamp))
    return data[:keep]


class Receiver(Protocol):
    """What a pushed body's reads go to (``StampedSocketStream.push``)."""

    def received(self, data: bytes, arrival_ns: int) -> None:
        """One read, arrived at ``arrival_ns``; ``b""``: the connection's end."""

    def failed(self, error: OSError) -> None:
        """The read failed (the connection broke)."""


def _stamp(now: int, ancillary: list[tuple[int, int, bytes]]) -> int:
    """The arrival time of a read made at ``now`` (perf_counter ns): the kernel's receive time of
    its last packet where the ancillary data gives it, else ``now``."""
    stamp = now
    if ancillary:  # realtime -> perf_counter: the realtime read between two perf_counter reads
        realtime = time.clock_gettime_ns(time.CLOCK_REALTIME)
        offset = (now + time.perf_counter_ns()) // 2 - realtime
        for level, kind, value in ancillary:
            if (
                level == socket.SOL_SOCKET
                and kind == _SO_TIMESTAMPNS
                and len(value) >= _TIMESPEC.size
            ):
                seconds, nanoseconds = _TIMESPEC.unpack_from(value)
                if seconds <= 0:  # not stamped
                    continue
                # A step of the realtime clock between the packet and this read is the only
                # error (besides a microsecond of mapping); the stamp never passes the read.
                kernel = seconds * NS_PER_S + nanoseconds + offset
                if kernel < now:
                    stamp = kernel
    return stamp


class StampedSocketStream(httpcore.AsyncNetworkStream):
    """A connected non-blocking socket, read by the loop's reader callback into stamped pieces.

    Until the response's headers have ended, ``read()`` returns no byte past them (``HeaderEnd``),
    so that the body can be handed to a :class:`Receiver` by :meth:`push` instead of going
    through h11.
    """

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
        self._head: HeaderEnd | None = HeaderEnd()  # None once the headers have ended
        self._receiver: Receiver | None = None
        self._last_stamp = 0
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
            if self._receiver is not None:
                self._receiver.failed(exc)
            self._wake()
            return
        # Bytes read later arrived later: a kernel time mapped onto perf_counter (or a read that
        # fell back to the callback's own time) can come out a fraction of a microsecond before
        # the previous read's, which put a stream's events out of order in time (its ttft, the
        # first token, was then not its earliest).
        stamp = self._last_stamp = max(_stamp(time.perf_counter_ns(), ancillary), self._last_stamp)
        if not data:
            self._eof = True
            self._pause()
        if self._receiver is not None:  # pushed: no buffer, no task to wake
            self._receiver.received(data, stamp)
            return
        if data:
            self._pieces.append((data, stamp))
            self._buffered += len(data)
            if self._buffered > HIGH_WATER:
                self._pause()
        self._wake()

    def push(self, receiver: Receiver) -> None:
        """From now on hand every read to ``receiver`` from the loop's reader callback, after the
        pieces that ``read()`` has not returned (the body's first bytes); ``read()`` is not called
        again."""
        self._head = None
        self._receiver = receiver
        while self._pieces:
            receiver.received(*self._pieces.popleft())
        self._buffered = 0
        if self._error is not None:
            receiver.failed(self._error)
        elif self._eof:
            receiver.received(b"", self.arrival_ns)
        else:
            self._resume()

    def unread(self) -> bool:
        """Bytes wait in the socket that the loop has not read yet: it was busy (a deadline that
        passed meanwhile waits for them, ``_stream.py``)."""
        if self._closed or self._eof or self._error is not None:
            return False
        return readable(self._sock)

    def unpush(self) -> None:
        """Stop handing reads on, and let go of the receiver: it refers back to this stream, and a
        cycle kept every ended stream's log until a full GC pass, which a run defers (_runs/gc.py):
        a run held all its streams' bytes (peak RSS 1.6 GB at 2,000 requests, bench/bench_runs.py)."""
        self._receiver = None
        self._pause()

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
        data = _put_back(self._pieces, data, max_bytes, stamp)
        if self._head is not None and (end := self._head.split(data)) is not None:
            self._head = None
            # the body's first bytes: for its reader
            data = _put_back(self._pieces, data, end, stamp)
        self._buffered -= len(data)
        if self._buffered <= HIGH_WATER // 2:
            self._resume()
        self.arrival_ns = stamp
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        # A request fits in the new socket's send buffer: written now, as sock_sendall's first
        # try would, with no future and no timer (an asyncio.timeout took 10-14 µs of each
        # request of a run); only a rest waits for the socket, within the timeout.
        try:
            sent = self._sock.send(buffer)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from exc
        if sent == len(buffer):
            return
        try:
            await within(self._loop.sock_sendall(self._sock, memoryview(buffer)[sent:]), timeout)
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

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self._head = None  # the headers are the TLS layer's to find
        tls = StampedTLSStream(self, ssl_context, server_hostname)
        try:
            await within(tls.handshake(), timeout)
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
                return (
                    self._sock.getsockname() if info == "client_addr" else self._sock.getpeername()
                )
            except OSError:  # closed
                return None
        if info == "is_readable":  # an idle pooled connection that the server closed, or talked on
            return bool(self._pieces) or self._eof or self._error is not None
        return None


def readable(sock: socket.socket) -> bool:
    """Whether ``sock`` has bytes to read now (without waiting; False once it is closed)."""
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return False


def _time_out(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(httpcore.ReadTimeout("no data within the read timeout"))


class StampedTLSStream(httpcore.AsyncNetworkStream):
    """TLS over a :class:`StampedSocketStream` (``ssl.MemoryBIO``): decrypted bytes carry the
    arrival time of the raw read that completed them. Like the raw stream, ``read()`` returns
    no byte past the response's headers, and :meth:`push` hands the body on as it is decrypted."""

    def __init__(
        self, raw: StampedSocketStream, context: ssl.SSLContext, server_hostname: str | None
    ) -> None:
        self._raw = raw
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(
            self._incoming, self._outgoing, server_hostname=server_hostname
        )
        self.arrival_ns = raw.arrival_ns
        self._head: HeaderEnd | None = HeaderEnd()
        # decrypted, past the headers
        self._held: collections.deque[tuple[bytes, int]] = collections.deque()
        self._receiver: Receiver | None = None
        self._flushing: asyncio.Task[None] | None = None

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
        if self._held:
            data, self.arrival_ns = self._held.popleft()
            return _put_back(self._held, data, max_bytes, self.arrival_ns)
        while True:
            try:
                data = self._tls.read(max_bytes)
                break
            except ssl.SSLWantReadError:
                await self._flush(timeout)
                await self._fill(timeout)
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""
            except ssl.SSLError as exc:
                raise httpcore.ReadError(str(exc)) from exc
        if self._head is not None and (end := self._head.split(data)) is not None:
            self._head = None
            data = _put_back(self._held, data, end, self.arrival_ns)
        return data

    # -- a pushed body: the raw stream's reads, decrypted as they come ----------------------------

    def unread(self) -> bool:
        """As :meth:`StampedSocketStream.unread`."""
        return self._raw.unread()

    def unpush(self) -> None:
        """As :meth:`StampedSocketStream.unpush` (the raw stream refers to this one as its receiver)."""
        self._receiver = None
        self._raw.unpush()

    def push(self, receiver: Receiver) -> None:
        """As :meth:`StampedSocketStream.push`, with the plaintext."""
        self._head = None
        self._receiver = receiver
        while self._held:
            receiver.received(*self._held.popleft())
        self._decrypt(self.arrival_ns, ended=False)  # whole records already in the BIO
        self._raw.push(self)

    def received(self, data: bytes, arrival_ns: int) -> None:  # the raw stream's receiver
        if data:
            self._incoming.write(data)
            self.arrival_ns = arrival_ns
        else:
            self._incoming.write_eof()
        self._decrypt(arrival_ns, ended=not data)

    def failed(self, error: OSError) -> None:
        if self._receiver is not None:
            self._receiver.failed(error)

    def _decrypt(self, arrival_ns: int, *, ended: bool) -> None:
        receiver = self._receiver
        assert receiver is not None
        parts = []
        try:
            while True:
                part = self._tls.read(READ_SIZE)
                if not part:
                    ended = True
                    break
                parts.append(part)
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            ended = True
        except ssl.SSLError as exc:
            receiver.failed(exc)
            return
        if self._outgoing.pending and self._flushing is None:  # a key update to answer: rare
            self._flushing = asyncio.get_running_loop().create_task(self._flush_later())
        if parts:
            receiver.received(b"".join(parts), arrival_ns)
        if ended:
            receiver.received(b"", arrival_ns)

    async def _flush_later(self) -> None:
        try:
            await self._flush()
        except (OSError, httpcore.NetworkError):
            pass  # the connection broke: its reads say so
        finally:
            self._flushing = None

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

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError(
            "TLS inside TLS (an HTTPS proxy to an HTTPS server) is not supported here"
        )

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._tls
        if info == "is_readable":
            return self._incoming.pending > 0 or self._raw.get_extra_info("is_readable")
        return self._raw.get_extra_info(info)
