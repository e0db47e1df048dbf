"""One request on a connection of its own, written and its response's head read here, without
httpx's client, transport and pool, and without httpcore's connection.

Why: in a run every request opens its own connection (``transport.py``), so httpx's layers run
once per request, and they were the client's second cost after parsing. Sampled with py-spy over
4,000 ``sim/chat`` requests at 64 in flight (docs/BENCHMARKS.md), httpx and httpcore took 35% of
the run's loop thread: making an ``httpx.AsyncClient`` per stream, building the request, the
redirect, auth and cookie layers, httpcore's connection and its anyio locks, closing all of it.
What is left to this module is what they did for one request: connect (the stamping backend, TLS
included), send the request, read its head (``head.py`` writes and reads the usual ones by hand;
h11 every other, and refuses what it refused: a key with a line break in it, a malformed head),
and hand back an ``httpx.Response`` (the client's code reads its status and headers as before).
The body is not read here: ``pushed.py`` reads it from the socket's callback, as it did behind
httpx; an error page, or a body whose framing ``pushed.py`` does not read, is read by the
response's stream (``framing.py``'s readers, or h11's when h11 read the head).

Errors are httpx's (``httpx.ConnectError``, ``httpx.ReadTimeout``, ``httpx.RemoteProtocolError``...),
mapped from httpcore's and h11's as httpx maps them, so the client's messages do not change.

Used by ``AsyncClient`` when it makes its own connections (no httpx client of the user's, no
proxy in the environment: ``stamping_allowed``); otherwise httpx serves, with this package's
transport or without.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import h11
import httpcore
import httpx

from .framing import Chunked, FramingError, Length, UntilClose, body_framing
from .head import Head, request_head, response_head
from .streams import READ_SIZE, StampedSocketStream, StampedTLSStream
from .transport import StampingBackend

__all__ = ["MAX_HEAD", "send"]

#: The largest response head read (status line and headers): httpcore's limit, so that a server
#: httpx took is taken.
MAX_HEAD = 100 * 1024

_USER_AGENT = f"python-httpx/{httpx.__version__}"  # what httpx sent: servers see no change

# httpcore's errors (raised by the stamping backend and its streams) as httpx maps them
_MAPPED: dict[type[Exception], type[httpx.HTTPError]] = {
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    h11.RemoteProtocolError: httpx.RemoteProtocolError,
    h11.LocalProtocolError: httpx.LocalProtocolError,
}

_backend = StampingBackend()

_NO_CONTENT = httpx.ByteStream(b"")  # what a response's record of its request holds (read-only)

#: A connection closed before the head: httpcore's words, so the client's message is as it was.
_DISCONNECTED = "Server disconnected without sending a response."

#: Where each request and its response's head are logged (DEBUG), as httpx and httpcore log theirs
#: (``_client/logs.py`` takes the keys out of its records: a server can echo one in a header).
log = logging.getLogger("nito_nb.http")

Network = StampedSocketStream | StampedTLSStream


def _mapped(exc: Exception) -> httpx.HTTPError | None:
    for kind, mapped in _MAPPED.items():
        if isinstance(exc, kind):
            return mapped(str(exc))
    return None


async def send(
    url: httpx.URL,
    headers: dict[str, str],
    body: bytes,
    *,
    timeout: httpx.Timeout,
    ssl_context: Any,
    on_connected: Callable[[int], None] | None = None,
) -> httpx.Response:
    """POST ``body`` to ``url`` on a new connection; the response once its head is read. Its
    ``extensions["network_stream"]`` is the stamped stream (``pushed_body`` and
    ``arrival_clock`` read it); closing the response closes the connection. ``on_connected`` gets
    the nanoseconds the connection took to open (TCP, and TLS for https). Raises httpx's errors."""
    try:
        return await _send(url, headers, body, timeout, ssl_context, on_connected)
    except (
        httpcore.NetworkError,
        httpcore.TimeoutException,
        httpcore.ProtocolError,
        h11.ProtocolError,
    ) as exc:
        mapped = _mapped(exc)
        if mapped is None:  # pragma: no cover - every error above is mapped
            raise
        raise mapped from exc


