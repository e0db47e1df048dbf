"""Capture: the streamed chat completions that other libraries send through httpx or httpx2, as Streams.

The openai SDK, pydantic-ai, LangChain's ``ChatOpenAI`` and LiteLLM's OpenAI-compatible providers
all send their requests through a client of one of two HTTP stacks: httpx (0.x) or httpx2 (its fork,
the openai SDK's default since 3.x). A capture transport wraps that client's transport: for a
streamed ``POST .../chat/completions`` it hands the caller the very bytes the inner transport
produced, unchanged, and feeds a copy of each read, stamped with ``time.perf_counter_ns()`` the
moment it came off the inner transport, to a nito_nb Stream. The body of a stream is read by a
pump as it arrives, whatever the caller does meanwhile (``_capture_pump.py``), so the stamps are
arrival times, as for nito_nb's own client. Every other request passes through untouched.

One core serves both stacks (this module: which requests, the registry, the live views, the
recording, the transports' logic); the stacks differ at the transport boundary only: their base
classes and their exceptions (``_capture_httpx.py``, ``_capture_httpx2.py``, the latter imported
only when asked for), described by a :class:`Stack`.

Captured Streams go to a bounded registry of this process (:func:`streams`, ``nito_nb.last()``)
and to the live views opened by ``nito_nb.live()`` (``_live.py``), through :func:`open_views`.

Secrets: the request is stored without headers and without the URL's query; any value of an
``Authorization``, ``Api-Key``, ``X-Api-Key``, ``Proxy-Authorization`` or ``Cookie`` header (and
of a key-like query parameter) is replaced by ``[redacted]`` wherever it appears in the stored
request body or in an error body (``_core.errors.redact``, the engine's one rule); response headers
are stored as ``ChunkLog.set_response`` does (``clean_headers``), minus any header whose value
carries one of those secrets; and the key itself is given to the Stream, which redacts it from the
recorded body as it does for nito_nb's own client. The caller still receives every byte as sent.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ._core.credentials import is_credential_parameter
from ._core.encoding import BadEncoding, BodyDecoder, UnsupportedEncoding, body_decoder
from ._core.errors import (
    NitoError,
    Secret,
    one_line,
    redact,
)
from ._core.http_errors import api_error, not_event_stream_error, retry_after_of
from ._core.status import Status
from ._last import last as _kept
from ._stream import Stream
from ._stream_source import StreamSource

__all__ = ["AsyncCapture", "Stack", "SyncCapture", "streams", "wrap_transports"]

#: Streams kept by :func:`streams` unless ``NITO_KEEP_STREAMS`` says otherwise (0: no limit).
DEFAULT_KEEP = 100
#: An error body is kept up to this size (as the client does).
MAX_ERROR_BODY = 64 * 1024
#: Request headers whose values are credentials: never stored, and scrubbed wherever they appear.
SECRET_REQUEST_HEADERS = ("authorization", "proxy-authorization", "api-key", "x-api-key", "cookie")


# -- the stacks ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stack:
    """One HTTP stack as capture sees it: its name (the Stream's ``request["capture"]``) and its
    module. httpx2 keeps httpx's names and meanings (``Request``, ``Response``, ``RequestNotRead``,
    ``ByteStream``, the exceptions), so the core reads both through this one description."""

    name: str
    module: ModuleType

    def as_httpx_error(self, error: BaseException) -> BaseException:
        """``error`` as the httpx exception of the same name, for the Stream's record only (the
        engine's one place that types a failure knows httpx's: ``_client.transport_exception``);
        the caller always gets the original."""
        if self.name == "httpx" or not isinstance(error, self.module.HTTPError):
            return error
        import httpx

        cls = getattr(httpx, type(error).__name__, None)
        if isinstance(cls, type) and issubclass(cls, httpx.TransportError):
            return cls(str(error))
        return httpx.TransportError(str(error))


# -- the one rule that is capture's own -----------------------------------------------------
# Everything else goes through the Stream's producer, a StreamSource (feed, end, set_response,
# fail_http, fail, protect, note), as nito_nb's own client and the replay do.


#: The error's words for an HTTP error whose body the client closed unread.
UNREAD = (
    "the client closed the body before reading it{sent} (libraries do before a retry: the openai "
    "SDK on a 429 or 5xx), so what it said is not recorded"
)


def fail_http(
    source: StreamSource,
    status_code: int,
    headers: Any,
    body: bytes,
    t_ns: int,
    url: str = "",
    *,
    unread: bool = False,
) -> None:
    """The server refused with an HTTP error, redirected (``url``: the request's, against which a
    relative ``Location`` is read), or answered 2xx with something other than a stream.
    ``unread``: the client closed the body before reading any of it (an error then says so, with
    the status and headers, rather than "an empty body")."""
    if unread and status_code >= 400:
        length = headers.get("content-length")
        message = UNREAD.format(sent=f" ({length} bytes by its Content-Length)" if length else "")
        error = api_error(
            status_code,
            "",
            content_type=headers.get("content-type", ""),
            retry_after=retry_after_of(headers),
            message=message,
        )
        source.fail_http(status_code, headers, body, t_ns, error)
        source.note("body-unread", message)
        return
    if 300 <= status_code < 400:
        # The client that sent it follows it or not by its own settings (nothing it sees changes):
        # the Stream says where it pointed, and that a followed request is a Stream of its own.
        from ._client import redirect_error  # the one place that reads a Location

        location = headers.get("location") if hasattr(headers, "get") else None
        source.fail_http(
            status_code,
            headers,
            body,
            t_ns,
            redirect_error(status_code, location, url, captured=True),
        )
        return
    source.fail_http(status_code, headers, body, t_ns)
    if status_code < 400:
        text = body.decode("utf-8", "replace")
        stream = source.stream
        source.fail(
            not_event_stream_error(
                status_code, stream.log.headers, text, stream.request.get("base_url", "")
            )
        )


# -- the registry --------------------------------------------------------------------------------


class _Registry:
    """The captured (and watched) Streams of this process, oldest first, bounded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: collections.deque[Stream] | None = None
        self._magic_then: Any = None  # the magic's last() when the latest capture was added

    def _deque(self) -> collections.deque[Stream]:
        # Read on first use, so that an environment variable set early in a notebook applies.
        if self._items is None:
            try:
                keep = int(os.environ.get("NITO_KEEP_STREAMS", DEFAULT_KEEP))
            except ValueError:
                keep = DEFAULT_KEEP
            self._items = collections.deque(maxlen=keep if keep > 0 else None)
        return self._items

    def add(self, stream: Stream) -> None:
        with self._lock:
            self._deque().append(stream)
            self._magic_then = _magic_last()

    def items(self) -> list[Stream]:
        with self._lock:
            return list(self._deque())

    def latest(self, magic_last: Any) -> Any:
        """The more recent of the magic's last result and the last captured Stream."""
        with self._lock:
            items = self._deque()
            captured = items[-1] if items else None
            if captured is None or (magic_last is not None and magic_last is not self._magic_then):
                return magic_last  # the magic kept something after the last capture
            return captured

    def clear(self) -> None:
        with self._lock:
            self._deque().clear()
            self._magic_then = None


