"""The I/O shells: ``Client`` and ``AsyncClient``, written out in full side by side, the way
httpx writes its twins (a change to one is made to the other).

Everything without I/O is below them: ``base.py`` (configuration, the request, the retry
decision), ``failures.py`` (typed errors). Both accept an ``httpx.Client`` /
``httpx.AsyncClient`` of the user's (proxies, auth, transports stay httpx's), and never close a
client they did not create.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import socket
import ssl
import time
from typing import Any

import httpx

from .._core.attachments import DEFAULT_MAX_IMAGE_SIZE
from .._core.encoding import BadEncoding, UnsupportedEncoding, body_decoder
from .._core.errors import ConfigurationError, NitoError
from .._core.status import Status
from .._stream import AsyncStream, Stream
from .._stream_source import AsyncStreamSource, StreamSource
from .._transport import StampingTransport, arrival_clock, direct, pushed_body, stamping_allowed
from .._transport.deadlines import keep_deadlines, reading_for, reads_for
from .._transport.streams import within
from .attachments import read_images
from .base import BaseClient
from .config import DEFAULT_MAX_BODY_SIZE, DEFAULT_MAX_EVENT_SIZE, Timeout
from .connecting import trace_connect
from .endpoint import api_url, shown_url
from .failures import (
    MAX_ERROR_BODY,
    connect_error,
    http_error,
    is_event_stream,
    model_list,
    models_stream,
    transport_exception,
    unsupported_encoding,
)

__all__ = ["AsyncClient", "Client"]


class Client(BaseClient):
    """A synchronous client. ``Client(api_key=..., base_url=..., timeout=...)``, or
    ``Client(http_client=httpx.Client(...))`` to bring your own httpx setup."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: Any = None,
        *,
        http_client: httpx.Client | None = None,
        max_retries: int = 2,
        max_retry_wait: float = 30.0,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    ) -> None:
        # Checked now: the wrong kind failed at the first request, deep inside (AttributeError,
        # or an httpx.AsyncClient's send() returned a coroutine, never awaited).
        _check_http_client(http_client, "nito_nb.Client", httpx.Client, httpx.AsyncClient)
        super().__init__(
            api_key, base_url, timeout, max_retries, max_retry_wait, max_event_size, max_body_size
        )
        self._own_http = http_client is None
        if http_client is None:
            http_client = httpx.Client(timeout=self.timeout.httpx())
            # its reads end at the calls' deadlines (a user's keeps httpx's)
            keep_deadlines(http_client)
        self._http = http_client

    def stream(
        self,
        prompt_or_messages: Any,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: Any = None,
        raise_errors: bool = True,
        max_event_size: int | None = None,
        max_body_size: int | None = None,
        schema: Any = None,
        images: Any = None,
        image_detail: str = "auto",
        max_image_size: int = DEFAULT_MAX_IMAGE_SIZE,
        **params: Any,
    ) -> Stream:
        """Send the request and return its Stream once the response has started.

        HTTP errors raise here (typed, with ``.stream`` holding the status, headers and body);
        the body is read as the Stream is iterated.
        """
        self._check_open()
        structured, params = self._with_schema(schema, params)
        attachments = read_images(images, image_detail, max_image_size)
        url, headers, body, meta, key = self._build(
            prompt_or_messages, model, api_key, base_url, params, attachments
        )
        limits = Timeout.of(timeout) if timeout is not None else self.timeout
        source = StreamSource(
            meta,
            raise_errors=raise_errors,
            max_event_size=self._event_limit(max_event_size),
            max_body_size=self._body_limit(max_body_size),
            transport_errors=transport_exception,
        )
        stream = source.stream
        self._remember(source, model, base_url, key, timeout, max_event_size, max_body_size)
        if structured is not None:
            source.set_schema(structured)
        source.set_attachments(attachments)
        deadlines = source.set_deadlines(limits.first_byte, limits.between_chunks, limits.total)
        try:
            for attempt in range(self.max_retries + 1):
                request = self._http.build_request(
                    "POST", url, json=body, headers=headers, timeout=limits.httpx()
                )
                trace_connect(request, source, asynchronous=False)
                # One clock per Stream: t0 is the first attempt's send, so every timing includes
                # the retries (``attempts`` says how many requests were sent).
                if attempt:
                    source.new_attempt()
                else:
                    source.start()
                deadlines.sent(time.perf_counter_ns())
                # this thread's reads, until the headers (and an error body)
                with reading_for(deadlines):
                    try:
                        # Never a redirect, whatever an httpx client of the user's says: the key (and
                        # a header of its own, such as Azure's api-key, which httpx keeps) would go along.
                        response = self._http.send(request, stream=True, follow_redirects=False)
                    except httpx.HTTPError as exc:
                        error: NitoError = connect_error(exc, url, source)
                    else:
                        if response.status_code < 300 and is_event_stream(response):
                            source.set_response(
                                response.status_code, response.headers, time.perf_counter_ns()
                            )
                            try:  # the body as it comes: the Stream decodes it, in bounded pieces
                                source.set_encoding(response.headers.get("content-encoding"))
                            except UnsupportedEncoding as exc:
                                _close(response)
                                error = unsupported_encoding(source, exc)
                                source.end()  # the failure is final: no retry follows
                                raise error from None
                            _between_chunks(response, limits.between_chunks)
                            # Read from now on, whatever the caller does: arrival times are the
                            # moment the bytes came, not the moment someone iterated.
                            source.read_body(
                                reads_for(response.iter_raw(), deadlines),
                                functools.partial(_close, response),
                                functools.partial(_abort, response),
                            )
                            return stream
                        error_body = _ErrorBody(response)
                        try:
                            error_body.read(response.iter_raw())
                        finally:
                            _close(response)
                        # an HTTP error, or a redirect (never followed)
                        if response.status_code >= 300:
                            error = http_error(source, response, error_body.data, key)
                        else:
                            error = self._not_event_stream(source, response, error_body.data, key)
                delay = self._retry_delay(attempt, error)
                if delay is None or not deadlines.room_for(delay, time.perf_counter_ns()):
                    source.end()  # the failure is final: no retry follows
                    raise error
                time.sleep(delay)
        except KeyboardInterrupt as interrupt:
            # Stopped before the response started (connecting, waiting for the headers, or before
            # a retry): the Stream records the stop and travels with the interrupt, so that the
            # magic can still keep the request in _nito. The interrupt itself goes on.
            source.end(status=Status.STOPPED)
            interrupt.stream = stream  # type: ignore[attr-defined]
            raise
        raise AssertionError("unreachable")

    def models(
        self, *, base_url: str | None = None, api_key: str | None = None
    ) -> list[dict[str, Any]]:
        """The gateway's model list (``GET /models``). Failures raise typed errors, as for a
        stream: ``ConnectionFailed`` (and its timeouts), an ``APIError`` (``RedirectError`` for a
        redirect, never followed), or a ``TransportError`` for an answer that is not the JSON list."""
        self._check_open()
        url, headers, key = self._models_request(base_url, api_key)
        try:
            response = self._http.get(
                api_url(url, "/models"),
                headers=headers,
                timeout=self.timeout.httpx(),
                follow_redirects=False,
            )
        except httpx.HTTPError as exc:
            raise connect_error(exc, url, models_stream(url, key)) from None
        return model_list(url, response, key)

    def close(self) -> None:
        if self._own_http:
            self._http.close()

    def _check_open(self) -> None:
        """httpx's RuntimeError ("the client has been closed") as one line that says what to do."""
        if self._http.is_closed:
            raise ConfigurationError(
                _closed_message("nito_nb.Client", "httpx.Client", self._own_http)
            )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class AsyncClient(BaseClient):
    """The async twin of :class:`Client`."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: Any = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        max_retries: int = 2,
        max_retry_wait: float = 30.0,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    ) -> None:
        # Checked now: an httpx.Client failed at the first connection, in httpcore (a TypeError
        # about the trace callback).
        _check_http_client(http_client, "nito_nb.AsyncClient", httpx.AsyncClient, httpx.Client)
        super().__init__(
            api_key, base_url, timeout, max_retries, max_retry_wait, max_event_size, max_body_size
        )
        # Without an httpx client of the user's, each stream gets its own, closed with the stream:
        # an httpx.AsyncClient belongs to the event loop it first ran on, and Jupyter, asyncio.run
        # and worker threads each bring their own loop. A shared SSL context keeps that cheap.
        self._http = http_client
        # Socket reads timed as they arrive (nito_nb/_transport), unless the environment sets a
        # proxy: decided once, as httpx reads the environment once per client.
        self._stamping = http_client is None and stamping_allowed()
        if http_client is None:  # loading the CA file takes a while: now, not in a run's first send
            _ssl_context()

    def _new_http(self) -> httpx.AsyncClient:
        transport = StampingTransport(verify=_ssl_context()) if self._stamping else None
        return httpx.AsyncClient(
            timeout=self.timeout.httpx(), verify=_ssl_context(), transport=transport
        )

    def stream(
        self,
        prompt_or_messages: Any,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: Any = None,
        raise_errors: bool = True,
        max_event_size: int | None = None,
        max_body_size: int | None = None,
        schema: Any = None,
        images: Any = None,
        image_detail: str = "auto",
        max_image_size: int = DEFAULT_MAX_IMAGE_SIZE,
        **params: Any,
    ) -> AsyncStream:
        """An AsyncStream; it connects on first ``async for`` / ``await`` / ``async with``.
        Configuration errors raise here; HTTP errors raise when it connects."""
        self._check_open()
        structured, params = self._with_schema(schema, params)
        attachments = read_images(images, image_detail, max_image_size)
        url, headers, body, meta, key = self._build(
            prompt_or_messages, model, api_key, base_url, params, attachments
        )
        limits = Timeout.of(timeout) if timeout is not None else self.timeout
        source = AsyncStreamSource(
            meta,
            raise_errors=raise_errors,
            max_event_size=self._event_limit(max_event_size),
            max_body_size=self._body_limit(max_body_size),
            transport_errors=transport_exception,
        )
        self._remember(source, model, base_url, key, timeout, max_event_size, max_body_size)
        if structured is not None:
            source.set_schema(structured)
        source.set_attachments(attachments)
        # Kept by the stream: the headers' below, the body's by the stream itself (_stream.py).
        deadlines = source.set_deadlines(limits.first_byte, limits.between_chunks, limits.total)

        # Given the producer when the stream is first used; it never refers to ``source`` above,
        # which holds the stream that holds this: a stream never used would be a cycle.
        async def open_stream(source: AsyncStreamSource) -> None:
            source.set_opener(None)
            if self._stamping:  # its own connection, without an httpx client (_transport/direct.py)
                await connect(source, None)
                return
            http = self._http or self._new_http()
            try:
                await connect(source, http)
            except BaseException:
                if http is not self._http:
                    await http.aclose()
                raise
            if http is not self._http:
                source.close_also(http.aclose)

        async def connect(source: AsyncStreamSource, http: httpx.AsyncClient | None) -> None:
            content = b"" if http is not None else _json_body(body)
            for attempt in range(self.max_retries + 1):
                if http is not None:
                    request = http.build_request(
                        "POST", _parsed_url(url), json=body, headers=headers, timeout=limits.httpx()
                    )
                    trace_connect(request, source, asynchronous=True)
                if attempt:  # one clock per Stream, as in Client.stream
                    source.new_attempt()
                else:  # built ahead of a schedule's send time: the send itself is all that is left
                    await source.until_send_time()
                    source.start()
                sent = time.perf_counter_ns()
                deadlines.sent(sent)
                try:  # the first_byte (or total) deadline, whatever the headers' reads do
                    response = await within(
                        http.send(request, stream=True, follow_redirects=False)  # as Client's
                        if http is not None
                        else direct.send(
                            _parsed_url(url),
                            headers,
                            content,
                            timeout=_httpx_timeout(limits),
                            ssl_context=_ssl_context(),
                            on_connected=source.set_connect,
                        ),
                        max(deadlines.left(sent), 0.0),
                    )
                except httpx.HTTPError as exc:
                    error: NitoError = connect_error(exc, url, source)
                except asyncio.TimeoutError:
                    error = source.fail(deadlines.error(deadlines.due()[1]))
                else:
                    if response.status_code < 300 and is_event_stream(response):
                        source.set_response(
                            response.status_code,
                            response.headers,
                            (arrival := arrival_clock(response))(),
                        )
                        close = functools.partial(_aclose, response)
                        try:  # the body as it comes: the Stream decodes it, in bounded pieces
                            source.set_encoding(response.headers.get("content-encoding"))
                        except UnsupportedEncoding as exc:
                            await close()
                            error = unsupported_encoding(source, exc)
                            source.end()  # the failure is final: no retry follows
                            raise error from None
                        # No read timeout for the body: the stream keeps its deadlines, in events.
                        _between_chunks(response, None)
                        pushed = pushed_body(response)  # the stamping transport's
                        if pushed is not None:  # read by the socket's callback, read by read
                            source.set_pushed_body(pushed, close)
                        else:  # httpx reads it, with the socket reads' times where it can
                            source.set_body(response.aiter_raw(), close, arrival)
                        return
                    error_body = _ErrorBody(response)
                    try:  # as long as the deadline of the headers leaves
                        await within(
                            error_body.aread(response.aiter_raw()),
                            max(deadlines.left(time.perf_counter_ns()), 0.0),
                        )
                    except asyncio.TimeoutError:
                        pass  # what came of it is kept: the status says enough
                    finally:
                        await _aclose(response)
                    if response.status_code >= 300:  # an HTTP error, or a redirect (never followed)
                        error = http_error(source, response, error_body.data, key)
                    else:
                        error = self._not_event_stream(source, response, error_body.data, key)
                delay = self._retry_delay(attempt, error)
                if delay is None or not deadlines.room_for(delay, time.perf_counter_ns()):
                    source.end()  # the failure is final: no retry follows
                    raise error
                await asyncio.sleep(delay)

        source.set_opener(open_stream)
        return source.stream

    async def warm(self) -> None:
        """Do now, on the running loop, the one-time work of a first request: loading the CA file,
        and the import of anyio's asyncio backend that httpcore's locks make when first used (a
        delay the first send would carry: docs/BENCHMARKS.md). A run calls it before its schedule
        starts, so that its first requests do not leave late."""
        _ssl_context()
        import anyio

        anyio.Lock()  # making one loads the backend of the running loop

    async def models(
        self, *, base_url: str | None = None, api_key: str | None = None
    ) -> list[dict[str, Any]]:
        self._check_open()
        url, headers, key = self._models_request(base_url, api_key)
        http = self._http or self._new_http()
        try:
            response = await http.get(
                api_url(url, "/models"), headers=headers, follow_redirects=False
            )
        except httpx.HTTPError as exc:
            raise connect_error(exc, url, models_stream(url, key)) from None
        finally:
            if http is not self._http:
                await http.aclose()
        return model_list(url, response, key)

    async def aclose(self) -> None:
        """Nothing to release: each stream closes its own connection (a client you passed in
        stays yours to close)."""

    def _check_open(self) -> None:
        """As :meth:`Client._check_open`; only an httpx client of the user's can be closed (this
        client makes one per stream otherwise)."""
        if self._http is not None and self._http.is_closed:
            raise ConfigurationError(
                _closed_message("nito_nb.AsyncClient", "httpx.AsyncClient", False)
            )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


# -- the checks and I/O helpers of both ------------------------------------------------------------


def _check_http_client(http_client: Any, client: str, wanted: type, twin: type) -> None:
    """A ConfigurationError unless ``http_client`` is None or a ``wanted`` (``twin``: the other
    kind of httpx client, which belongs to the other nito_nb client)."""
    if http_client is None or isinstance(http_client, wanted):
        return
    name = f"httpx.{wanted.__name__}"
    if isinstance(http_client, twin):
        other = f"httpx.{twin.__name__}"
        raise ConfigurationError(
            f"{client} takes an {name}, not an {other}: pass http_client={name}(...), or give the "
            f"{other} to {'nito_nb.AsyncClient' if client == 'nito_nb.Client' else 'nito_nb.Client'}."
        )
    raise ConfigurationError(
        f"{client} takes an {name}, not {type(http_client).__name__}: pass http_client={name}(...) or leave it out."
    )


def _closed_message(client: str, http: str, own: bool) -> str:
    if own:
        return f"This {client} is closed (close(), or the end of its with block): make a new one, {client}(...)."
    return f"The {http} given as http_client is closed: make a new {client} with an open one."


class _ShownURLs(logging.Filter):
    """httpx logs every request's URL as it is ("HTTP Request: POST https://...", INFO): a
    password or an ``?api-key=`` in a base URL would reach the log of a notebook that turned INFO
    on. This shows it as every message does (``shown_url``). A logger's filter runs only for the
    records it logs, so it costs nothing while INFO is off."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(
            isinstance(arg, httpx.URL) for arg in record.args
        ):
            record.args = tuple(
                shown_url(str(arg)) if isinstance(arg, httpx.URL) else arg for arg in record.args
            )
        return True


