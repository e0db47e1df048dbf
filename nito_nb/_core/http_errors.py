"""The typed error of an HTTP error response: what its body says (JSON, HTML, text), how long
its headers say to wait (``Retry-After`` and its variants), and the class its status maps to.

Split from ``errors.py``, which holds the classes themselves and what keeps a key out of them.
"""

from __future__ import annotations

import datetime
import email.utils
import json
import math
import re
import time
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any

from .errors import (
    APIError,
    AuthenticationError,
    BadRequestError,
    NotEventStreamError,
    NotFoundError,
    PaymentRequiredError,
    RateLimitError,
    ServerError,
)

if TYPE_CHECKING:
    from .._stream_results import StreamResults

__all__ = [
    "RETRY_AFTER_HEADERS",
    "api_error",
    "error_details",
    "not_event_stream_error",
    "retry_after_of",
    "retry_after_seconds",
]

_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: AuthenticationError,
    402: PaymentRequiredError,
    404: NotFoundError,
    429: RateLimitError,
}


class _TextOfHTML(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.title = ""
        self.text: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self._in = tag

    def handle_data(self, data: str) -> None:
        if self._in == "title":
            self.title += data
        elif self._in not in ("script", "style") and data.strip():
            self.text.append(data.strip())


def error_details(body: str, content_type: str = "") -> tuple[str, Any, Any]:
    """(message, code, metadata) from a JSON, pretty-printed JSON, HTML or plain-text error body."""
    text = body.strip()
    if text[:1] in "{[":
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            error = data.get("error", data)
            if isinstance(error, dict):
                message = error.get("message") or error.get("detail") or json.dumps(error)[:300]
                return str(message), error.get("code", error.get("type")), error.get("metadata")
            if isinstance(error, str):
                return error, data.get("code"), None
            return json.dumps(data)[:300], None, None
    if "html" in content_type.lower() or re.match(r"(?is)\s*(<!doctype|<html)", text):
        parser = _TextOfHTML()
        try:
            parser.feed(text)
        except Exception:  # a broken page still has a status: fall back to the raw text
            pass
        summary = parser.title.strip() or " ".join(parser.text)[:200]
        return f"an HTML page ({summary})" if summary else "an HTML page", None, None
    if not text:
        return "an empty body", None, None
    return text[:500], None, None


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds from now: delta-seconds, or an HTTP date (RFC 9110, 10.2.3).

    ``now`` (a Unix time, default the clock) is for tests. None when the value is neither.
    """
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # "-0000" in a date means UTC too
            when = when.replace(tzinfo=datetime.timezone.utc)
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


#: Where a gateway says how long to wait, most precise first: ``retry-after-ms`` (milliseconds,
#: sent by OpenAI and Azure), the standard ``Retry-After``, and LiteLLM's proxy, which forwards the
#: upstream provider's header as ``llm_provider-retry-after``.
RETRY_AFTER_HEADERS = (
    ("retry-after-ms", 1e-3),
    ("retry-after", 1.0),
    ("llm_provider-retry-after", 1.0),
)


def retry_after_of(headers: Any, now: float | None = None) -> float | None:
    """Seconds to wait before retrying, from a response's headers (the first of
    ``RETRY_AFTER_HEADERS`` that holds a usable value), or None."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    for name, unit in RETRY_AFTER_HEADERS:
        value = lowered.get(name)
        if value is None:
            continue
        if unit != 1.0:  # milliseconds: a number only
            try:
                ms = float(value)
            except ValueError:
                continue
            if math.isfinite(ms):
                return max(0.0, ms * unit)
            continue
        seconds = retry_after_seconds(value, now)
        if seconds is not None:
            return seconds
    return None


def api_error(
    status_code: int,
    body: str,
    *,
    content_type: str = "",
    retry_after: str | float | None = None,
    stream: StreamResults | None = None,
    message: str | None = None,
) -> APIError:
    """The typed error of an HTTP error response. ``retry_after``: seconds (``retry_after_of``
    of the headers), or a ``Retry-After`` value. ``message``: what to say when the body cannot
    tell (a body its client closed unread), in place of what the body says."""
    found, code, metadata = error_details(body, content_type)
    message = found if message is None else message
    if status_code >= 500:
        cls: type[APIError] = ServerError
    else:
        cls = _BY_STATUS.get(status_code, BadRequestError)
    kwargs: dict[str, Any] = dict(
        status_code=status_code, code=code, body=body, metadata=metadata, stream=stream
    )
    if cls is RateLimitError:
        seconds = (
            retry_after
            if isinstance(retry_after, (int, float))
            else retry_after_seconds(retry_after)
        )
        return RateLimitError(message, retry_after=seconds, **kwargs)
    return cls(message, **kwargs)


def not_event_stream_error(
    status_code: int, headers: Any, text: str, base_url: str = ""
) -> NotEventStreamError:
    content_type = headers.get("content-type", "") if headers else ""
    where = f" ({base_url})" if base_url else ""
    return NotEventStreamError(
        f"The gateway answered {status_code} with {content_type or 'no content type'} instead of an "
        f"event stream (body starts {text[:120]!r}). Check the base URL{where} and that nothing "
        "between you and the gateway rewrites responses."
    )