def _magic_last() -> Any:
    """What the magic or a run kept last (``_last.py``, below this module)."""
    return _kept()


REGISTRY = _Registry()


def streams() -> list[Stream]:
    """The Streams captured (``httpx_client``) or watched (``watch``) in this process, oldest first.

    The last ``NITO_KEEP_STREAMS`` (default 100; 0 keeps all) are kept. ``nito_nb.frame(streams())``
    gives one frame of them all.
    """
    return REGISTRY.items()


def register(stream: Stream) -> None:
    REGISTRY.add(stream)


# -- live views ---------------------------------------------------------------------------------

#: Who wants to see each new captured Stream: ``live()`` blocks push an opener here. An opener
#: takes the Stream and returns a view with ``update()`` and ``finish()``, or None.
VIEWERS: ContextVar[tuple[Callable[[Stream], Any], ...]] = ContextVar("nito_nb_viewers", default=())


#: Views that failed once: never called again, by whichever holder (a Stream's, a live() block's).
_FAILED_VIEWS: weakref.WeakSet[Any] = weakref.WeakSet()


class Views:
    """The live views of one Stream. A view that fails is dropped with one line on stderr: the
    caller's stream must never break because of a display."""

    def __init__(self, stream: Stream | None, views: list[Any]) -> None:
        self.stream = stream
        self.views = views

    def _each(self, method: str) -> None:
        for view in list(self.views):
            if view in _FAILED_VIEWS:
                self.views.remove(view)
                continue
            try:
                getattr(view, method)()
            except Exception as exc:
                self.views.remove(view)
                with contextlib.suppress(TypeError):  # not weak-referenceable: dropped here only
                    _FAILED_VIEWS.add(view)
                print(f"nito: the live view stopped ({one_line(exc)})", file=sys.stderr)

    def update(self) -> None:
        if self.views:
            self._each("update")

    def finish(self) -> None:
        if self.views:
            self._each("finish")
            self.views = []


