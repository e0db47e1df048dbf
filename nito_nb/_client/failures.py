"""What went wrong, as a typed error: httpx's failures, HTTP error responses, a redirect, a body
that is not an event stream, a model list that is not one.

No I/O: these read a response the shells (``clients.py``) have already received, and record the
failure through the Stream's producer (``_stream_source.py``; the Stream redacts the key from
whatever the gateway sent back).
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from .._core.encoding import BadEncoding, UnsupportedEncoding
from .._core.errors import (
    APIError,
    ConnectionFailed,
    ConnectionLost,
    ConnectTimeout,
    FirstByteTimeout,
    NitoError,
    RedirectError,
    StreamError,
    StreamTimeoutError,
    StreamTruncatedError,
    TransportError,
)
from .._core.http_errors import not_event_stream_error
from .._stream_results import StreamResults
from .._stream_source import SourceBase, StreamSource
from .._transport.deadlines import DeadlinePassed
from .endpoint import shown_origin, shown_url

__all__ = [
    "MAX_ERROR_BODY",
    "connect_error",
    "http_error",
    "is_event_stream",
    "model_list",
    "models_stream",
    "not_event_stream",
    "redirect_error",
    "shown_location",
    "transport_exception",
    "unsupported_encoding",
]

#: The most bytes of an error body that are read and kept.
MAX_ERROR_BODY = 64 * 1024


def transport_exception(exc: BaseException, stream: StreamResults) -> NitoError | None:
    """The typed error for an httpx failure during the body, or None if it is not one."""
    if isinstance(exc, StreamError) and exc.stream is stream:  # already typed by the Stream
        return exc
    if isinstance(exc.__cause__, DeadlinePassed):  # one of the call's deadlines, which it names
        return exc.__cause__.error
    arrived = f"What arrived ({stream.n_chunks} chunks) is kept in .stream."
    if isinstance(exc, BadEncoding):
        return StreamTruncatedError(
            f"The body's bytes are not what its Content-Encoding says ({exc}). {arrived} Check the "
            "server, or a proxy that rewrites responses.",
            stream=stream,
        )
    if isinstance(exc, httpx.ReadTimeout):
        return StreamTimeoutError(
            f"No data arrived within the between_chunks timeout of one read. {arrived} "
            "Retry, or raise timeout={'between_chunks': ...}.",
            stream=stream,
        )
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.NetworkError)):
        return ConnectionLost(
            f"The connection broke mid-stream ({type(exc).__name__}: {exc}). {arrived} "
            "Retry; if it keeps happening, check for a proxy that cuts long responses.",
            stream=stream,
        )
    if isinstance(exc, httpx.HTTPError):
        return ConnectionLost(
            f"The stream failed: {type(exc).__name__}: {exc}. {arrived}", stream=stream
        )
    return None


def is_event_stream(response: httpx.Response) -> bool:
    content_type = response.headers.get("content-type", "")
    # Some servers send no content type on a stream; anything named otherwise is not one.
    return not content_type or "text/event-stream" in content_type.lower()


def http_error(
    source: SourceBase, response: httpx.Response, body: bytes, key: str | None
) -> APIError:
    """The typed error of a 3xx, 4xx or 5xx answer: an HTTP error, or a redirect, which is never
    followed."""
    if not source.protected:  # a bare Stream (models()): the key it sent is redacted too
        source.protect(key)
    if 300 <= response.status_code < 400:
        error = redirect_error(
            response.status_code, response.headers.get("location"), str(response.request.url)
        )
        headers = shown_location(response.headers.multi_items())
        return source.fail_http(
            response.status_code, headers, body, time.perf_counter_ns(), error=error
        )
    return source.fail_http(response.status_code, response.headers, body, time.perf_counter_ns())


def redirect_error(
    status_code: int, location: str | None, request_url: str, *, captured: bool = False
) -> RedirectError:
    """The error of a 3xx answer to a request sent to ``request_url``: where it points (``location``,
    resolved against the request's URL), as scheme, host and port only (``shown_origin``: a path
    or query may hold a credential, a signed URL's token). nito_nb's clients never follow one: the
    request would go, with the API key and the prompt, to a host nobody chose. ``captured``: the
    answer of a request that another library sent (capture), which follows it or not by its own
    settings."""
    where = None
    if location and location.strip():
        try:
            target = httpx.URL(request_url).join(location.strip())
        except (httpx.InvalidURL, ValueError):  # what does not parse is shown as no location
            target = None
        if target is not None and target.is_absolute_url:
            where = shown_origin(str(target))
    if where is None:
        said = "a redirect without a usable Location header"
    else:
        said = f"a redirect to {where}"
    if captured:
        what = (
            f"The gateway answered with {said}. Whether it is followed is the client's own setting "
            "(httpx follows only with follow_redirects=True); a followed request is captured as a "
            "Stream of its own."
        )
    else:
        what = (
            f"The gateway answered with {said}; nito_nb does not follow redirects: the API key and "
            "the prompt would go along."
        )
    return RedirectError(what, status_code=status_code, location=where)


def shown_location(headers: Any) -> list[tuple[str, str]]:
    """A redirect's headers (name, value pairs) as its log keeps them: the ``Location`` as
    :func:`shown_url` shows any URL (a credential in its query redacted), since a saved log, a
    store or a frame may be shared."""
    return [
        (name, shown_url(value) if name.lower() == "location" else value) for name, value in headers
    ]


def not_event_stream(
    source: SourceBase, response: httpx.Response, body: bytes, key: str | None, base_url: str
) -> NitoError:
    """A 2xx answer that is not an event stream; ``base_url``: this call's, not the default."""
    error = http_error(source, response, body, key)  # the Stream redacts the body
    return source.fail(
        not_event_stream_error(response.status_code, response.headers, error.body, base_url)
    )


def connect_error(exc: Exception, url: str, source: SourceBase) -> NitoError:
    if isinstance(exc.__cause__, DeadlinePassed):  # a deadline, not a failure to connect
        return source.fail(exc.__cause__.error)
    url = shown_url(url)
    if isinstance(exc, httpx.ConnectTimeout):
        error: NitoError = ConnectTimeout(
            f"Connecting to {url} timed out. Check the network and NITO_BASE_URL, or raise timeout."
        )
    elif isinstance(exc, httpx.TimeoutException):
        error = FirstByteTimeout(
            f"{url} accepted the request but sent nothing within the first_byte timeout of one read. "
            "Retry, or raise timeout={'first_byte': ...}."
        )
    else:
        error = ConnectionFailed(
            f"Could not reach {url} ({type(exc).__name__}: {exc}). Check the network, "
            "NITO_BASE_URL and any proxy settings."
        )
    return source.fail(error)


def unsupported_encoding(source: SourceBase, exc: UnsupportedEncoding) -> NitoError:
    """A response in a content coding that nito_nb did not ask for and does not decode."""
    base_url = source.stream.request.get("base_url") or "the server"
    return source.fail(
        TransportError(
            f"{base_url} answered with Content-Encoding: {exc.coding}, which nito_nb did not ask for and "
            "does not decode (it asks for gzip or deflate). Check the base URL, and any proxy between you "
            "and the gateway that compresses responses."
        )
    )


def models_stream(url: str, key: str | None) -> StreamSource:
    """A bare Stream (and its producer) for a ``GET /models`` failure: it carries the error, with
    the key redacted."""
    source = StreamSource({"base_url": shown_url(url)})
    source.protect(key)
    return source


def model_list(url: str, response: httpx.Response, key: str | None) -> list[dict[str, Any]]:
    """The models of a read ``GET /models`` response, or its typed error."""
    if response.status_code >= 300:  # an HTTP error, or a redirect (never followed)
        raise http_error(models_stream(url, key), response, response.content, key)
    try:
        value = response.json()
    except ValueError:
        value = None
    models = value.get("data") if isinstance(value, dict) else value
    if isinstance(models, list):
        return [m for m in models if isinstance(m, dict)]
    text = response.content[:MAX_ERROR_BODY].decode("utf-8", "replace")
    content_type = response.headers.get("content-type") or "no content type"
    raise models_stream(url, key).fail(
        TransportError(
            f"GET {shown_url(url)}/models answered {response.status_code} with {content_type}, not a JSON "
            f"list of models (body starts {text[:120]!r}). Check the base URL: it should end "
            "with the API's version, such as /v1."
        )
    )
