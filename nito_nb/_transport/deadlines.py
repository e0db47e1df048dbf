"""The sync client's deadlines, kept where its reads block: in the socket.

A sync read blocks its thread until bytes come or its timeout passes, and httpx gives every read
the same timeout: headers or a body trickled a byte at a time never reach it (issue 28). So the
sync ``Client``'s own httpx client reads through :class:`DeadlineBackend`, httpcore's network
backend with one change: a read is given no more time than the call's next deadline leaves
(``_core/deadlines.py``), and a read that reaches the deadline raises :class:`DeadlinePassed`,
which carries the deadline's error. One clock reading per socket read; nothing per event.

Which call a read belongs to is known by its thread: the caller's thread while it sends and
waits for the headers, the Stream's reader thread for the body (one thread per body). The
client says so with :func:`reading_for`. An httpx client of the user's has its own transport,
which is left as it is: its reads have httpx's timeouts (docs/ENGINE_API.md).
"""

from __future__ import annotations

import contextlib
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore
import httpx

from .._core.deadlines import Deadlines
from .._core.errors import NitoError
from .streams import readable

__all__ = ["DeadlineBackend", "DeadlinePassed", "keep_deadlines", "reading_for", "reads_for"]

_current = threading.local()
#: The timeout of a read of bytes known to be there.
_NOW = 0.001


class DeadlinePassed(httpcore.TimeoutException):
    """A read reached its call's deadline; ``error`` is the typed error that says which one. A
    TimeoutException, so that httpx maps it to one (the error is then its ``__cause__``)."""

    def __init__(self, error: NitoError) -> None:
        super().__init__(error.message)
        self.error = error


@contextlib.contextmanager
def reading_for(deadlines: Deadlines) -> Iterator[None]:
    """The reads made by this thread meanwhile are the call's of ``deadlines``."""
    before = getattr(_current, "deadlines", None)
    _current.deadlines = deadlines
    try:
        yield
    finally:
        _current.deadlines = before


def reads_for(reads: Iterable[bytes], deadlines: Deadlines) -> Iterator[bytes]:
    """``reads`` (a body's), made by the thread that iterates them under ``deadlines``: the
    Stream's reader thread, which reads nothing else for the rest of its life."""
    _current.deadlines = deadlines
    yield from reads


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose reads end at the deadline of the call they are made for."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        deadlines: Deadlines | None = getattr(_current, "deadlines", None)
        if deadlines is None:
            return self._inner.read(max_bytes, timeout)
        left = deadlines.left(time.perf_counter_ns())
        if left <= 0:
            # Bytes that came while this thread was busy (parsing a large read) are read before
            # the deadline is judged: they may hold the event that keeps the call within it.
            if not self._unread():
                raise DeadlinePassed(deadlines.error(deadlines.due()[1]))
            left = _NOW
        try:
            return self._inner.read(
                max_bytes, left if timeout is None or left < timeout else timeout
            )
        except httpcore.ReadTimeout:
            if deadlines.left(time.perf_counter_ns()) <= 0:
                raise DeadlinePassed(deadlines.error(deadlines.due()[1])) from None
            raise

    def _unread(self) -> bool:
        sock = self._inner.get_extra_info("socket")
        if sock is None:
            return False
        pending = getattr(sock, "pending", None)  # TLS: bytes decrypted, not read yet
        return bool(pending is not None and pending()) or readable(sock)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's sync network backend (``inner``), its connections' reads kept to their deadlines."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def keep_deadlines(client: httpx.Client) -> None:
    """Have every transport of ``client`` (one nito_nb made: its default one, and those of the
    proxies httpx read from the environment) read through a :class:`DeadlineBackend`. httpx has no
    parameter for a network backend: its pools' attribute is set (tests/test_transport.py fails
    if httpx or httpcore renames it)."""
    for transport in [client._transport, *client._mounts.values()]:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is not None and not isinstance(backend, DeadlineBackend):
            pool._network_backend = DeadlineBackend(backend)  # type: ignore[union-attr]