def open_views(stream: Stream) -> Views:
    """The live views that the ``live()`` blocks around this call want for a new Stream."""
    views = []
    for opener in VIEWERS.get():
        view = opener(stream)
        if view is not None:
            views.append(view)
    return Views(stream, views)


# -- reading the request -----------------------------------------------------------------------


def _secrets(request: Any) -> list[Secret]:
    """Every credential the request carries, the key itself first (the bare token of
    ``Authorization: Bearer <key>``, else an ``Api-Key`` / ``X-Api-Key`` value or a ``?key=``)."""
    found: list[str] = []
    for name in SECRET_REQUEST_HEADERS:
        for value in request.headers.get_list(name):
            value = value.strip()
            scheme, _, token = value.partition(" ")
            if token.strip() and scheme.lower() in ("bearer", "basic", "token"):
                found.append(token.strip())
            if name == "cookie":
                found.extend(part.partition("=")[2].strip() for part in value.split(";"))
            found.append(value)
    for name, value in request.url.params.multi_items():
        if is_credential_parameter(name):  # the client's own list (shown_url)
            found.append(value)
    secrets = [Secret.of(value) for value in dict.fromkeys(found)]
    return [secret for secret in secrets if secret is not None]


def redact_all(text: str, secrets: list[Secret]) -> str:
    """``text`` without any form of any of ``secrets`` (the engine's one rule, ``_core.errors.redact``);
    longest first, so that a header value is replaced whole before the key inside it."""
    for secret in sorted(secrets, key=lambda s: len(s.value), reverse=True):
        text = redact(text, secret)
    return text


def chat_request(request: Any, stack: Stack) -> tuple[dict[str, Any], list[Secret]] | None:
    """(request metadata for the log, secrets) of a streamed chat completion sent through
    ``stack`` (``request`` is its ``Request``), else None."""
    if request.method != "POST" or not request.url.path.rstrip("/").endswith("/chat/completions"):
        return None
    try:
        content = request.content
    except stack.module.RequestNotRead:
        # A redirect that httpx follows with the body (307, 308) sends the first request's
        # in-memory body again, not read yet: read it without consuming anything. Any other
        # unread body is a streaming upload, which reading would take from the caller.
        if not isinstance(request.stream, stack.module.ByteStream):
            return None
        content = b"".join(request.stream)
    try:
        body = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(body, dict) or body.get("stream") is not True:
        return None
    secrets = _secrets(request)
    path = request.url.path.rstrip("/")[: -len("/chat/completions")]
    base_url = str(request.url.copy_with(path=path or "/", query=None, fragment=None)).rstrip("/")
    params = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}
    meta: dict[str, Any] = {
        "model": body.get("model"),
        "messages": body.get("messages", []),
        "params": params,
        "base_url": base_url,
        "capture": stack.name,  # built from the exact bytes a client of the user's received
    }
    if secrets:
        meta = json.loads(redact_all(json.dumps(meta, ensure_ascii=False), secrets))
    return meta, secrets