_httpx_logger = logging.getLogger("httpx")
# once, also after a reload
if not any(type(f).__name__ == "_ShownURLs" for f in _httpx_logger.filters):
    _httpx_logger.addFilter(_ShownURLs())


def _close(response: httpx.Response) -> None:
    """Close ``response``, and break the cycle httpx makes between a streamed Response and its
    body (``response.stream`` points back at it): with it, every ended stream left its request,
    connection and h11's state for the cyclic GC, whose full passes then stalled a load run's
    loop (bench/bench_load.py; docs/BENCHMARKS.md); without it, they are freed when the Stream
    lets go."""
    try:
        response.close()
    finally:
        response.stream = httpx.ByteStream(b"")  # closed: nothing more can be read either way


async def _aclose(response: httpx.Response) -> None:
    """``_close`` for an AsyncClient's response."""
    try:
        await response.aclose()
    finally:
        response.stream = httpx.ByteStream(b"")


def _between_chunks(response: httpx.Response, seconds: float | None) -> None:
    """Use the between-chunks timeout for the body's reads (a read's: the deadline itself is
    kept by the deadline backend, sync, or by the stream, async).

    httpcore reads the request's ``timeout`` extension when the body iteration starts, so swapping
    it after the headers arrived changes the read timeout of the body only. Measured by the
    sim/stall tests (a first-byte timeout longer than the stall, a between-chunks one shorter).
    """
    timeouts = dict(response.request.extensions.get("timeout", {}))
    timeouts["read"] = seconds
    response.request.extensions["timeout"] = timeouts


