"""The HTTP client: build the request, talk httpx, map failures to typed errors.

Split the way httpx splits its own: the parts without I/O below, the two I/O shells on top.

- ``config.py``: ``Timeout`` and the limit of one SSE event.
- ``endpoint.py``: where a call goes (base URL, ``NITO_BASE_URL``, the embedded simulator that the
  package root registers with ``register_simulator``, a ``Simulator``: its URL and token) and with
  which key (``NITO_API_KEY``, or the simulator's token); the
  one check of a base URL (``checked_base_url``) and how one is shown (``shown_url``).
- ``request_check.py``: ``check_request``, the one check of a request body before it is sent, and
  ``check_keywords``, a misspelt keyword refused with "Did you mean" (the known body fields:
  ``request_fields.py``).
- ``retry.py``: whether and when an attempt that failed before the body is tried again.
- ``failures.py``: httpx's failures, HTTP error responses and redirects (never followed) as
  typed errors.
- ``base.py``: ``BaseClient`` (what both clients share: configuration, the request of a call, the
  retry decision) and the ``Route`` a Stream keeps for ``reply()``.
- ``clients.py``: ``Client`` and ``AsyncClient``, twins written out side by side.
"""

from __future__ import annotations

from .._core.request import as_messages
from .base import BaseClient, Route, one_model
from .clients import AsyncClient, Client
from .config import DEFAULT_MAX_EVENT_SIZE, Timeout
from .endpoint import (
    DEFAULT_BASE_URL,
    Simulator,
    checked_base_url,
    checked_key,
    is_nito,
    register_simulator,
    shown_url,
)
from .failures import redirect_error, shown_location, transport_exception
from .request_check import check_keywords, check_request, keyword_options

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_EVENT_SIZE",
    "AsyncClient",
    "BaseClient",
    "Client",
    "Route",
    "Simulator",
    "Timeout",
    "as_messages",
    "check_keywords",
    "check_request",
    "checked_base_url",
    "checked_key",
    "is_nito",
    "keyword_options",
    "one_model",
    "redirect_error",
    "register_simulator",
    "shown_location",
    "shown_url",
    "transport_exception",
]