# -- recording one response ----------------------------------------------------------------------


class Recorder:
    """Feeds one response's reads to its Stream, as they came (the Stream decodes a gzip or deflate
    body itself, in bounded pieces, and stops at its limits: ``_core/encoding.py``). Never raises
    into the caller's read: if recording fails, recording stops (the anomaly says so, or the
    Stream's error when it was a limit) and the bytes still go through."""

    def __init__(
        self,
        source: StreamSource,
        response: Any,
        secrets: list[Secret],
        decoder: BodyDecoder | None,
        url: str = "",
    ) -> None:
        self.source = source
        stream = source.stream
        self.secrets = secrets
        self.status_code = response.status_code
        self.headers = stream.log.headers  # already cleaned
        content_type = response.headers.get("content-type", "")
        self.url = url  # the request's: a redirect's Location may be relative to it
        self.is_stream = response.status_code < 300 and (
            not content_type or "text/event-stream" in content_type.lower()
        )
        self.decoder = decoder  # an error body's (a stream's is the Stream's)
        self.error_body = bytearray()
        self.received = 0  # bytes the client read of the body, as they came
        self.ended = False
        self.broken = False
        self.views = open_views(stream)

    def take(self, data: bytes, t_ns: int) -> None:
        self.received += len(data)
        if self.ended or self.broken:
            return
        try:
            if not self.is_stream:
                for piece in (data,) if self.decoder is None else self.decoder.decode(data):
                    if len(self.error_body) >= MAX_ERROR_BODY:
                        break
                    self.error_body += piece[: MAX_ERROR_BODY - len(self.error_body)]
                return
            if data:
                self.source.feed(data, t_ns)
                self.views.update()
        # a limit of the Stream's (an event or a body too large): it ends there
        except NitoError as exc:
            self.broken = True
            self.source.end(t_ns, status=Status.TRUNCATED, exception=exc)
        except Exception as exc:  # never the caller's problem
            self.broken = True
            if isinstance(exc, BadEncoding) and not self.is_stream:
                return  # an error body is kept as far as it decoded
            self.source.note("capture-failed", f"recording stopped: {type(exc).__name__}: {exc}")

    def finish(
        self,
        t_ns: int,
        *,
        closed_early: bool = False,
        error: BaseException | None = None,
        show: bool = True,
    ) -> None:
        """The body ended: read to its end, closed by the caller, or cut by ``error``. ``show``:
        finish the live views now (else :meth:`close_views`, in the library's thread: a pump
        records the end as it arrives, the library reaches it later)."""
        if self.ended:
            if show:
                self.close_views()
            return
        source = self.source
        stream = source.stream
        try:
            self.ended = True
            if not self.is_stream:
                text = redact_all(bytes(self.error_body).decode("utf-8", "replace"), self.secrets)
                unread = closed_early and not self.received
                fail_http(
                    source,
                    self.status_code,
                    self.headers,
                    text.encode("utf-8"),
                    t_ns,
                    self.url,
                    unread=unread,
                )
                if closed_early and self.received:
                    source.note(
                        "body-unread",
                        f"the client closed the body after {self.received} bytes, "
                        "before its end: what came is kept",
                    )
                # the failure is final: whatever the client retries is a Stream of its own
                source.end(t_ns)
            elif error is not None:
                source.end(t_ns, **_ending(error, stream))
            elif closed_early and not (stream.done or stream.error):
                source.end(t_ns, status=Status.STOPPED)
            else:
                source.end(t_ns)
        except Exception as exc:  # never the caller's problem (this runs in its close())
            source.note("capture-failed", f"recording could not end: {type(exc).__name__}: {exc}")
        finally:
            self.ended = True
            if show:
                self.close_views()

    def close_views(self) -> None:
        self.views.finish()


