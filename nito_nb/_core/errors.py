"""The errors nito_nb raises. Every message says what happened and what to do next.

    NitoError
    ├── ConfigurationError        no API key, bad base URL, bad argument
    │   └── MissingAPIKeyError    no API key for a call that needs one
    ├── APIError                  the gateway answered with an HTTP error before streaming
    │   ├── RedirectError         3xx: a redirect, never followed (the key would go along)
    │   ├── BadRequestError       400 (and other 4xx without a class of their own)
    │   ├── AuthenticationError   401 / 403
    │   ├── PaymentRequiredError  402
    │   ├── NotFoundError         404
    │   ├── RateLimitError        429, with .retry_after
    │   └── ServerError           5xx
    ├── TransportError            no usable response
    │   ├── ConnectionFailed      could not connect
    │   ├── ConnectTimeout        connecting took too long
    │   ├── FirstByteTimeout      no complete response headers within the first_byte deadline
    │   └── NotEventStreamError   a 200 that is not text/event-stream
    └── StreamError               the stream started, then did not end well; .stream keeps what arrived
        ├── MidStreamError        the gateway sent an error chunk
        ├── StreamTruncatedError  the body ended without [DONE]
        │   └── ConnectionLost    the connection broke mid-stream
        ├── StreamTimeoutError    no complete event within the between_chunks deadline
        │   └── TotalTimeoutError the call went past its total deadline
        ├── EventTooLargeError    one event grew past max_event_size; reading stopped
        └── BodyTooLargeError     the body decoded past max_body_size, or is a compression bomb

Every error that concerns a request carries ``.stream``: a :class:`~nito_nb.Stream` holding what
arrived (for an HTTP error, the status, headers and body in its log). Messages never contain the
API key or an Authorization header: they are built from the gateway's answer only, and whatever the
gateway echoes of the key is taken out first (:class:`Secret`, :func:`redact`). Nor do they hold a
control character that would act on a terminal (an ANSI escape, a carriage return, a bidi
override): the gateway's words in a message are shown as ``printable`` shows them (``.body`` keeps
the bytes as they came).
"""

from __future__ import annotations

import functools
import json
import operator
import re
import urllib.parse
from typing import TYPE_CHECKING, Any, AnyStr

from .printable import printable
from .sse import ServerSentEvent

if TYPE_CHECKING:
    from .._stream_results import StreamResults

__all__ = [
    "ERROR_LINE_CHARS",
    "APIError",
    "AuthenticationError",
    "BadRequestError",
    "BodyTooLargeError",
    "ConfigurationError",
    "ConnectTimeout",
    "ConnectionFailed",
    "ConnectionLost",
    "EventTooLargeError",
    "FirstByteTimeout",
    "MidStreamError",
    "MissingAPIKeyError",
    "NitoError",
    "NotEventStreamError",
    "NotFoundError",
    "PaymentRequiredError",
    "RateLimitError",
    "RedirectError",
    "ServerError",
    "StreamError",
    "StreamTimeoutError",
    "StreamTruncatedError",
    "TotalTimeoutError",
    "TransportError",
    "has_its_line",
    "one_line",
    "shown_as_line",
]


#: What a key echoed by the gateway becomes.
REDACTED = "[redacted]"
#: Shorter keys are not redacted: a local server's placeholder ("EMPTY", "none", "ollama") is no
#: secret, and replacing such a word everywhere would corrupt answers.
MIN_SECRET_LENGTH = 8


