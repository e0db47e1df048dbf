"""Capture on httpx2 (Pydantic's fork of httpx, 2.x): the clients to pass to the openai SDK (its
default stack), pydantic-ai and huggingface_hub. Imported only when one of them is asked for
(``nito_nb.httpx2_client``...): httpx2 is optional (``pip install nito_nb[httpx2]``). The twin of
``_capture_httpx.py``; ``_capture.py`` says what is recorded."""

from __future__ import annotations

from typing import Any

try:
    import httpx2
except ImportError as exc:  # the user's mistake: one line that says what to do
    raise ImportError(
        "nito_nb's httpx2 capture needs httpx2 (Python 3.11+): pip install 'nito_nb[httpx2]'"
    ) from exc

from ._capture import AsyncCapture, Stack, SyncCapture, wrap_transports
from ._capture_pump import AsyncBody, SyncBody

__all__ = [
    "HTTPX2",
    "AsyncHttpx2CaptureTransport",
    "Httpx2CaptureTransport",
    "async_httpx2_client",
    "httpx2_client",
]

HTTPX2 = Stack("httpx2", httpx2)


class _Body(SyncBody, httpx2.SyncByteStream):
    pass


class _AsyncBody(AsyncBody, httpx2.AsyncByteStream):
    pass


class Httpx2CaptureTransport(SyncCapture, httpx2.BaseTransport):
    """An httpx2 transport that records streamed chat completions and passes everything on
    (``httpx2.Client(transport=nito_nb.Httpx2CaptureTransport(inner))``)."""

    stack = HTTPX2
    body = _Body

    def __init__(self, inner: httpx2.BaseTransport | None = None) -> None:
        self.inner = inner if inner is not None else httpx2.HTTPTransport()


class AsyncHttpx2CaptureTransport(AsyncCapture, httpx2.AsyncBaseTransport):
    """The async twin of :class:`Httpx2CaptureTransport`."""

    stack = HTTPX2
    body = _AsyncBody

    def __init__(self, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self.inner = inner if inner is not None else httpx2.AsyncHTTPTransport()


def httpx2_client(**kwargs: Any) -> httpx2.Client:
    """An ``httpx2.Client(**kwargs)`` that records every streamed chat completion it carries:
    ``OpenAI(http_client=nito_nb.httpx2_client())``, pydantic-ai's
    ``OpenAIProvider(http_client=...)`` (async: :func:`async_httpx2_client`). Same recording as
    :func:`~nito_nb.httpx_client`, on the stack those libraries use by default."""
    client: httpx2.Client = wrap_transports(httpx2.Client(**kwargs), Httpx2CaptureTransport)
    return client


def async_httpx2_client(**kwargs: Any) -> httpx2.AsyncClient:
    """The async twin of :func:`httpx2_client`: an ``httpx2.AsyncClient``
    (``AsyncOpenAI(http_client=nito_nb.async_httpx2_client())``)."""
    client: httpx2.AsyncClient = wrap_transports(
        httpx2.AsyncClient(**kwargs), AsyncHttpx2CaptureTransport
    )
    return client
