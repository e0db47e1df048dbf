"""The HTTP client: build the request, talk httpx, map failures to typed errors.

``BaseClient`` holds everything that needs no I/O (configuration, the request, the retry
decision, error mapping); ``Client`` and ``AsyncClient`` are written out in full beside it, the
way httpx writes its twins. Both accept an ``httpx.Client`` / ``httpx.AsyncClient`` of the user's
(proxies, auth, transports stay httpx's), and never close a client they did not create.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import random
import socket
import ssl
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from ._core.errors import (
    APIError,
    ConfigurationError,
    ConnectionFailed,
    ConnectionLost,
    ConnectTimeout,
    FirstByteTimeout,
    MissingAPIKeyError,
    NitoError,
    RateLimitError,
    ServerError,
    StreamError,
    StreamTimeoutError,
    TransportError,
    not_event_stream_error,
)
from ._core.request import as_messages
from ._stream import AsyncStream, Stream
from ._stream_base import StreamBase
from ._transport import arrival_clock, stamping_transport

__all__ = ["AsyncClient", "Client", "Timeout", "as_messages", "check_request"]

DEFAULT_BASE_URL = "https://api.trynito.ai/v1"
_MAX_ERROR_BODY = 64 * 1024
_RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: The default limit of one SSE event's bytes: far above any chunk a gateway sends (a whole
#: answer in one chunk included), far below what would exhaust a notebook's memory.
DEFAULT_MAX_EVENT_SIZE = 64 * 1024 * 1024


@dataclass(frozen=True)
class Timeout:
    """Seconds to wait: to connect, for the response to start, and between two reads of the body.

    ``first_byte`` is long by default because a reasoning model may think for minutes before its
    headers; ``between_chunks`` catches a stream that stalls after it started (keep-alive comments
    count as data, so a thinking model that sends them never trips it).
    """

    connect: float = 10.0
    first_byte: float = 300.0
    between_chunks: float = 120.0
    write: float = 30.0

    @classmethod
    def of(cls, value: Timeout | float | dict[str, float] | None) -> Timeout:
        if value is None:
            return cls()
        if isinstance(value, Timeout):
            return value
        if isinstance(value, (int, float)):
            return cls(float(value), float(value), float(value), float(value))
        if isinstance(value, dict):
            return cls(**value)
        raise ConfigurationError(
            f"timeout must be seconds, a dict or nito_nb.Timeout, not {type(value).__name__}"
        )

    def httpx(self) -> httpx.Timeout:
        # httpx has one read timeout; it starts as first_byte and is switched to between_chunks
        # once the headers are in (see _between_chunks).
        return httpx.Timeout(connect=self.connect, read=self.first_byte, write=self.write, pool=self.connect)


def _between_chunks(response: httpx.Response, seconds: float) -> None:
    """Use the between-chunks timeout for the body's reads.

    httpcore reads the request's ``timeout`` extension when the body iteration starts, so swapping
    it after the headers arrived changes the read timeout of the body only. Measured by the
    sim/stall tests (a first-byte timeout longer than the stall, a between-chunks one shorter).
    """
    timeouts = dict(response.request.extensions.get("timeout", {}))
    timeouts["read"] = seconds
    response.request.extensions["timeout"] = timeouts


# -- the embedded simulator: passed in, never imported here ------------------------------------

#: Starts the embedded simulator if needed and returns its base URL. The package root registers it
#: (``nito_nb/__init__.py``): the client sits below the simulator and never imports it.
_simulator: Callable[[], str] | None = None


def register_simulator(start: Callable[[], str] | None) -> None:
    """Where ``sim/...`` models without a base URL are sent: ``start()`` returns a base URL."""
    global _simulator
    _simulator = start


# -- checking a request before it is sent -----------------------------------------------------

#: Names that are not body fields: a parameter of that name would clash with how the call is made.
_NOT_PARAMS = {
    "model": "the model is chosen with model=... (in %%nito: -m MODEL), not as a parameter",
    "messages": "the messages are the prompt (the first argument, or the %%nito cell), not a parameter",
    "stream": "nito_nb always streams: leave stream out",
    "api_key": "the API key is not a body field: it comes from NITO_API_KEY or api_key=...",
    "base_url": "the base URL is not a body field: use base_url=... or NITO_BASE_URL",
    "timeout": "the timeout is not a body field: use timeout=... (in %%nito: %config Nito.timeout)",
    "raise_errors": "raise_errors is not a body field",
}
#: Documented fields with a domain (OpenAI's chat completions reference): a value outside it is a
#: mistake to report here, in one line, rather than an HTTP 400 from the gateway or, worse, a
#: request sent with a meaning the user did not intend.
_NUMBERS = {  # name: (lowest, highest); None is no bound (providers differ above 0)
    "temperature": (0.0, None),
    "top_p": (0.0, 1.0),
    "presence_penalty": (None, None),
    "frequency_penalty": (None, None),
}
_COUNTS = ("max_tokens", "max_completion_tokens", "n")  # whole numbers >= 1
_OBJECTS = ("response_format", "reasoning", "stream_options", "metadata", "logit_bias", "sim")
_LISTS = ("tools",)


def check_request(messages: list[dict[str, Any]], params: dict[str, Any]) -> None:
    """Refuse, before anything is sent, a request that cannot mean what the caller wants.

    The one check of a request body, used by ``Client``/``AsyncClient`` and by ``%%nito`` (which
    turns the error into a one-line UsageError): parameters named like a call argument, documented
    fields of the wrong type or out of range, and anything JSON cannot carry (NaN and infinities,
    lone surrogates such as ``"\\udcff"``, objects JSON does not know). Raises ConfigurationError.
    """
    for name, value in params.items():
        if name in _NOT_PARAMS:  # the value is not shown: an api_key given here is a secret
            raise ConfigurationError(f"{name}: {_NOT_PARAMS[name]}.")
        if value is None:
            continue
        if name in _NUMBERS:
            low, high = _NUMBERS[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigurationError(f"{name} must be a number, not {_shown(value)}.")
            if not math.isfinite(value) or (low is not None and value < low) or (high is not None and value > high):
                if low is None:
                    domain = "a finite number"
                else:
                    domain = f"a number from {low:g}" + (f" to {high:g}" if high is not None else "")
                raise ConfigurationError(f"{name} must be {domain}, not {_shown(value)}.")
        elif name in _COUNTS and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigurationError(f"{name} must be a whole number of at least 1, not {_shown(value)}.")
        elif name in _OBJECTS and not isinstance(value, dict):
            raise ConfigurationError(f"{name} must be an object (a dict), not {_shown(value)}.")
        elif name in _LISTS and not isinstance(value, (list, tuple)):
            raise ConfigurationError(f"{name} must be a list, not {_shown(value)}.")
    _check_json(messages, "messages")
    for name, value in params.items():
        _check_json(value, name)


def _check_json(value: Any, where: str) -> None:
    """What httpx's strict JSON encoding (no NaN, UTF-8) would refuse, named by its place."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")  # C speed: a long prompt is not scanned in Python
        except UnicodeEncodeError as exc:
            bad = exc.start
            raise ConfigurationError(
                f"{where} holds a lone surrogate {value[bad]!r} at character {bad} (text decoded with "
                "errors='surrogateescape', or cut inside a pair), which UTF-8 cannot carry: fix the "
                "text, e.g. text.encode('utf-8', 'replace').decode('utf-8')."
            ) from None
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError(f"{where} is {value!r}: JSON carries only finite numbers.")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigurationError(f"{where} has a key {key!r}: JSON object keys are strings.")
            _check_json(key, f"{where} key")
            _check_json(item, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_json(item, f"{where}[{index}]")
    elif not (value is None or isinstance(value, (bool, int))):
        raise ConfigurationError(
            f"{where} is a {type(value).__name__}, which JSON cannot carry: give strings, numbers, "
            "booleans, None, lists and dicts."
        )


def _shown(value: Any) -> str:
    text = repr(value)
    return (text[:60] + "…") if len(text) > 60 else text


def transport_exception(exc: BaseException, stream: StreamBase) -> NitoError | None:
    """The typed error for an httpx failure during the body, or None if it is not one."""
    if isinstance(exc, StreamError) and exc.stream is stream:  # already typed by the Stream
        return exc
    arrived = f"What arrived ({stream.n_chunks} chunks) is kept in .stream."
    if isinstance(exc, httpx.ReadTimeout):
        return StreamTimeoutError(
            f"No data arrived for longer than the between-chunks timeout. {arrived} "
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
        return ConnectionLost(f"The stream failed: {type(exc).__name__}: {exc}. {arrived}", stream=stream)
    return None


def _max_event_size(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f"max_event_size must be a number of bytes (an int >= 1), got {value!r}; "
            f"the default is {DEFAULT_MAX_EVENT_SIZE:,} (64 MiB)."
        )
    return value


def is_nito(url: str) -> bool:
    """True for Nito's own gateway, the only one that needs a key: an OpenAI-compatible server of
    one's own (vLLM, Ollama, llama.cpp, ``python -m nito_nb.sim``) may need none."""
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    return host == "trynito.ai" or host.endswith(".trynito.ai")


def checked_key(key: Any, source: str) -> str:
    """``key`` if it can go in an ``Authorization`` header as it is, else a ConfigurationError
    that says what is wrong with it and never shows it (nor any part of it).

    httpx would otherwise print the whole header in its error (``Illegal header value b'Bearer
    sk-...\\n'``), or fail with a bare UnicodeEncodeError.
    """
    if not isinstance(key, str):
        raise ConfigurationError(f"{source} must be a string, not {type(key).__name__}")
    if key.endswith(("\n", "\r")):
        problem = "ends with a newline (as when it is read from a file)"
    elif key != key.strip():
        problem = "starts or ends with whitespace"
    elif any(char.isspace() for char in key):
        problem = "contains whitespace"
    elif not key.isascii():
        problem = "contains a non-ASCII character (a typographic quote, dash or space from copying it?)"
    elif not key.isprintable():
        problem = "contains a control character"
    else:
        return key
    raise ConfigurationError(
        f"The API key from {source} {problem}: set it again with the key's characters only. "
        "(The key is not shown.)"
    )


@dataclass(frozen=True)
class Route:
    """How a Stream's request was made: :meth:`Stream.reply` sends the next turn the same way."""

    client: BaseClient
    base_url: str | None  # None: the embedded simulator (a sim/ model and no base URL)
    key: str | None = field(repr=False)
    timeout: Any = None  # the call's timeout= (None: the client's)
    max_event_size: int | None = None  # the call's max_event_size= (None: the client's)

    def options(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """``stream()`` keywords for the next turn. A base URL other than this one never gets this
        route's key (the client then finds the key as for any call)."""
        other = overrides.get("base_url")
        elsewhere = other is not None and str(other).rstrip("/") != self.base_url
        return {"base_url": self.base_url, "api_key": None if elsewhere else self.key, "timeout": self.timeout,
                "max_event_size": self.max_event_size}


class BaseClient:
    """Configuration, request building, retries and error mapping, with no I/O."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: Timeout | float | dict[str, float] | None = None,
        max_retries: int = 2,
        max_retry_wait: float = 30.0,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    ) -> None:
        self._api_key = api_key
        self._base_url = base_url
        self.timeout = Timeout.of(timeout)
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        #: Bytes one SSE event may take before its stream stops with EventTooLargeError.
        self.max_event_size = _max_event_size(max_event_size)

    @property
    def base_url(self) -> str:
        return (self._base_url or os.environ.get("NITO_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")

    def __repr__(self) -> str:
        key = "set" if (self._api_key or os.environ.get("NITO_API_KEY")) else "unset"
        return f"<{type(self).__name__} base_url={self.base_url!r} api_key={key}>"

    def _event_limit(self, max_event_size: int | None) -> int:
        """This call's limit on one event's bytes: its own, else the client's."""
        return self.max_event_size if max_event_size is None else _max_event_size(max_event_size)

    def _embedded(self, model: str, base_url: str | None) -> bool:
        """``sim/`` models go to the embedded simulator unless a base URL was given in code (to
        this call or to the client)."""
        return model.startswith("sim/") and not (base_url or self._base_url)

    def _endpoint(self, model: str, base_url: str | None) -> str:
        """The base URL of a call."""
        if self._embedded(model, base_url):
            if _simulator is None:
                raise ConfigurationError(
                    f"{model!r} runs on the embedded simulator, which is not available here: "
                    "import nito_nb (it registers it), or pass base_url=... of a running one."
                )
            return _simulator().rstrip("/")
        url = (base_url or self._base_url or os.environ.get("NITO_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"base_url must start with http:// or https://, got {url!r}")
        return url

    def _key(self, api_key: str | None) -> str | None:
        """The key of a call (the argument, else the client's, else ``NITO_API_KEY``), checked."""
        if api_key:
            return checked_key(api_key, "the api_key argument")
        if self._api_key:
            return checked_key(self._api_key, "the client's api_key")
        key = os.environ.get("NITO_API_KEY")
        return checked_key(key, "NITO_API_KEY") if key else None

    def _remember(self, stream: StreamBase, model: str, base_url: str | None, key: str | None, timeout: Any,
                  max_event_size: int | None = None) -> None:
        """Keep on the Stream how it was made (for reply()) and the key it carried (redacted from
        whatever the gateway sends back)."""
        embedded = self._embedded(model, base_url)
        stream.set_route(Route(self, None if embedded else stream.request["base_url"], key, timeout, max_event_size))
        stream.protect(key)

    def _build(
        self,
        prompt_or_messages: Any,
        model: str | None,
        api_key: str | None,
        base_url: str | None,
        params: dict[str, Any],
    ) -> tuple[str, dict[str, str], dict[str, Any], dict[str, Any], str | None]:
        """(url, headers, JSON body, request metadata for the log, key) of one call."""
        if not model or not isinstance(model, str):
            raise ConfigurationError("model is required, e.g. model='sim/chat' or model='z-ai/glm-5.2'")
        messages = as_messages(prompt_or_messages)
        url = self._endpoint(model, base_url)
        key: str | None = None
        if not self._embedded(model, base_url):
            key = self._key(api_key)
            if not key and is_nito(url):  # only Nito's own gateway needs one
                raise MissingAPIKeyError(
                    "No API key: set the NITO_API_KEY environment variable or pass api_key=... "
                    "(models named sim/... run on the embedded simulator and need none)."
                )
        params = {k: v for k, v in params.items() if v is not None}
        check_request(messages, params)
        body: dict[str, Any] = {"model": model, "messages": messages, **params, "stream": True}
        body["stream_options"] = {"include_usage": True, **(params.get("stream_options") or {})}
        headers = {"Accept": "text/event-stream", "Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        meta = {"model": model, "messages": messages, "params": params, "base_url": url}
        return f"{url}/chat/completions", headers, body, meta, key

    def _models_request(self, base_url: str | None, api_key: str | None) -> tuple[str, dict[str, str], str | None]:
        """(base URL, headers, key) of a ``GET /models``."""
        key = self._key(api_key)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return (base_url or self.base_url).rstrip("/"), headers, key

    def _retry_delay(self, attempt: int, error: NitoError) -> float | None:
        """Seconds to wait before trying again, or None to give up. Only errors that happened
        before the first byte of the body come here."""
        if attempt >= self.max_retries:
            return None
        if isinstance(error, RateLimitError) and error.retry_after is not None:
            return error.retry_after if error.retry_after <= self.max_retry_wait else None
        retryable = isinstance(error, (ConnectionFailed, RateLimitError)) or (
            isinstance(error, (APIError, ServerError)) and error.status_code in _RETRY_STATUSES
        )
        if not retryable or isinstance(error, ConnectTimeout):
            return None
        return min(self.max_retry_wait, 0.5 * 2**attempt) * (0.75 + random.random() / 2)

    @staticmethod
    def _http_error(stream: StreamBase, response: httpx.Response, body: bytes, key: str | None) -> APIError:
        if not stream.protected:  # a bare Stream (models()): the key it sent is redacted too
            stream.protect(key)
        return stream.fail_http(response.status_code, response.headers, body, time.perf_counter_ns())

    def _not_event_stream(self, stream: StreamBase, response: httpx.Response, body: bytes, key: str | None) -> NitoError:
        error = self._http_error(stream, response, body, key)  # the Stream redacts the body
        base_url = stream.request.get("base_url") or self.base_url  # this call's, not the default
        return stream.fail(not_event_stream_error(response.status_code, response.headers, error.body, base_url))

    @staticmethod
    def _connect_error(exc: Exception, url: str, stream: StreamBase) -> NitoError:
        if isinstance(exc, httpx.ConnectTimeout):
            error: NitoError = ConnectTimeout(
                f"Connecting to {url} timed out. Check the network and NITO_BASE_URL, or raise timeout."
            )
        elif isinstance(exc, httpx.TimeoutException):
            error = FirstByteTimeout(
                f"{url} accepted the request but sent no response within the first-byte timeout. "
                "Retry, or raise timeout={'first_byte': ...}."
            )
        else:
            error = ConnectionFailed(
                f"Could not reach {url} ({type(exc).__name__}: {exc}). Check the network, "
                "NITO_BASE_URL and any proxy settings."
            )
        return stream.fail(error)

    @staticmethod
    def _models_stream(url: str, key: str | None) -> Stream:
        """A bare Stream for a ``GET /models`` failure: it carries the error, with the key redacted."""
        stream = Stream({"base_url": url})
        stream.protect(key)
        return stream

    def _model_list(self, url: str, response: httpx.Response, key: str | None) -> list[dict[str, Any]]:
        """The models of a read ``GET /models`` response, or its typed error."""
        if response.status_code >= 400:
            raise self._http_error(self._models_stream(url, key), response, response.content, key)
        try:
            value = response.json()
        except ValueError:
            value = None
        models = value.get("data") if isinstance(value, dict) else value
        if isinstance(models, list):
            return [m for m in models if isinstance(m, dict)]
        text = response.content[:_MAX_ERROR_BODY].decode("utf-8", "replace")
        content_type = response.headers.get("content-type") or "no content type"
        stream = self._models_stream(url, key)
        raise stream.fail(TransportError(
            f"GET {url}/models answered {response.status_code} with {content_type}, not a JSON "
            f"list of models (body starts {text[:120]!r}). Check the base URL: it should end "
            "with the API's version, such as /v1."
        ))

    @staticmethod
    def _is_event_stream(response: httpx.Response) -> bool:
        content_type = response.headers.get("content-type", "")
        # Some servers send no content type on a stream; anything named otherwise is not one.
        return not content_type or "text/event-stream" in content_type.lower()


class Client(BaseClient):
    """A synchronous client. ``Client(api_key=..., base_url=..., timeout=...)``, or
    ``Client(http_client=httpx.Client(...))`` to bring your own httpx setup."""

    def __init__(self, api_key: str | None = None, base_url: str | None = None, timeout: Any = None, *,
                 http_client: httpx.Client | None = None, max_retries: int = 2, max_retry_wait: float = 30.0,
                 max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        super().__init__(api_key, base_url, timeout, max_retries, max_retry_wait, max_event_size)
        self._own_http = http_client is None
        self._http = http_client or httpx.Client(timeout=self.timeout.httpx())

    def stream(self, prompt_or_messages: Any, *, model: str, api_key: str | None = None,
               base_url: str | None = None, timeout: Any = None, raise_errors: bool = True,
               max_event_size: int | None = None, **params: Any) -> Stream:
        """Send the request and return its Stream once the response has started.

        HTTP errors raise here (typed, with ``.stream`` holding the status, headers and body);
        the body is read as the Stream is iterated.
        """
        url, headers, body, meta, key = self._build(prompt_or_messages, model, api_key, base_url, params)
        limits = Timeout.of(timeout) if timeout is not None else self.timeout
        stream = Stream(
            meta,
            raise_errors=raise_errors,
            max_event_size=self._event_limit(max_event_size),
            transport_errors=transport_exception,
        )
        self._remember(stream, model, base_url, key, timeout, max_event_size)
        try:
            for attempt in range(self.max_retries + 1):
                # One clock per Stream: t0 is the first attempt's send, so every timing includes
                # the retries (``attempts`` says how many requests were sent).
                if attempt:
                    stream.new_attempt()
                else:
                    stream.log.t0_ns = time.perf_counter_ns()
                request = self._http.build_request("POST", url, json=body, headers=headers, timeout=limits.httpx())
                try:
                    response = self._http.send(request, stream=True)
                except httpx.HTTPError as exc:
                    error: NitoError = self._connect_error(exc, url, stream)
                else:
                    if response.status_code < 400 and self._is_event_stream(response):
                        stream.set_response(response.status_code, response.headers, time.perf_counter_ns())
                        _between_chunks(response, limits.between_chunks)
                        # Read from now on, whatever the caller does: arrival times are the
                        # moment the bytes came, not the moment someone iterated.
                        stream.read_body(response.iter_bytes(), response.close, functools.partial(_abort, response))
                        return stream
                    try:
                        raw = _read_capped(response.iter_bytes())
                    finally:
                        response.close()
                    if response.status_code >= 400:
                        error = self._http_error(stream, response, raw, key)
                    else:
                        error = self._not_event_stream(stream, response, raw, key)
                delay = self._retry_delay(attempt, error)
                if delay is None:
                    raise error
                time.sleep(delay)
        except KeyboardInterrupt as interrupt:
            # Stopped before the response started (connecting, waiting for the headers, or before
            # a retry): the Stream records the stop and travels with the interrupt, so that the
            # magic can still keep the request in _nito. The interrupt itself goes on.
            stream.end(status="stopped")
            interrupt.stream = stream  # type: ignore[attr-defined]
            raise
        raise AssertionError("unreachable")

    def models(self, *, base_url: str | None = None, api_key: str | None = None) -> list[dict[str, Any]]:
        """The gateway's model list (``GET /models``). Failures raise typed errors, as for a
        stream: ``ConnectionFailed`` (and its timeouts), an ``APIError``, or a ``TransportError``
        for an answer that is not the JSON list."""
        url, headers, key = self._models_request(base_url, api_key)
        try:
            response = self._http.get(f"{url}/models", headers=headers, timeout=self.timeout.httpx())
        except httpx.HTTPError as exc:
            raise self._connect_error(exc, url, self._models_stream(url, key)) from None
        return self._model_list(url, response, key)

    def close(self) -> None:
        if self._own_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class AsyncClient(BaseClient):
    """The async twin of :class:`Client`."""

    def __init__(self, api_key: str | None = None, base_url: str | None = None, timeout: Any = None, *,
                 http_client: httpx.AsyncClient | None = None, max_retries: int = 2,
                 max_retry_wait: float = 30.0, max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        super().__init__(api_key, base_url, timeout, max_retries, max_retry_wait, max_event_size)
        # Without an httpx client of the user's, each stream gets its own, closed with the stream:
        # an httpx.AsyncClient belongs to the event loop it first ran on, and Jupyter, asyncio.run
        # and worker threads each bring their own loop. A shared SSL context keeps that cheap.
        self._http = http_client

    def _new_http(self) -> httpx.AsyncClient:  # socket reads timed as they arrive (_transport.py)
        return httpx.AsyncClient(timeout=self.timeout.httpx(), verify=_ssl_context(), transport=stamping_transport(_ssl_context()))

    def stream(self, prompt_or_messages: Any, *, model: str, api_key: str | None = None,
               base_url: str | None = None, timeout: Any = None, raise_errors: bool = True,
               max_event_size: int | None = None, **params: Any) -> AsyncStream:
        """An AsyncStream; it connects on first ``async for`` / ``await`` / ``async with``.
        Configuration errors raise here; HTTP errors raise when it connects."""
        url, headers, body, meta, key = self._build(prompt_or_messages, model, api_key, base_url, params)
        limits = Timeout.of(timeout) if timeout is not None else self.timeout
        stream = AsyncStream(
            meta,
            raise_errors=raise_errors,
            max_event_size=self._event_limit(max_event_size),
            transport_errors=transport_exception,
        )
        self._remember(stream, model, base_url, key, timeout, max_event_size)

        async def open_stream(stream: AsyncStream) -> None:
            stream.set_opener(None)
            http = self._http or self._new_http()
            try:
                await connect(stream, http)
            except BaseException:
                if http is not self._http:
                    await http.aclose()
                raise
            if http is not self._http:
                stream.close_also(http.aclose)

        async def connect(stream: AsyncStream, http: httpx.AsyncClient) -> None:
            for attempt in range(self.max_retries + 1):
                if attempt:  # one clock per Stream, as in Client.stream
                    stream.new_attempt()
                else:
                    stream.log.t0_ns = time.perf_counter_ns()
                request = http.build_request("POST", url, json=body, headers=headers, timeout=limits.httpx())
                try:
                    response = await http.send(request, stream=True)
                except httpx.HTTPError as exc:
                    error: NitoError = self._connect_error(exc, url, stream)
                else:
                    if response.status_code < 400 and self._is_event_stream(response):
                        stream.set_response(response.status_code, response.headers, (arrival := arrival_clock(response))())
                        _between_chunks(response, limits.between_chunks)
                        stream.set_body(response.aiter_bytes(), response.aclose, arrival)  # the socket reads' times
                        return
                    try:
                        raw = await _aread_capped(response.aiter_bytes())
                    finally:
                        await response.aclose()
                    if response.status_code >= 400:
                        error = self._http_error(stream, response, raw, key)
                    else:
                        error = self._not_event_stream(stream, response, raw, key)
                delay = self._retry_delay(attempt, error)
                if delay is None:
                    raise error
                await asyncio.sleep(delay)

        stream.set_opener(open_stream)
        return stream

    async def models(self, *, base_url: str | None = None, api_key: str | None = None) -> list[dict[str, Any]]:
        url, headers, key = self._models_request(base_url, api_key)
        http = self._http or self._new_http()
        try:
            response = await http.get(f"{url}/models", headers=headers)
        except httpx.HTTPError as exc:
            raise self._connect_error(exc, url, self._models_stream(url, key)) from None
        finally:
            if http is not self._http:
                await http.aclose()
        return self._model_list(url, response, key)

    async def aclose(self) -> None:
        """Nothing to release: each stream closes its own connection (a client you passed in
        stays yours to close)."""

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


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


def _read_capped(reads: Any) -> bytes:
    body = bytearray()
    for data in reads:
        body += data
        if len(body) > _MAX_ERROR_BODY:
            break
    return bytes(body[:_MAX_ERROR_BODY])


async def _aread_capped(reads: Any) -> bytes:
    body = bytearray()
    async for data in reads:
        body += data
        if len(body) > _MAX_ERROR_BODY:
            break
    return bytes(body[:_MAX_ERROR_BODY])