class Secret:
    """An API key and every form in which a gateway may echo it back. Never shows itself.

    The forms: the key as it is (also inside ``Bearer <key>``), JSON-escaped (``\\/`` for ``/``,
    as some JSON encoders write it, and ``\\"``/``\\\\``) and percent-encoded (a key echoed in a
    URL). Build one with :meth:`of`, which gives None for no key or one too short to be a secret.
    """

    __slots__ = (
        "__weakref__",
        "_byte_forms",
        "_escapes",
        "_firsts",
        "_forms",
        "value",
    )  # weakly held by the log filter

    def __init__(self, value: str) -> None:
        self.value = value
        forms = {
            value,
            value.replace("/", "\\/"),
            json.dumps(value)[1:-1],
            urllib.parse.quote(value, safe=""),
        }
        # Longest first: a form that contains another is replaced whole.
        self._forms = tuple(sorted(forms, key=len, reverse=True))
        self._byte_forms = tuple(form.encode("utf-8") for form in self._forms)
        #: The characters a form starts with (one, for most keys): text without any of them can
        #: neither hold the key nor start it, the common case that must cost next to nothing.
        self._firsts = "".join(sorted({form[0] for form in self._forms}))
        # JSON escapes that spell a character of a form (\u0053 for "S", \/ for "/"): a key
        # written with them is found only once the JSON is decoded.
        chars = sorted({char for form in self._forms for char in form})
        spelled = [re.escape(f"\\u{ord(char):04x}".encode()) for char in chars]
        if "/" in chars:
            spelled.append(re.escape(b"\\/"))
        self._escapes = re.compile(b"|".join(spelled), re.IGNORECASE)

    @classmethod
    def of(cls, value: str | None) -> Secret | None:
        return cls(value) if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH else None

    def found_in(self, text: str | bytes | bytearray) -> bool:
        forms: tuple[Any, ...] = (
            self._byte_forms if isinstance(text, (bytes, bytearray)) else self._forms
        )
        return any(form in text for form in forms)

    def escaped_in(self, raw: bytes | bytearray) -> bool:
        """Whether JSON text ``raw`` has an escape that spells a character of the key: only
        then can its decoded strings hold a key that its bytes do not."""
        return 92 in raw and self._escapes.search(raw) is not None  # 92: a backslash

    def may_start_in(self, text: str) -> bool:
        """Whether ``text`` holds a character a form starts with (if not, no part of the key can
        begin in it)."""
        firsts = self._firsts
        if len(firsts) == 1:
            return firsts in text
        return any(first in text for first in firsts)

    def partial_at_end(self, text: str) -> int:
        """How many characters at the end of ``text`` could still be the start of the key (the
        longest end of it that begins a form without being the whole form); 0 for none."""
        longest = 0
        size = len(text)
        for form in self._forms:
            first = form[0]
            # Only the last len(form) - 1 characters can start a form that has not ended yet,
            # and only a start before the longest end found so far can make a longer one.
            end = size - longest
            i = text.find(first, max(size - len(form) + 1, 0), end)
            while i >= 0:
                if form.startswith(text[i:]):
                    longest = size - i
                    break
                i = text.find(first, i + 1, end)
        return longest

    def hold_back(self, text: str) -> str:
        """``text`` without its end that could still be the start of the key: what a reader may
        see of a text that is still arriving (the rest shows once it can no longer start the key,
        or becomes ``[redacted]`` when the key completes)."""
        held = self.partial_at_end(text) if text and self.may_start_in(text) else 0
        return text[: len(text) - held] if held else text

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the forms of the key are in ``text``: (start, end) pairs, left to right, not
        overlapping; at one start the longest form wins (as in :func:`redact`)."""
        found: list[tuple[int, int]] = []
        start = 0
        while True:
            best: tuple[int, int] | None = None
            for form in self._forms:  # longest first: a strict < keeps it at an equal start
                at = text.find(form, start)
                if at >= 0 and (best is None or at < best[0]):
                    best = (at, at + len(form))
            if best is None:
                return found
            found.append(best)
            start = best[1]

    def __repr__(self) -> str:
        return f"<Secret {REDACTED}>"


def redact(text: AnyStr, secret: Secret | None) -> AnyStr:
    """``text`` (str or bytes) with every form of ``secret`` replaced by ``[redacted]``.

    The one redaction rule: the Stream applies it to everything the gateway sends (body events,
    error bodies, header values, error messages), interpolation refuses what it would change.
    """
    if secret is None:
        return text
    if isinstance(text, (bytes, bytearray)):
        for form in secret._byte_forms:
            text = text.replace(form, REDACTED.encode())
        return text
    for form in secret._forms:
        text = text.replace(form, REDACTED)
    return text


def redact_in_json(text: AnyStr, secret: Secret) -> AnyStr:
    """:func:`redact` for JSON text (an event's data and raw bytes, an HTTP error body): a form
    right after a backslash that escapes its first character (``\\/`` + the rest of a key that
    starts with ``/``, ``\\n`` + the rest of one that starts with ``n``) takes that backslash
    with it, so that the JSON stays valid (``\\[redacted]`` is no escape: a chunk was lost as
    bad data, an error body read as text).
    Pairs of backslashes before it (escaped backslashes) stay."""
    for form in secret._byte_forms if isinstance(text, (bytes, bytearray)) else secret._forms:
        if form in text:
            text = _after_escapes(form).sub(_keep_pairs, text)
    return text


@functools.lru_cache(maxsize=64)
def _after_escapes(form: AnyStr) -> re.Pattern[AnyStr]:
    """``form`` with the backslashes right before it: its pairs (group 1), then an odd one."""
    if isinstance(form, bytes):
        return re.compile(rb"((?:\\\\)*)\\?" + re.escape(form))
    return re.compile(r"((?:\\\\)*)\\?" + re.escape(form))


def _keep_pairs(match: re.Match[Any]) -> Any:
    pairs = match.group(1)
    return pairs + (REDACTED.encode() if isinstance(pairs, bytes) else REDACTED)


def redact_error(error: NitoError, secret: Secret | None) -> NitoError:
    """``error`` with ``secret`` taken out of its message, arguments and body (in place)."""
    if secret is None:
        return error
    error.message = redact(error.message, secret)
    error.args = tuple(redact(arg, secret) if isinstance(arg, str) else arg for arg in error.args)
    if isinstance(getattr(error, "body", None), str):
        error.body = redact(error.body, secret)  # type: ignore[attr-defined]
    return error


class NitoError(Exception):
    """Base of every nito_nb error."""

    stream: StreamResults | None = None

    def __init__(self, message: str, *, stream: StreamResults | None = None) -> None:
        message = printable(message)  # a message is printed: the gateway's words in it too
        super().__init__(message)
        self.message = message
        self.stream = stream


class ConfigurationError(NitoError, ValueError):
    """A missing API key, a bad base URL or a bad argument."""


class MissingAPIKeyError(ConfigurationError):
    """No API key for a call that needs one (a front end such as ``%%nito`` says how to set it)."""


class APIError(NitoError):
    """The gateway refused the request with an HTTP error status."""

    hint = "Check the request and try again."

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        code: Any = None,
        body: str = "",
        metadata: Any = None,
        stream: StreamResults | None = None,
    ) -> None:
        self.status_code = status_code
        self.code = code
        self.body = body
        self.metadata = metadata
        said = message.strip()
        # "Not Found" ran into the hint: "Not Found Check the..."
        if said and said[-1] not in ".!?:;)":
            said += "."
        super().__init__(f"HTTP {status_code}: {said} {self.hint}".strip(), stream=stream)
        self.message = printable(message)


class RedirectError(APIError):
    """The gateway answered with a redirect (3xx), which nito_nb never follows: the request would
    go, with the API key and the prompt, to a host nobody chose. ``location`` is where it pointed,
    as scheme, host and port only (its path and query may hold a credential); None when the answer
    had no usable ``Location``, or for an error rebuilt from a saved log."""

    hint = (
        "If you trust that location, make it the base URL (base_url=... or NITO_BASE_URL; the "
        "whole Location is in .stream.log.headers); otherwise check the base URL."
    )

    def __init__(self, message: str, *, location: str | None = None, **kwargs: Any) -> None:
        self.location = location
        super().__init__(message, **kwargs)


class BadRequestError(APIError):
    hint = "The gateway rejected the request: check the model name and the parameters."


class AuthenticationError(APIError):
    hint = "Check NITO_API_KEY (or the api_key argument): it is missing, wrong or revoked."


class PaymentRequiredError(APIError):
    hint = "The account is out of credits: add credits, or pick a free model."


class NotFoundError(APIError):
    # A 404 is a model the gateway does not know, or a base URL that is not the API's root: a
    # server's own "Not Found" (no /v1) says nothing of which, so the hint says what both look like.
    hint = (
        "Check the model name (`%nito models` or Client().models() lists them) and the base URL: "
        'the API\'s root, usually ending in /v1, like "https://host/v1" (nito_nb adds /chat/completions).'
    )


class RateLimitError(APIError):
    hint = "Rate limited: wait and retry, or lower the request rate."

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        self.retry_after = retry_after
        if retry_after is not None:
            self.hint = f"Rate limited: retry after {retry_after:g} s, or lower the request rate."
        super().__init__(message, **kwargs)


class ServerError(APIError):
    hint = "The gateway or its upstream provider failed: retry later, or try another model."


class TransportError(NitoError):
    """No usable response came back."""


class ConnectionFailed(TransportError):
    """Could not connect to the gateway."""


class ConnectTimeout(ConnectionFailed):
    """Connecting took longer than the connect timeout."""


class FirstByteTimeout(TransportError):
    """The response's headers did not all arrive within the ``first_byte`` deadline, counted from
    the attempt's send. ``seconds`` is the deadline (None when httpx's own read timeout fired: an
    httpx client of the user's, docs/ENGINE_API.md)."""

    deadline = "first_byte"

    def __init__(
        self, message: str, *, seconds: float | None = None, stream: StreamResults | None = None
    ) -> None:
        super().__init__(message, stream=stream)
        self.seconds = seconds


class NotEventStreamError(TransportError):
    """A 200 response that is not an event stream (a proxy page, or a server ignoring stream=true)."""


class StreamError(NitoError):
    """The stream started but did not finish well. ``.stream`` holds everything that arrived."""


class MidStreamError(StreamError):
    """The gateway sent an error chunk after the stream had started."""

    def __init__(
        self, message: str, *, code: Any = None, stream: StreamResults | None = None
    ) -> None:
        super().__init__(message, stream=stream)
        self.code = code


class StreamTruncatedError(StreamError):
    """The body ended before ``[DONE]``: the answer may be incomplete."""


class ConnectionLost(StreamTruncatedError):
    """The connection broke mid-stream."""


class StreamTimeoutError(StreamError):
    """No complete event (a chunk or a comment) arrived within the ``between_chunks`` deadline:
    bytes that never make one, such as a trickle or a line that never ends, do not count.
    ``seconds`` is the deadline (None on a Stream loaded from a saved log)."""

    deadline = "between_chunks"

    def __init__(
        self, message: str, *, seconds: float | None = None, stream: StreamResults | None = None
    ) -> None:
        super().__init__(message, stream=stream)
        self.seconds = seconds


class TotalTimeoutError(StreamTimeoutError):
    """The call went past its ``total`` deadline (``Timeout(total=...)``), counted from the first
    attempt's send, retries included. Before the response started the Stream is ``failed``;
    during the body, ``truncated`` with what arrived."""

    deadline = "total"


class EventTooLargeError(StreamError):
    """One event went past ``max_event_size`` bytes: the stream was cut rather than buffer it.

    ``size`` is how many bytes of it had arrived, ``limit`` the limit (both None on a Stream
    loaded from a saved log, whose message still says the limit). The events before it are kept
    in ``.stream`` (status ``truncated``).
    """

    def __init__(
        self,
        message: str,
        *,
        size: int | None,
        limit: int | None,
        stream: StreamResults | None = None,
    ) -> None:
        super().__init__(message, stream=stream)
        self.size = size
        self.limit = limit


class BodyTooLargeError(StreamError):
    """The body decoded to more than ``max_body_size`` bytes, or, compressed, to so many times its
    bytes on the wire that it is a compression bomb (``_core/encoding.py``): the stream was cut
    rather than hold it. ``size`` is the bytes decoded, ``limit`` the limit, ``wire`` the bytes
    received when the body came compressed (else None); all None on a Stream loaded from a saved
    log. The events before it are kept in ``.stream`` (status ``truncated``).
    """

    def __init__(
        self,
        message: str,
        *,
        size: int | None,
        limit: int | None,
        wire: int | None = None,
        stream: StreamResults | None = None,
    ) -> None:
        super().__init__(message, stream=stream)
        self.size = size
        self.limit = limit
        self.wire = wire


_RAW_FIELD = operator.itemgetter(5)  # ServerSentEvent.raw, read in C


def redact_events(events: list[ServerSentEvent], secret: Secret) -> list[ServerSentEvent]:
    """``events`` with the key taken out of each one that echoes it (raw bytes and every field)."""
    # One search over the whole read first: the key holds no line break, so no occurrence spans
    # two events, and most reads have none (searching event by event costs more, on the hot path).
    if not secret.found_in(b"".join(map(_RAW_FIELD, events))):
        return events
    out = []
    for event in events:
        if secret.found_in(event.raw):
            data, name, last_id, retry, comment, raw = event
            event = ServerSentEvent(
                redact_in_json(data, secret),
                redact(name, secret),
                None if last_id is None else redact(last_id, secret),
                retry,
                None if comment is None else redact(comment, secret),
                redact_in_json(raw, secret),
            )
        out.append(event)
    return out


#: An error shown on one line is cut to about this many characters, in its middle.
ERROR_LINE_CHARS = 500


def one_line(error: BaseException, *, with_type: bool = True) -> str:
    """``Type: message`` (or the message alone) on one line, whitespace folded; a long one loses
    its middle, never its end (an error's hint, what to do, comes last); control characters shown
    as escapes (``printable``), whatever raised it. The magic's lines and the chat widget's status
    both use it."""
    text = printable(" ".join(str(error).split()))
    if len(text) > ERROR_LINE_CHARS:
        text = f"{text[: ERROR_LINE_CHARS - 200]} … {text[-199:]}"
    return f"{type(error).__name__}: {text}" if with_type else text


def shown_as_line(error: BaseException, line: str) -> None:
    """Make IPython show ``error`` as ``line`` alone, not its traceback (it prints what an
    exception's ``_render_traceback_`` returns). For the stop button's KeyboardInterrupt: the
    user's act, not a bug, whose frames (the socket read or the thread wait it landed in) say
    nothing to them."""
    error._render_traceback_ = lambda: [line]  # type: ignore[attr-defined]


def has_its_line(error: BaseException) -> bool:
    """Whether ``error`` has its line for IPython already (``shown_as_line``): the magic keeps a
    Run's, which says how to resume."""
    return hasattr(error, "_render_traceback_")
