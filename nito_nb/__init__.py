"""nito_nb: the Nito gateway's streaming chat completions, live in Jupyter and as DataFrames.

    import nito_nb
    s = nito_nb.stream("Explain SSE in one line", model="sim/chat")
    for chunk in s:
        ...
    s.content, s.reasoning, s.tool_calls, s.usage, s.frame()

In IPython: ``%load_ext nito_nb`` gives the ``%%nito`` cell magic.
"""

from __future__ import annotations

import atexit
import threading
import warnings
from typing import TYPE_CHECKING, Any

from . import _client, _stream_results
from ._capture import streams
from ._capture_httpx import (
    AsyncCaptureTransport,
    CaptureTransport,
    async_httpx_client,
    httpx_client,
)
from ._client import AsyncClient, Client, Timeout
from ._core.answer_parts import Anomaly, ToolCall
from ._core.errors import (
    APIError,
    AuthenticationError,
    BadRequestError,
    BodyTooLargeError,
    ConfigurationError,
    ConnectionFailed,
    ConnectionLost,
    ConnectTimeout,
    EventTooLargeError,
    FirstByteTimeout,
    MidStreamError,
    NitoError,
    NotEventStreamError,
    NotFoundError,
    PaymentRequiredError,
    RateLimitError,
    RedirectError,
    ServerError,
    StreamError,
    StreamTimeoutError,
    StreamTruncatedError,
    TotalTimeoutError,
    TransportError,
)
from ._core.log import ChunkLog, Event, LogFormatError
from ._live import live
from ._recordings import load, read_sse
from ._stream import AsyncStream, Stream
from ._stream_source import StreamSource
from ._watch import watch

if TYPE_CHECKING:
    import pandas as pd

__version__ = "0.1.0"

_default_lock = threading.Lock()
_default_clients: dict[str, Any] = {}


@atexit.register
def _close_default_client() -> None:
    # The shared client's pooled connections would otherwise be closed by the garbage collector
    # at exit, with an "unclosed socket" ResourceWarning.
    client = _default_clients.pop("Client", None)
    if client is not None:
        client.close()


def _default(kind: type[Client] | type[AsyncClient]) -> Any:
    # One shared client per kind: its connection pool is reused across calls. Key, base URL and
    # timeouts are read per call, so environment changes still apply.
    with _default_lock:
        client = _default_clients.get(kind.__name__)
        if client is None:
            client = _default_clients[kind.__name__] = kind()
        return client


def stream(
    prompt_or_messages: str | list[dict[str, Any]],
    *,
    model: str,
    api_key: str | None = None,
    base_url: str | None = None,
    **params: Any,
) -> Stream:
    """Start a streamed chat completion and return its :class:`Stream`.

    A string becomes one user message. Keyword parameters other than ``api_key``, ``base_url``,
    ``timeout``, ``raise_errors``, ``max_event_size`` and ``max_body_size`` go into the request body
    (``temperature``, ``tools``,
    ``seed``, ``reasoning``...). ``images=[path, url, bytes]`` attaches images and PDFs to the
    prompt (docs/IMAGES.md). ``NITO_API_KEY`` and ``NITO_BASE_URL`` come from the environment;
    ``sim/...`` models run on the embedded simulator with no key.
    """
    return _default(Client).stream(
        prompt_or_messages, model=model, api_key=api_key, base_url=base_url, **params
    )


def astream(
    prompt_or_messages: str | list[dict[str, Any]],
    *,
    model: str,
    api_key: str | None = None,
    base_url: str | None = None,
    **params: Any,
) -> AsyncStream:
    """The async twin of :func:`stream`: ``async for chunk in nito_nb.astream(...)``."""
    return _default(AsyncClient).stream(
        prompt_or_messages, model=model, api_key=api_key, base_url=base_url, **params
    )


def _embedded_simulator() -> _client.Simulator:
    """Start the embedded simulator if needed; its base URL and the token it asks for. Imported on
    first use only (starlette and uvicorn are not cheap)."""
    from .sim import ensure_server, token

    return _client.Simulator(ensure_server(), token())


_apart_failed: str | None = None


def _simulator_apart() -> tuple[_client.Simulator, bool]:
    """The simulator in a process of its own (load runs: ``sim/_process.py``), and True; where it
    cannot start (not POSIX, a failed child), the in-process one and False, with one warning per
    process that says why."""
    global _apart_failed
    from .sim import ensure_process, token

    if _apart_failed is None:
        try:
            return _client.Simulator(ensure_process(), token()), True
        except RuntimeError as exc:
            _apart_failed = str(exc)
            warnings.warn(
                f"{exc}; this run's sim/ models use the simulator in this process, whose work then "
                "counts as the client's",
                RuntimeWarning,
                stacklevel=2,
            )
    return _embedded_simulator(), False


# The layers below never import the ones above: what they need from here is passed in, once.
_client.register_simulator(_embedded_simulator, _simulator_apart)
_stream_results.register_default_starts(stream, astream)


