"""Capture on httpx (0.x): the clients to pass to LiteLLM, LangChain, or the openai SDK's legacy
httpx path (``_capture.py`` says what is recorded; ``_capture_httpx2.py`` is the same for httpx2)."""

from __future__ import annotations

from typing import Any

import httpx

from ._capture import AsyncCapture, Stack, SyncCapture, wrap_transports
from ._capture_pump import AsyncBody, SyncBody

__all__ = [
    "HTTPX",
    "AsyncCaptureTransport",
    "CaptureTransport",
    "async_httpx_client",
    "httpx_client",
]

HTTPX = Stack("httpx", httpx)


class _Body(SyncBody, httpx.SyncByteStream):
    pass


class _AsyncBody(AsyncBody, httpx.AsyncByteStream):
    pass


class CaptureTransport(SyncCapture, httpx.BaseTransport):
    """An httpx transport that records streamed chat completions and passes everything on.

    ``httpx.Client(transport=nito_nb.CaptureTransport(inner))`` for a client you build yourself;
    :func:`httpx_client` builds one with httpx's defaults (proxies from the environment included).
    """

    stack = HTTPX
    body = _Body

    def __init__(self, inner: httpx.BaseTransport | None = None) -> None:
        self.inner = inner if inner is not None else httpx.HTTPTransport()


class AsyncCaptureTransport(AsyncCapture, httpx.AsyncBaseTransport):
    """The async twin of :class:`CaptureTransport`."""

    stack = HTTPX
    body = _AsyncBody

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.inner = inner if inner is not None else httpx.AsyncHTTPTransport()


def httpx_client(**kwargs: Any) -> httpx.Client:
    """An ``httpx.Client(**kwargs)`` that records every streamed chat completion it carries.

    Pass it to LiteLLM (``litellm.client_session``), LangChain (``ChatOpenAI(http_client=...)``) or
    any library that takes an httpx client (the openai SDK takes one too, on its legacy path: give
    it :func:`~nito_nb.httpx2_client` instead). Each streamed ``/chat/completions`` response then
    becomes a Stream in ``nito_nb.last()`` and ``nito_nb.streams()``, built from the exact bytes
    and their arrival times. What the library reads is not changed; other requests pass through
    untouched. A ``transport=`` of yours is wrapped too.
    """
    client: httpx.Client = wrap_transports(httpx.Client(**kwargs), CaptureTransport)
    return client


def async_httpx_client(**kwargs: Any) -> httpx.AsyncClient:
    """The async twin of :func:`httpx_client`: an ``httpx.AsyncClient``
    (``ChatOpenAI(http_async_client=...)``, ``litellm.aclient_session``)."""
    client: httpx.AsyncClient = wrap_transports(httpx.AsyncClient(**kwargs), AsyncCaptureTransport)
    return client
