"""The public names: the contract other code relies on (issue 2), pinned."""

from __future__ import annotations

import subprocess
import sys

import pytest

import nito_nb

PUBLIC = {
    "APIError",
    "Anomaly",
    "AsyncCaptureTransport",
    "AsyncClient",
    "AsyncStream",
    "AuthenticationError",
    "BadRequestError",
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
    "LogFormatError",
    "MidStreamError",
    "NitoError",
    "NotEventStreamError",
    "NotFoundError",
    "PaymentRequiredError",
    "RateLimitError",
    "ServerError",
    "Stream",
    "StreamError",
    "StreamTimeoutError",
    "StreamTruncatedError",
    "StreamView",
    "Timeout",
    "ToolCall",
    "TransportError",
    "astream",
    "async_httpx_client",
    "frame",
    "httpx_client",
    "last",
    "live",
    "load",
    "read_sse",
    "stream",
    "streams",
    "watch",
    # issue 13: runs
    "Run",
    "Store",
    "StoreBusy",
    "map",
    "open_store",
    "run",
    # issue 28: a store that cannot be written or read
    "StoreError",
    # issue 14: load runs
    "Sweep",
    "sweep",
    # issue 28: a redirect is never followed
    "RedirectError",
    # issue 28: a body's limits and the call's deadlines
    "BodyTooLargeError",
    "TotalTimeoutError",
    # issue 29: the one entry of a byte source of the user's (what fills a Stream)
    "StreamSource",
    # issue 35: a chat model for marimo's chat element
    "marimo_chat",
    # issue 31: capture on httpx2, the openai SDK's stack (httpx2 imported on first use)
    "Httpx2CaptureTransport",
    "AsyncHttpx2CaptureTransport",
    "httpx2_client",
    "async_httpx2_client",
}

#: The modules a user imports besides the root (every other one is private: a leading underscore).
SUBMODULES = {"otel", "scores", "sim", "tools"}  # issue 34: scores

#: What a user reads of a Stream and does with it (issue 29). A producer's call (feed, end,
#: set_response, an opener, a send time...) belongs on its producer (``nito_nb.StreamSource``,
#: ``_stream_source.py``), not here: a name added to a Stream is a decision taken in this list.
STREAM = {
    # the answer
    "content",
    "reasoning",
    "reasoning_details",
    "audio_transcript",
    "refusal",
    "audio",
    "tool_calls",
    "finish_reason",
    "usage",
    "error",
    "done",
    "anomalies",
    "role",
    "id",
    "model",
    "web_search",
    "free_tier",
    "n_chunks",
    # the call
    "request",
    "status",
    "finished",
    "exception",
    "log",
    "n_events",
    "attempts",
    "t0_wall",
    "timed",
    # timings
    "connect",
    "ttfb",
    "ttft",
    "elapsed",
    # made of the results, and what to do with them
    "message",
    "messages",
    "snapshot",
    "on_done",
    "reply",
    "save",
    "frame",
    "wait",
    "close",
    # issue 33: the answer read with the call's schema (docs/STRUCTURED.md)
    "parsed",
    "parse_error",
    # issue 33: the answer's tokens with their logprobs
    "logprobs",
    # issue 33: every choice of n > 1 (content and the rest stay choice 0's)
    "choices",
}

#: What a byte source tells its Stream (docs/ENGINE_API.md, "A source of your own").
SOURCE = {
    "stream",
    "start",
    "feed",
    "end",
    "set_response",
    "set_encoding",
    "fail_http",
    "fail",
    "protect",
    "protected",
    "note",
    "read_body",
    # nito_nb's own clients: retried attempts, the connection's time, the deadlines, reply()'s route
    "new_attempt",
    "set_connect",
    "set_deadlines",
    "set_route",
    # issue 33: the call's schema= (docs/STRUCTURED.md)
    "set_schema",
    # issue 34: the images= reply() sends again (docs/IMAGES.md)
    "set_attachments",
}


def public(obj: object) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


def test_all_is_sorted_and_pinned() -> None:
    assert nito_nb.__all__ == sorted(nito_nb.__all__)
    assert set(nito_nb.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(nito_nb, name) is not None


def test_result_attributes_of_the_contract() -> None:
    s = nito_nb.read_sse(
        b'data: {"id":"g","choices":[{"index":0,"delta":{"role":"assistant","content":"x"},'
        b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    for name in (
        "content",
        "reasoning",
        "tool_calls",
        "finish_reason",
        "usage",
        "error",
        "done",
        "anomalies",
        "messages",
        "message",
        "status",
        "log",
        "save",
        "frame",
        "on_done",
        "reply",
        "close",
        "wait",
    ):
        assert hasattr(s, name), name
    assert (s.content, s.finish_reason, s.done, s.status) == ("x", "stop", True, "done")


def test_a_stream_shows_only_what_a_user_reads_and_does() -> None:
    # Tab completion on a Stream: 54 names before issue 29 (61 on an AsyncStream), 14 of them the
    # producer's (feed, end, set_response... and the async ones: set_opener, send_at...).
    assert public(nito_nb.Stream) == STREAM
    assert public(nito_nb.AsyncStream) == STREAM | {"aclose"}
    made = [nito_nb.read_sse(b"data: [DONE]\n\n"), nito_nb.AsyncStream({"model": "m"})]
    for stream in made:  # an instance adds its one setting
        assert public(stream) == public(type(stream)) | {"raise_errors"}


def test_a_streams_producer_is_apart_and_fills_the_stream_it_holds() -> None:
    from nito_nb._stream_source import AsyncStreamSource

    assert public(nito_nb.StreamSource) == SOURCE
    assert public(AsyncStreamSource) == SOURCE - {"read_body"} | {
        "set_opener",
        "set_body",
        "set_pushed_body",
        "close_also",
        "send_at",
        "waiting_to_send",
        "until_send_time",
        "wait_alone",
    }
    assert not public(nito_nb.Stream) & SOURCE - {"stream"}
    source = nito_nb.StreamSource({"model": "m"})
    assert isinstance(source.stream, nito_nb.Stream) and repr(source).startswith(
        "<StreamSource of <Stream m waiting"
    )


def test_dir_of_the_package_is_its_public_api() -> None:
    # Before issue 29: Any, TYPE_CHECKING, annotations, atexit, threading, warnings,
    # load_ipython_extension and every private module besides the API.
    names = dir(nito_nb)
    assert [name for name in names if not name.startswith("_")] == sorted(PUBLIC | SUBMODULES)
    assert [name for name in names if name.startswith("_") and not name.endswith("__")] == []
    assert "__version__" in names
    assert nito_nb.load_ipython_extension is not None  # IPython's hook: there, not shown


@pytest.mark.spawns
def test_dir_imports_nothing_and_the_public_submodules_load_on_first_use() -> None:
    code = (
        "import sys, nito_nb; names = dir(nito_nb); print('nito_nb.sim' in sys.modules, 'sim' in names); "
        "print(nito_nb.sim.__name__, nito_nb.tools.__name__, 'nito_nb.sim' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "True", "nito_nb.sim", "nito_nb.tools", "True"]


@pytest.mark.spawns
def test_importing_nito_nb_stays_light() -> None:
    # The engine must not drag in pandas, matplotlib, ipywidgets, the renderer or the web server
    # (nor httpx2: capture on it is optional, imported when asked for).
    # (Pygments is not in the list: httpx imports it for its command line when it is installed.)
    code = (
        "import sys, nito_nb; heavy = [m for m in ('pandas', 'matplotlib', 'ipywidgets', 'uvicorn', "
        "'starlette', 'markdown_it', 'httpx2') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