def _ending(error: BaseException, stream: Stream) -> dict[str, Any]:
    """How a body cut by ``error`` ends: stopped (interrupt, cancel), or truncated with the error."""
    import asyncio

    if isinstance(error, (KeyboardInterrupt, asyncio.CancelledError, GeneratorExit)):
        return {"status": Status.STOPPED}
    from ._client import transport_exception  # the one place that knows httpx's errors

    return {"status": Status.TRUNCATED, "exception": transport_exception(error, stream)}


def _start(
    request: Any, t0_ns: int, response: Any, meta: dict[str, Any], secrets: list[Secret]
) -> Recorder | None:
    """The Stream and its Recorder for a response whose headers just arrived, or None to pass."""
    from ._client.config import DEFAULT_MAX_BODY_SIZE, DEFAULT_MAX_EVENT_SIZE  # the client's limits
    from ._client.logs import protect_in_logs

    for secret in secrets:  # httpcore's DEBUG log shows the response's headers: an echo of them too
        protect_in_logs(secret)

    t_headers = time.perf_counter_ns()
    encoding = response.headers.get("content-encoding")
    try:
        decoder = body_decoder(encoding)
    except UnsupportedEncoding:
        return None  # br, zstd...: nito_nb would see compressed bytes, so it records nothing
    source = StreamSource(
        meta,
        raise_errors=False,
        max_event_size=DEFAULT_MAX_EVENT_SIZE,
        max_body_size=DEFAULT_MAX_BODY_SIZE,
    )
    source.start(t0_ns)
    source.protect(secrets[0] if secrets else None)
    headers = [
        (k, v) for k, v in response.headers.multi_items() if not any(s.found_in(v) for s in secrets)
    ]
    if 300 <= response.status_code < 400:  # its Location as any URL is shown (a signed query...)
        from ._client import shown_location

        headers = shown_location(headers)
    source.set_response(response.status_code, headers, t_headers)
    source.set_encoding(encoding)
    recorder = Recorder(source, response, secrets, decoder, str(request.url))
    register(source.stream)
    return recorder


# -- the transports' logic, for either stack ---------------------------------------------------------
# A stack's module (``_capture_httpx.py``, ``_capture_httpx2.py``) makes the concrete classes: these
# mixins with its own BaseTransport / SyncByteStream bases, which its client checks.


class SyncCapture:
    """``handle_request`` of a capture transport: a streamed chat completion gets a Stream and a
    recorded body (``body``, the stack's); every other request passes through untouched."""

    stack: Stack
    body: Callable[..., Any]
    inner: Any

    def handle_request(self, request: Any) -> Any:
        chat = chat_request(request, self.stack)
        if chat is None:
            return self.inner.handle_request(request)
        t0_ns = time.perf_counter_ns()
        response = self.inner.handle_request(request)
        recorder = _start(request, t0_ns, response, *chat)
        if recorder is not None:
            response.stream = self.body(response.stream, recorder, self.stack, response)
        return response

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {type(self.inner).__name__}>"


class AsyncCapture:
    """The async twin of :class:`SyncCapture` (``handle_async_request``)."""

    stack: Stack
    body: Callable[..., Any]
    inner: Any

    async def handle_async_request(self, request: Any) -> Any:
        chat = chat_request(request, self.stack)
        if chat is None:
            return await self.inner.handle_async_request(request)
        t0_ns = time.perf_counter_ns()
        response = await self.inner.handle_async_request(request)
        recorder = _start(request, t0_ns, response, *chat)
        if recorder is not None:
            response.stream = self.body(response.stream, recorder, self.stack, response)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {type(self.inner).__name__}>"


def wrap_transports(client: Any, wrap: Callable[[Any], Any]) -> Any:
    """``client`` (an httpx or httpx2 client) with its transports wrapped by ``wrap``."""
    # Both stacks build the default transport and one per proxy (from HTTPS_PROXY & co.) in the
    # client's constructor, and have no public way to wrap them afterwards; passing transport=
    # instead would switch the environment's proxies off. So the built ones are wrapped in place.
    client._transport = wrap(client._transport)
    client._mounts = {
        pattern: None if transport is None else wrap(transport)
        for pattern, transport in client._mounts.items()
    }
    return client