def frame(source: Any, *, errors: str = "raise") -> pd.DataFrame:
    """One row per event of a Stream, or of many: Streams, saved logs, recorded SSE files, folders.

    A file that cannot be read raises an error naming it; ``errors="skip"`` leaves it out with one
    warning listing what was skipped (also in ``df.attrs["nito_skipped"]``).

    The pandas adapter (``nito_nb._frame``) is imported on first use, so ``import nito_nb`` never
    imports pandas. It registers the ``df.nito`` accessor (``metrics()``, ``tool_calls()``,
    ``usage()``, ``text()``, ``plot_timeline()``, ``plot_gaps()``) on every frame returned here; for
    a frame read back from Parquet or CSV, ``nito_nb.frame(df)`` registers it and restores dtypes.
    """
    from ._frame import frame as build

    return build(source, errors=errors)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nito_nb``: register the ``%%nito`` / ``%nito`` magics."""
    from ._magic import load_ipython_extension as load

    load(ipython)


def last() -> Any:
    """The last Stream the ``%%nito`` magic ran (a list of Streams after ``-m a,b``), or the last
    Run of ``nito_nb.run`` / ``nito_nb.map``, or the last Stream captured (``httpx_client``) or
    watched (``watch``), whichever came last; None before any.

    After a magic, the same object as ``_nito`` in the notebook's namespace.
    """
    from ._capture import REGISTRY
    from ._last import last as kept

    return REGISTRY.latest(kept())


_WIDGETS = ("ChatWidget", "StreamView")
# marimo's chat element's model: imported on first use (marimo itself only when it shows one).
_MARIMO = ("marimo_chat",)
# Runs (many prompts x models, a DuckDB store): imported on first use, like the widgets. `map` is
# served here rather than imported so that this module keeps the builtin.
_RUNS = ("Run", "Store", "StoreBusy", "StoreError", "Sweep", "map", "open_store", "run", "sweep")
# The public submodules, imported on first use too (the simulator brings starlette and uvicorn):
# ``nito_nb.sim.ensure_server()`` works without its own import; ``nito_nb.otel`` imports
# OpenTelemetry only when it exports; ``nito_nb.scores`` grades a run's answers. Every other
# module is private.
_SUBMODULES = ("otel", "scores", "sim", "tools")
# Capture on httpx2 (the openai SDK's stack): httpx2 is optional, imported when one is asked for.
_HTTPX2 = (
    "AsyncHttpx2CaptureTransport",
    "Httpx2CaptureTransport",
    "async_httpx2_client",
    "httpx2_client",
)


def __getattr__(name: str) -> Any:
    # The widgets need ipywidgets (and comm): imported on first use only, so that `import nito_nb`
    # stays light in scripts and servers that never show a widget.
    if name in _WIDGETS:
        from . import _widget as _widget

        value = getattr(_widget, name)
        globals()[name] = value
        return value
    if name in _MARIMO:
        from . import _marimo_chat

        value = getattr(_marimo_chat, name)
        globals()[name] = value
        return value
    if name in _RUNS:
        from . import _runs as runs

        return getattr(runs, name)
    if name in _HTTPX2:
        from . import _capture_httpx2

        value = getattr(_capture_httpx2, name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'nito_nb' has no attribute {name!r}")


def __dir__() -> list[str]:
    # What tab completion offers: the public API (``__all__`` and the public submodules) and the
    # module's own dunders; not what this module imports for itself (typing's ``Any``,
    # ``threading``...), nor the private modules, nor IPython's ``load_ipython_extension``.
    dunders = (name for name in globals() if name.startswith("__") and name.endswith("__"))
    return sorted({*__all__, *_SUBMODULES, *dunders})


__all__ = [
    "APIError",
    "Anomaly",
    "AsyncCaptureTransport",
    "AsyncClient",
    "AsyncHttpx2CaptureTransport",
    "AsyncStream",
    "AuthenticationError",
    "BadRequestError",
    "BodyTooLargeError",
    "CaptureTransport",
    "ChatWidget",
    "ChunkLog",
    "Client",
    "ConfigurationError",
    "ConnectTimeout",
    "ConnectionFailed",
    "ConnectionLost",
    "Event",
    "EventTooLargeError",
    "FirstByteTimeout",
    "Httpx2CaptureTransport",
    "LogFormatError",
    "MidStreamError",
    "NitoError",
    "NotEventStreamError",
    "NotFoundError",
    "PaymentRequiredError",
    "RateLimitError",
    "RedirectError",
    "Run",
    "ServerError",
    "Store",
    "StoreBusy",
    "StoreError",
    "Stream",
    "StreamError",
    "StreamSource",
    "StreamTimeoutError",
    "StreamTruncatedError",
    "StreamView",
    "Sweep",
    "Timeout",
    "ToolCall",
    "TotalTimeoutError",
    "TransportError",
    "astream",
    "async_httpx2_client",
    "async_httpx_client",
    "frame",
    "httpx2_client",
    "httpx_client",
    "last",
    "live",
    "load",
    "map",
    "marimo_chat",
    "open_store",
    "read_sse",
    "run",
    "stream",
    "streams",
    "sweep",
    "watch",
]
