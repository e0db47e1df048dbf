"""The public names: the contract other code relies on (issue 2), pinned."""

from __future__ import annotations

import subprocess
import sys

import pytest

import nito_nb

PUBLIC = {
    "APIError", "Anomaly", "AsyncCaptureTransport", "AsyncClient", "AsyncStream", "AuthenticationError", "BadRequestError",
    "CaptureTransport", "ChatWidget", "ChunkLog", "Client", "ConfigurationError", "ConnectTimeout", "ConnectionFailed",
    "ConnectionLost", "Event", "EventTooLargeError", "FirstByteTimeout", "LogFormatError", "MidStreamError", "NitoError",
    "NotEventStreamError", "NotFoundError", "PaymentRequiredError", "RateLimitError", "ServerError",
    "Stream", "StreamError", "StreamTimeoutError", "StreamTruncatedError", "StreamView", "Timeout",
    "ToolCall", "TransportError", "astream", "async_httpx_client", "frame", "httpx_client", "last", "live", "load",
    "read_sse", "stream", "streams", "watch",
    # issue 13: runs
    "Run", "Store", "StoreBusy", "map", "open_store", "run",
    # issue 28: a store that cannot be written or read
    "StoreError",
    # issue 14: load runs
    "Sweep", "sweep",
    # issue 28: a redirect is never followed
    "RedirectError",
    # issue 28: a body's limits and the call's deadlines
    "BodyTooLargeError", "TotalTimeoutError",
}


def test_all_is_sorted_and_pinned() -> None:
    assert nito_nb.__all__ == sorted(nito_nb.__all__)
    assert set(nito_nb.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(nito_nb, name) is not None


def test_result_attributes_of_the_contract() -> None:
    s = nito_nb.read_sse(b'data: {"id":"g","choices":[{"index":0,"delta":{"role":"assistant","content":"x"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
    for name in ("content", "reasoning", "tool_calls", "finish_reason", "usage", "error", "done", "anomalies",
                 "messages", "message", "status", "log", "save", "frame", "on_done", "reply", "close", "wait"):
        assert hasattr(s, name), name
    assert (s.content, s.finish_reason, s.done, s.status) == ("x", "stop", True, "done")


@pytest.mark.spawns
def test_importing_nito_nb_stays_light() -> None:
    # The engine must not drag in pandas, matplotlib, ipywidgets, the renderer or the web server.
    # (Pygments is not in the list: httpx imports it for its command line when it is installed.)
    code = ("import sys, nito_nb; heavy = [m for m in ('pandas', 'matplotlib', 'ipywidgets', 'uvicorn', "
            "'starlette', 'markdown_it') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