async def _send(
    url: httpx.URL,
    headers: dict[str, str],
    body: bytes,
    timeout: httpx.Timeout,
    ssl_context: Any,
    on_connected: Callable[[int], None] | None,
) -> httpx.Response:
    if url.scheme not in ("http", "https"):
        raise httpx.UnsupportedProtocol(f"the URL {url} has no http or https scheme")
    sent = [
        ("User-Agent", _USER_AGENT),
        *headers.items(),
        ("Content-Length", str(len(body))),
        # one request per connection (transport.py): the server may close at the body's end
        ("Connection", "close"),
    ]
    # checked and written before the connection opens: a bad header costs no connection
    head = request_head(url.raw_path, url.netloc, sent)
    connection: h11.Connection | None = None
    if head is None:  # h11 writes it, or says what is wrong with it
        connection, request_bytes = _h11_sent(url, sent, body)
    else:
        request_bytes = head + body

    host = url.raw_host.decode("ascii")
    port = url.port or (443 if url.scheme == "https" else 80)
    started = time.perf_counter_ns()
    network: Any = await _backend.connect_tcp(host, port, timeout=timeout.connect)
    try:
        if url.scheme == "https":
            network = await network.start_tls(
                ssl_context, server_hostname=host, timeout=timeout.connect
            )
        if on_connected is not None:
            on_connected(time.perf_counter_ns() - started)
        await network.write(request_bytes, timeout=timeout.write)
        # The stream returns no byte past the final head (streams.py): the body stays for
        # pushed.py, and a read that ends with a blank line ends a head.
        data = bytearray()
        while not data.endswith((b"\n\n", b"\n\r\n")) and len(data) <= MAX_HEAD:
            read = await network.read(READ_SIZE, timeout=timeout.read)
            if not read:
                raise httpx.RemoteProtocolError(_DISCONNECTED)
            data += read
        parsed = response_head(data) if connection is None else None
        if parsed is None:  # h11 reads it, from its first byte
            if connection is None:
                connection = _h11_sent(url, sent, body)[0]
            parsed = await _h11_response(connection, network, bytes(data), timeout.read)
    except BaseException:
        await network.aclose()
        raise
    status, reason, raw_headers = parsed
    if log.isEnabledFor(logging.DEBUG):
        log.debug("POST %s: HTTP/1.1 %d %s %r", url, status, reason.decode("latin-1"), raw_headers)
    # The response's record of its request, as httpx made it (its Host and an empty body's
    # Content-Length: what was sent is above), given as they are: httpx working them out from
    # the URL and an empty body took 3x as long, 9-30 µs of every request of a run.
    request = httpx.Request(
        "POST",
        url,
        headers=[(b"Host", url.netloc), (b"Content-Length", b"0")],
        stream=_NO_CONTENT,
        extensions={"timeout": timeout.as_dict()},
    )
    request.read()  # its content, b"", as before
    return httpx.Response(
        status,
        headers=raw_headers,
        stream=_Body(network, connection, status, raw_headers, request),
        request=request,
        extensions={
            "network_stream": network,
            "http_version": b"HTTP/1.1",
            "reason_phrase": reason,
        },
    )


def _h11_sent(
    url: httpx.URL, sent: list[tuple[str, str]], body: bytes
) -> tuple[h11.Connection, bytes]:
    """An h11 connection that has sent the request (it raises for a header it refuses), and the
    bytes it wrote."""
    connection = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
    host = url.netloc.decode("ascii")
    written = connection.send(
        h11.Request(method=b"POST", target=url.raw_path, headers=[("Host", host), *sent])
    )
    written += connection.send(h11.Data(data=body)) or b""
    written += connection.send(h11.EndOfMessage()) or b""
    return connection, written


async def _h11_response(
    connection: h11.Connection, network: Network, data: bytes, read_timeout: float | None
) -> Head:
    """The final head, read by h11 from ``data`` on (informational answers skipped)."""
    connection.receive_data(data)
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            read = await network.read(READ_SIZE, timeout=read_timeout)
            if not read:
                raise httpx.RemoteProtocolError(_DISCONNECTED)
            connection.receive_data(read)
        elif isinstance(event, h11.Response):
            return event.status_code, event.reason, list(event.headers.raw_items())
        elif not isinstance(event, h11.InformationalResponse):  # pragma: no cover - h11's
            raise httpx.RemoteProtocolError(f"unexpected {type(event).__name__} before the headers")


class _Body(httpx.AsyncByteStream):
    """A response's body read here (an error page, or a framing ``pushed.py`` leaves to others),
    unframed by h11 when h11 read the head, else by ``framing.py`` (h11's rules); closing it
    closes the connection. The read timeout is the request's when the reading starts (the client
    switches it once the headers are in, as httpcore reads it)."""

    def __init__(
        self,
        network: Network,
        connection: h11.Connection | None,
        status: int,
        headers: list[tuple[bytes, bytes]],
        request: httpx.Request,
    ) -> None:
        self._network = network
        self._connection = connection
        self._status = status
        self._headers = headers
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read_timeout = self._request.extensions.get("timeout", {}).get("read")
        try:
            if self._connection is not None:
                async for data in self._h11(self._connection, read_timeout):
                    yield data
                return
            framing = self._framing()
            while not framing.done:
                read = await self._network.read(READ_SIZE, timeout=read_timeout)
                if not read:
                    framing.end()
                    return
                data = framing.feed(read)
                if data:
                    yield data
        except FramingError as exc:
            raise httpx.RemoteProtocolError(str(exc)) from exc
        except (httpcore.NetworkError, httpcore.TimeoutException, h11.ProtocolError) as exc:
            mapped = _mapped(exc)
            if mapped is None:  # pragma: no cover
                raise
            raise mapped from exc

    def _framing(self) -> Chunked | Length | UntilClose:
        """How the body ends, by h11's rules, from the head ``head.py`` read (made only when the
        body is read here: a stream's body is read by ``pushed.py``)."""
        if self._status in (204, 304):  # no body after these, whatever the headers say
            return Length(0)
        # head.py took at most one of these, each at most once
        found = {name.lower(): value.decode("latin-1") for name, value in self._headers}
        framing = body_framing(found.get(b"transfer-encoding"), found.get(b"content-length"))
        assert framing is not None  # head.py takes only the framings framing.py reads
        return framing

    async def _h11(
        self, connection: h11.Connection, read_timeout: float | None
    ) -> AsyncIterator[bytes]:
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                connection.receive_data(await self._network.read(READ_SIZE, timeout=read_timeout))
            elif isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                return

    async def aclose(self) -> None:
        await self._network.aclose()
