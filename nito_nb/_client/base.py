"""``BaseClient``: what ``Client`` and ``AsyncClient`` share, with no I/O (configuration, the
request of a call, the retry decision, which base URL an error names); and the ``Route`` a
Stream keeps for ``reply()``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import httpx

from .._core.attachments import Attachment, with_attachments
from .._core.counts import whole
from .._core.encoding import ACCEPT_ENCODING
from .._core.errors import ConfigurationError, MissingAPIKeyError, NitoError, Secret, redact
from .._core.request import as_messages
from .._stream_source import SourceBase
from .._structured import Schema, schema_of
from .config import (
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_EVENT_SIZE,
    Timeout,
    check_max_body_size,
    check_max_event_size,
)
from .endpoint import (
    api_url,
    base_url_of,
    checked_base_url,
    endpoint,
    find_key,
    is_embedded,
    is_nito,
    shown_url,
    target,
)
from .failures import not_event_stream
from .logs import protect_in_logs
from .request_check import check_keywords, check_request, keyword_options
from .retry import retry_delay

__all__ = ["BaseClient", "Route", "check_call", "one_model"]


@dataclass(frozen=True)
class Route:
    """How a Stream's request was made: :meth:`Stream.reply` sends the next turn the same way."""

    client: BaseClient
    base_url: str | None  # None: the embedded simulator (a sim/ model and no base URL)
    key: str | None = field(repr=False)
    timeout: Any = None  # the call's timeout= (None: the client's)
    max_event_size: int | None = None  # the call's max_event_size= (None: the client's)
    max_body_size: int | None = None  # the call's max_body_size= (None: the client's)

    def __repr__(self) -> str:
        # The base URL as shown everywhere (a password or a ?api-key= in it redacted), never the key.
        shown = None if self.base_url is None else shown_url(self.base_url)
        return f"Route(client={self.client!r}, base_url={shown!r}, timeout={self.timeout!r})"

    def options(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """``stream()`` keywords for the next turn. A base URL other than this one never gets this
        route's key (the client then finds the key as for any call)."""
        other = overrides.get("base_url")
        elsewhere = other is not None and str(other).rstrip("/") != self.base_url
        return {
            "base_url": self.base_url,
            "api_key": None if elsewhere else self.key,
            "timeout": self.timeout,
            "max_event_size": self.max_event_size,
            "max_body_size": self.max_body_size,
        }


class BaseClient:
    """Configuration, request building, the retry decision and error mapping, with no I/O."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: Timeout | float | dict[str, float] | None = None,
        max_retries: int = 2,
        max_retry_wait: float = 30.0,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    ) -> None:
        self._api_key = api_key
        # Checked now, so that a wrong one is refused where it was given (NITO_BASE_URL is read,
        # and checked, per call).
        self._base_url = (
            None if base_url is None or base_url == "" else checked_base_url(base_url, "base_url")
        )
        self.timeout = Timeout.of(timeout)
        max_retries = whole("max_retries", max_retries, at_least=0)
        if (
            isinstance(max_retry_wait, bool)
            or not isinstance(max_retry_wait, int | float)
            or not max_retry_wait >= 0
        ):
            raise ConfigurationError(
                f"max_retry_wait is seconds, a number >= 0, not {max_retry_wait!r}"
            )
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self._last_secret: Secret | None = None  # _secret's
        #: Bytes one SSE event may take before its stream stops with EventTooLargeError.
        self.max_event_size = check_max_event_size(max_event_size)
        #: Bytes a body may decode to before its stream stops with BodyTooLargeError.
        self.max_body_size = check_max_body_size(max_body_size)

    @property
    def base_url(self) -> str:
        return base_url_of(self._base_url)

    def __repr__(self) -> str:
        key = "set" if (self._api_key or os.environ.get("NITO_API_KEY")) else "unset"
        try:
            url = shown_url(self.base_url)
        except ConfigurationError:  # a bad NITO_BASE_URL: a repr says so rather than raise
            url = f"invalid NITO_BASE_URL {shown_url(os.environ.get('NITO_BASE_URL', ''))!r}"
        return f"<{type(self).__name__} base_url={url!r} api_key={key}>"

    def _event_limit(self, max_event_size: int | None) -> int:
        """This call's limit on one event's bytes: its own, else the client's."""
        return (
            self.max_event_size if max_event_size is None else check_max_event_size(max_event_size)
        )

    def _body_limit(self, max_body_size: int | None) -> int:
        """This call's limit on the body's decoded bytes: its own, else the client's."""
        return self.max_body_size if max_body_size is None else check_max_body_size(max_body_size)

    def _call_url(self, base_url: Any) -> Any:
        """The call's base URL, else the client's: not ``base_url or ...``, which would pass over
        a falsy one of a wrong type (``0``, ``[]``) instead of refusing it."""
        return self._base_url if base_url is None or base_url == "" else base_url

    def _embedded(self, model: str, base_url: str | None) -> bool:
        """``sim/`` models go to the embedded simulator unless a base URL was given in code (to
        this call or to the client)."""
        return is_embedded(model, self._call_url(base_url))

    def _endpoint(self, model: str, base_url: str | None) -> str:
        """The base URL of a call, checked."""
        return endpoint(model, self._call_url(base_url))

    def _key(self, api_key: str | None) -> str | None:
        """The key of a call (the argument, else the client's, else ``NITO_API_KEY``), checked."""
        return find_key(api_key, self._api_key)

    def _remember(
        self,
        source: SourceBase,
        model: str,
        base_url: str | None,
        key: str | None,
        timeout: Any,
        max_event_size: int | None = None,
        max_body_size: int | None = None,
    ) -> None:
        """Keep on the Stream how it was made (for reply()) and the key it carried (redacted from
        whatever the gateway sends back). The embedded simulator's token is not kept for reply():
        the next turn finds it again, from the simulator that then serves."""
        embedded = self._embedded(model, base_url)
        # as given: the request shows it redacted
        route_url = None if embedded else self._endpoint(model, base_url)
        source.set_route(
            Route(
                self, route_url, None if embedded else key, timeout, max_event_size, max_body_size
            )
        )
        secret = self._secret(key)
        source.protect(secret)
        # httpcore's DEBUG log shows response headers: an echo of the key too
        protect_in_logs(secret)

    def _secret(self, key: str | None) -> Secret | None:
        """``Secret.of(key)``, made once for the key that a client's calls keep sending (a run's):
        making one (its forms, the pattern of its escapes) took 20-28 µs, twice per request, as
        much as the rest of building the request. A Secret never changes, so the Streams share it
        (and the log filter holds it while the client lives)."""
        cached = self._last_secret
        if cached is not None and cached.value == key:
            return cached
        secret = self._last_secret = Secret.of(key)
        return secret

    @staticmethod
    def _with_schema(schema: Any, params: dict[str, Any]) -> tuple[Schema | None, dict[str, Any]]:
        """A call's ``schema=`` (a pydantic model or a JSON-schema dict) and its parameters with the
        ``response_format`` that asks for it (docs/STRUCTURED.md)."""
        if schema is None:
            return None, params
        structured = schema_of(schema)
        if params.get("response_format") is not None:
            raise ConfigurationError(
                "pass schema= or response_format=, not both (schema= sends its own "
                "response_format of type json_schema)"
            )
        return structured, {**params, "response_format": structured.response_format()}

    def _build(
        self,
        prompt_or_messages: Any,
        model: str | None,
        api_key: str | None,
        base_url: str | None,
        params: dict[str, Any],
        attachments: list[Attachment] | None = None,
    ) -> tuple[str, dict[str, str], dict[str, Any], dict[str, Any], str | None]:
        """(url, headers, JSON body, request metadata for the log, key) of one call. ``attachments``
        (``images=``) go with the last user message; the metadata keeps only their descriptors."""
        if model is not None and not isinstance(model, str):
            raise ConfigurationError(one_model(model, "stream()"))
        if not model:
            raise ConfigurationError(
                "model is required, e.g. model='sim/chat' or model='z-ai/glm-5.2'"
            )
        messages = as_messages(prompt_or_messages)
        url, simulator = target(model, self._call_url(base_url))
        key: str | None
        if simulator is not None:
            # The simulator's own token, never the gateway's key (the Stream redacts it as a key).
            key = simulator.token
        else:
            key = self._key(api_key)
            if not key and is_nito(url):  # only Nito's own gateway needs one
                raise MissingAPIKeyError(
                    "No API key: set the NITO_API_KEY environment variable or pass api_key=... "
                    "(models named sim/... run on the embedded simulator and need none)."
                )
        # Client's or AsyncClient's, whose keywords are the same
        stream = getattr(type(self), "stream", None)
        check_keywords(params, keyword_options(stream) if stream is not None else (), "stream()")
        params = {k: v for k, v in params.items() if v is not None}
        messages, kept = with_attachments(messages, attachments or [])
        params = check_request(kept, params)  # counts as ints: a numpy one is no JSON
        body: dict[str, Any] = {"model": model, "messages": messages, **params, "stream": True}
        body["stream_options"] = {"include_usage": True, **(params.get("stream_options") or {})}
        # Only the codings nito_nb decodes itself, in bounded pieces (_core/encoding.py).
        headers = {
            "Accept": "text/event-stream",
            "Accept-Encoding": ACCEPT_ENCODING,
            "Content-Type": "application/json",
        }
        if key:
            headers["Authorization"] = f"Bearer {key}"
        meta = {"model": model, "messages": kept, "params": params, "base_url": shown_url(url)}
        if key:
            # A key written into the prompt (an f-string) is sent, to the host chosen, but kept
            # nowhere: the request's record (the log, a saved file, a store, reply()'s history)
            # holds the marker, as it does for an echo of it.
            # Parsed again only when the key is there: a copy of every request's messages cost
            # each request of a run a dump and a parse, and its kept Stream 0.9 KiB more.
            written = json.dumps(meta, ensure_ascii=False)
            redacted = redact(written, self._secret(key))
            if redacted != written:
                meta = json.loads(redacted)
        return api_url(url, "/chat/completions"), headers, body, meta, key

    def _models_request(
        self, base_url: str | None, api_key: str | None
    ) -> tuple[str, dict[str, str], str | None]:
        """(base URL, headers, key) of a ``GET /models``."""
        url = base_url_of(self._call_url(base_url))  # checked
        key = self._key(api_key)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return url, headers, key

    def _not_event_stream(
        self, source: SourceBase, response: httpx.Response, body: bytes, key: str | None
    ) -> NitoError:
        """The error of a 2xx answer that is not an event stream, naming this call's base URL."""
        # this call's, not the default
        base_url = source.stream.request.get("base_url") or shown_url(self.base_url)
        return not_event_stream(source, response, body, key, base_url)

    def _retry_delay(self, attempt: int, error: NitoError) -> float | None:
        """Seconds to wait before trying again, or None to give up (``retry.py``'s rule with this
        client's ``max_retries`` and ``max_retry_wait``)."""
        return retry_delay(attempt, error, self.max_retries, self.max_retry_wait)


def one_model(model: Any, call: str, several: str = "") -> str:
    """What ``call`` says of a ``model=`` that is not one model id: it takes one, as a string, and
    where several go (``several``; by default a run's and the magic's ``-m a,b``). A list was
    "model is required" (though one was given), or ChatWidget's unhashable TypeError."""
    shown = repr(model)
    shown = shown if len(shown) <= 60 else shown[:60] + "…"
    several = several or (
        "Several models: nito_nb.run(prompts, model=['sim/chat', 'sim/echo']), "
        "or %%nito -m sim/chat,sim/echo."
    )
    return f"{call} takes one model id, a string such as model='sim/chat', not {shown}. {several}"


def check_call(
    client: BaseClient,
    prompt_or_messages: Any,
    model: str | None,
    api_key: str | None,
    base_url: str | None,
    params: dict[str, Any],
) -> None:
    """Raise the configuration error that ``client``'s call would raise (no model, no key, a bad
    base URL, a body that cannot be right), sending nothing: a Run checks each model once before
    it starts (``_runs/dispatch.py``), by the very rules its calls are built with."""
    client._build(prompt_or_messages, model, api_key, base_url, params)