@functools.lru_cache(maxsize=64)
def _httpx_timeout(limits: Timeout) -> httpx.Timeout:
    """``limits.httpx()``, made once for the limits a client's calls share (a run's): httpx
    checking its four values again took a few µs of every request."""
    return limits.httpx()


@functools.lru_cache(maxsize=64)
def _parsed_url(url: str) -> httpx.URL:
    """``url`` parsed by httpx (immutable), once: a run sends every request to the same URL, and
    httpx parsing it again was half of ``build_request`` (125 -> 62 us a request)."""
    return httpx.URL(url)


def _json_body(body: dict[str, Any]) -> bytes:
    """The request's JSON as httpx writes it for ``json=`` (compact, UTF-8, no NaN)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """httpx's default verification (certifi's CAs), built once: loading the CA file is the slow
    part of creating an httpx client."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def _abort(response: httpx.Response) -> None:
    """Cut a response that another thread is reading.

    ``response.close()`` from a second thread waits for the reader (httpcore holds the
    connection's lock during a read), so a Stop button would wait for the next chunk. Shutting
    the socket down makes the blocked read return at once; the reader then closes the response.
    """
    network_stream = response.extensions.get("network_stream")
    sock = network_stream.get_extra_info("socket") if network_stream is not None else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # already closed: nothing to cut
            pass


class _ErrorBody:
    """The first ``MAX_ERROR_BODY`` bytes of an answer that is not a stream, decoded as the stream
    would be (in bounded pieces: a compressed error page can be a bomb too). A read that fails,
    or a deadline, ends it: what came is kept, the status says enough."""

    def __init__(self, response: httpx.Response) -> None:
        try:
            self._decoder = body_decoder(response.headers.get("content-encoding"))
        except UnsupportedEncoding:
            self._decoder = None  # shown as it came
        self._body = bytearray()

    @property
    def data(self) -> bytes:
        return bytes(self._body[:MAX_ERROR_BODY])

    def _take(self, data: bytes) -> bool:
        """Keep ``data``; True once the body is long enough."""
        try:
            for piece in (data,) if self._decoder is None else self._decoder.decode(data):
                self._body += piece
                if len(self._body) > MAX_ERROR_BODY:
                    return True
        except BadEncoding:
            return True
        return False

    def read(self, reads: Any) -> None:
        try:
            for data in reads:
                if self._take(data):
                    return
        except httpx.HTTPError:
            pass

    async def aread(self, reads: Any) -> None:
        try:
            async for data in reads:
                if self._take(data):
                    return
        except httpx.HTTPError:
            pass
