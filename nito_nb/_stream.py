"""The Stream: one streamed chat completion, live while it arrives, then inspected whole.

A Stream owns the three pure parts (the SSE decoder, the accumulator, the chunk log) and feeds them
the bytes its source hands it, stamping each read with ``time.perf_counter_ns()``. The client
(``_client.py``) gives it a source; ``read_sse`` and ``load`` feed it recorded bytes. Everything a
Stream knows is therefore a function of (bytes, arrival times): a loaded log is the same Stream.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._accumulate import Accumulator, Anomaly, ToolCall
from ._exceptions import (
    APIError,
    ConnectionLost,
    MidStreamError,
    NitoError,
    StreamTimeoutError,
    StreamTruncatedError,
    api_error,
    error_details,
)
from ._log import BAD_DATA, CHUNK, COMMENT, DONE, EMPTY, HTTP_ERROR, OTHER, ChunkLog, read_log
from ._protocol import ChunkParser
from ._sse import ServerSentEvent, SSEDecoder

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AsyncStream", "Stream", "load", "read_sse"]

#: Every status a Stream can be in. The first two are "running"; the rest are final.
STATUSES = ("waiting", "streaming", "done", "error", "truncated", "stopped", "failed")
_RUNNING = ("waiting", "streaming")


class Stream:
    """One streamed chat completion.

    Iterate it to receive each chunk (a dict) as it arrives; read ``content``, ``reasoning``,
    ``tool_calls``, ``usage``... at any time for what has arrived so far. A sync Stream that was
    never iterated reads itself to the end when a result is first asked for.
    """

    def __init__(
        self,
        request: dict[str, Any] | None = None,
        *,
        log: ChunkLog | None = None,
        raise_errors: bool = True,
    ) -> None:
        self.log = log if log is not None else ChunkLog(request, t0_ns=time.perf_counter_ns())
        self.raise_errors = raise_errors
        self.status = "waiting"
        #: The exception that ended the stream badly (also for ``raise_errors=False``), or None.
        self.exception: NitoError | None = None
        self.attempts = 1
        self._acc = Accumulator()
        self._decoder = SSEDecoder()
        self._parser = ChunkParser()
        self._first_token_ns: int | None = None
        self._n_token_events = 0
        self._callbacks: list[Callable[[Stream], Any]] = []
        self._reads: Iterator[bytes] | None = None
        self._close_source: Callable[[], None] | None = None
        self._abort_source: Callable[[], None] | None = None  # unblocks a read in another thread
        self._live: Iterator[dict[str, Any]] | None = None
        self._stop_requested = False  # close() was called, maybe from another thread
        self._client: Any = None  # the client that made it, for reply()

    # -- results (what has arrived so far) ---------------------------------------------------

    def _results(self) -> Accumulator:
        # A sync Stream nobody iterates would otherwise never be read: read it to the end.
        if self.status in _RUNNING and self._live is None and self._reads is not None:
            self.wait(raise_errors=False)
        return self._acc

    @property
    def content(self) -> str:
        return self._results().content

    @property
    def reasoning(self) -> str:
        return self._results().reasoning

    @property
    def reasoning_details(self) -> list[dict[str, Any]]:
        return self._results().reasoning_details

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self._results().tool_calls

    @property
    def finish_reason(self) -> str | None:
        return self._results().finish_reason

    @property
    def usage(self) -> dict[str, Any] | None:
        return self._results().usage

    @property
    def error(self) -> dict[str, Any] | None:
        return self._results().error

    @property
    def done(self) -> bool:
        """True once ``[DONE]`` arrived."""
        return self._results().done

    @property
    def anomalies(self) -> list[Anomaly]:
        return self._results().anomalies

    @property
    def role(self) -> str | None:
        return self._acc.role

    @property
    def id(self) -> str | None:
        return self._acc.id

    @property
    def model(self) -> str | None:
        """The model that served the call (as the gateway says), else the one requested."""
        return self._acc.model or self.request.get("model")

    @property
    def web_search(self) -> Any:
        return self._acc.web_search

    @property
    def free_tier(self) -> Any:
        return self._acc.free_tier

    @property
    def request(self) -> dict[str, Any]:
        return self.log.request

    @property
    def t0_wall(self) -> _dt.datetime:
        return self.log.t0_wall

    @property
    def finished(self) -> bool:
        return self.status not in _RUNNING

    @property
    def n_chunks(self) -> int:
        return self._acc.n_chunks

    @property
    def n_events(self) -> int:
        return len(self.log)

    @property
    def timed(self) -> bool:
        """False for a recording read without arrival times (``read_sse``): its timings are None."""
        return self.log.timed

    @property
    def ttfb(self) -> float | None:
        """Seconds from request sent to response headers."""
        if self.log.headers_ns is None or not self.log.timed:
            return None
        return (self.log.headers_ns - self.log.t0_ns) / 1e9

    @property
    def ttft(self) -> float | None:
        """Seconds from request sent to the first chunk with content, reasoning or tool-call text."""
        if self._first_token_ns is None or not self.log.timed:
            return None
        return (self._first_token_ns - self.log.t0_ns) / 1e9

    @property
    def elapsed(self) -> float | None:
        """Seconds since the request was sent; once finished, to the last event (None untimed)."""
        if not self.log.timed:
            return None
        times = self.log.times_ns()
        if self.finished:
            end = times[-1] if len(times) else (self.log.headers_ns or self.log.t0_ns)
        else:
            end = time.perf_counter_ns()
        return max(0, end - self.log.t0_ns) / 1e9

    @property
    def message(self) -> dict[str, Any]:
        """The answer as an assistant message, ready to send back in a conversation."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_message() for call in self.tool_calls]
        return message

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's messages followed by this answer: the conversation so far."""
        return [*self.request.get("messages", []), self.message]

    # -- feeding (I/O-free) ------------------------------------------------------------------

    def _feed(self, data: bytes, t_ns: int) -> list[dict[str, Any]]:
        """Decode one read, log and accumulate its events; return the chunks it completed."""
        if self.status == "waiting":
            self.status = "streaming"
        return self._take(self._decoder.decode(data), t_ns)

    def _take(self, events: list[ServerSentEvent], t_ns: int) -> list[dict[str, Any]]:
        # The hot path (one pass per network read): every event is classified, logged and folded.
        chunks: list[dict[str, Any]] = []
        acc, parse = self._acc, self._parser.parse
        first_seq = len(self.log)
        kinds = bytearray()
        for i, (data, name, _, _, comment, _) in enumerate(events):
            if comment is not None:
                kinds.append(COMMENT)
                continue
            if data == "[DONE]":
                kinds.append(DONE)
                if acc.done:
                    acc.note("after-done", "[DONE] was sent more than once", first_seq + i)
                acc.finish()
                continue
            if not data:
                kinds.append(EMPTY)
                continue
            try:
                chunk, content = parse(data)
            except ValueError:
                kinds.append(BAD_DATA)
                acc.note("bad-data", f"a data line is not JSON: {data[:80]!r}", first_seq + i)
                continue
            if type(chunk) is not dict:
                kinds.append(OTHER)
                acc.note("not-an-object", f"a data line is JSON but not an object: {data[:80]!r}", first_seq + i)
                continue
            kinds.append(CHUNK)
            if name == "error" and "error" not in chunk:
                chunk = {"error": chunk}  # `event: error` with the error object as the whole data
                content = None
            if acc.done:
                acc.add(chunk, first_seq + i)  # notes and ignores it (rule 9)
                continue
            if acc.add(chunk, first_seq + i) if content is None else acc.add_content(chunk, content, first_seq + i):
                self._n_token_events += 1
                if self._first_token_ns is None:
                    self._first_token_ns = t_ns
            chunks.append(chunk)
        if events:
            self.log.extend(t_ns, kinds, [event.raw for event in events])
        return chunks

    def _end(self, t_ns: int, *, status: str | None = None, exception: NitoError | None = None) -> None:
        """The body ended (or was cut): settle the status, keep what arrived, run callbacks."""
        if self.finished:
            return
        if self._decoder.pending:
            seq = len(self.log)
            self._take(self._decoder.flush(), t_ns)
            self._acc.note("unterminated", "the body ended inside an event (no blank line after it)", seq)
        acc = self._acc
        if status is None:
            if acc.error is not None:
                status = "error"
            elif acc.done:
                status = "done"
            else:
                status = "truncated"
        if exception is None and status == "error":
            error = acc.error or {}
            message = str(error.get("message") or "an error chunk without a message")
            exception = MidStreamError(
                f"The gateway reported an error mid-stream: {message}"
                f"{_code_text(error.get('code'))}. What arrived before it ({len(acc.content):,} "
                "characters) is kept in .stream; retry, or try another model.",
                code=error.get("code"),
            )
        elif exception is None and status == "truncated":
            exception = StreamTruncatedError(
                f"The stream ended without [DONE] after {acc.n_chunks} chunks: the answer may be "
                "incomplete. What arrived is kept in .stream; retry, and if it keeps happening, "
                "check for a proxy that cuts long responses."
            )
        if exception is not None:
            exception.stream = self
        self.status = status
        self.exception = exception
        self.log.end = {"status": status}
        if exception is not None:
            self.log.end["exception"] = type(exception).__name__
            self.log.end["message"] = exception.message
        self._reads = None
        for callback in self._callbacks:
            callback(self)

    def _fail(self, error: NitoError) -> NitoError:
        """The request failed before any body: no stream, only this error."""
        error.stream = self
        self.status = "failed"
        self.exception = error
        self.log.end = {"status": "failed", "exception": type(error).__name__, "message": error.message}
        return error

    def _fail_http(self, status_code: int, headers: Any, body: bytes, t_ns: int) -> APIError:
        """The gateway answered with an HTTP error: log its body, keep its error, build the exception."""
        self.log.set_response(status_code, headers or {}, t_ns)
        if not any(e.kind == "http-error" for e in self.log):
            self.log.append(t_ns, HTTP_ERROR, body)
        headers = self.log.headers
        error = api_error(
            status_code,
            body.decode("utf-8", "replace"),
            content_type=headers.get("content-type", ""),
            retry_after=headers.get("retry-after"),
        )
        self._acc.error = {"code": error.code, "message": error.message}
        self._fail(error)
        return error

    def _stop_source(self) -> None:
        close, self._close_source = self._close_source, None
        if close is not None:
            close()

    # -- live iteration (sync) ---------------------------------------------------------------

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self.finished or self._reads is None:
            return self._replay()
        if self._live is not None:
            return self._live  # continue where a `break` left off
        self._live = self._iterate(self.raise_errors)
        return self._live

    def _replay(self) -> Iterator[dict[str, Any]]:
        """A finished Stream iterates again over its recorded chunks."""
        for event in self.log:
            if event.kind == "chunk":
                chunk = event.chunk
                if chunk is not None:
                    yield chunk

    def _iterate(self, raise_errors: bool) -> Iterator[dict[str, Any]]:
        from ._client import transport_exception  # the one place that knows httpx's errors

        assert self._reads is not None
        reads, clock = self._reads, time.perf_counter_ns
        try:
            for data in reads:
                yield from self._feed(data, clock())
        except GeneratorExit:  # the consumer closed us (close(), or a with-block ended)
            self._stop_source()
            self._end(clock(), status=None if self._acc.done else "stopped")  # [DONE] came: done
            raise
        except KeyboardInterrupt:  # the kernel's stop button: keep what arrived, then stop
            self._stop_source()
            self._end(clock(), status="stopped")
            raise
        except Exception as exc:
            self._stop_source()
            if self._stop_requested:  # close() from another thread cut the read under us
                self._end(clock(), status="stopped")
                return
            error = transport_exception(exc, self)
            if error is None:
                raise
            self._end(clock(), status="truncated", exception=error)
        else:
            self._stop_source()
            self._end(clock(), status="stopped" if self._stop_requested and not self._acc.done else None)
        self._raise_failure(raise_errors)

    def wait(self, *, raise_errors: bool | None = None) -> Stream:
        """Read the stream to its end; raise its error if ``raise_errors`` (default: the Stream's)."""
        raise_errors = self.raise_errors if raise_errors is None else raise_errors
        if self._live is None and self._reads is not None:
            self._live = self._iterate(raise_errors=False)
        if self._live is not None:
            for _ in self._live:
                pass
        self._raise_failure(raise_errors)
        return self

    def close(self) -> None:
        """Stop reading: the connection closes, what arrived stays, the status becomes ``stopped``.

        Safe from another thread while one is iterating (a Stop button): the connection is closed
        under the reader, whose iteration then ends quietly with the status ``stopped``.
        """
        if not self.finished:
            self._stop_requested = True
        if self._live is not None:
            try:
                self._live.close()  # type: ignore[attr-defined]
            except ValueError:  # "generator already executing": another thread is reading it
                abort = self._abort_source
                if abort is not None:
                    abort()
                return
        if not self.finished:
            self._stop_source()
            self._end(time.perf_counter_ns(), status="stopped")

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def on_done(self, callback: Callable[[Stream], Any]) -> Stream:
        """Call ``callback(stream)`` once the stream has finished (at once if it already has)."""
        if self.finished:
            callback(self)
        else:
            self._callbacks.append(callback)
        return self

    # -- conversation, files, analysis -------------------------------------------------------

    def reply(self, prompt_or_messages: str | list[dict[str, Any]], **params: Any) -> Stream:
        """Continue the conversation: this Stream's messages, then the new ones, same model and
        parameters unless overridden. Pass tool results as ``[{"role": "tool", ...}]``."""
        from ._client import Client, as_messages

        client = self._client if isinstance(self._client, Client) else Client()
        messages, model, merged = self._next_turn(as_messages(prompt_or_messages), params)
        return client.stream(messages, model=model, **merged)

    def _next_turn(
        self, new_messages: list[dict[str, Any]], params: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], Any, dict[str, Any]]:
        """(messages, model, parameters) of the request that continues this conversation."""
        merged = {**self.request.get("params", {}), **params}
        model = merged.pop("model", self.request.get("model"))
        return [*self.messages, *new_messages], model, merged

    def _raise_failure(self, raise_errors: bool) -> None:
        """Raise the error that ended the stream badly (a mid-stream error or a truncation)."""
        if raise_errors and self.exception is not None and self.status in ("error", "truncated"):
            raise self.exception

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Save the whole log (every event with its arrival time) as JSON Lines; ``load`` reads it."""
        self.log.save(path)
        return Path(path)

    def frame(self) -> pd.DataFrame:
        """One row per event: see the pandas adapter (``nito_nb.frame``)."""
        from ._frame import frame

        return frame(self)

    def __repr__(self) -> str:
        parts = [self.model or "?", self.status]
        acc = self._acc
        if acc.content:
            parts.append(f"{len(acc.content):,} chars")
        if acc.tool_calls:
            parts.append(f"{len(acc.tool_calls)} tool call(s)")
        parts.append(f"{acc.n_chunks} chunks")
        if self.ttft is not None:
            parts.append(f"ttft {self.ttft:.2f}s")
        if not self.log.timed:
            parts.append("(recorded, no arrival times)")
        if acc.finish_reason:
            parts.append(f"finish={acc.finish_reason}")
        if acc.error:
            parts.append(f"error={acc.error.get('message')!r}")
        return f"<{type(self).__name__} {' '.join(parts)}>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        try:
            from ._render import final_bundle
        except ImportError:  # the renderer is optional for the engine
            return {"text/plain": repr(self)}
        return final_bundle(self)


class AsyncStream(Stream):
    """The async twin: ``async for chunk in stream``. It connects on first use; results never
    read implicitly (use ``await stream.wait()``)."""

    def __init__(self, request: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(request, **kwargs)
        self._opener: Callable[[AsyncStream], Any] | None = None  # coroutine: connect, set _areads
        self._areads: AsyncIterator[bytes] | None = None
        self._aclose_source: Callable[[], Any] | None = None
        self._alive: AsyncIterator[dict[str, Any]] | None = None

    def _results(self) -> Accumulator:
        return self._acc

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self.finished:
            return self._replay()
        raise TypeError("an AsyncStream is iterated with `async for` (or `await stream.wait()`)")

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        if self._alive is None:
            self._alive = self._aiterate(self.raise_errors)
        return self._alive

    async def _aiterate(self, raise_errors: bool) -> AsyncIterator[dict[str, Any]]:
        from ._client import transport_exception

        if self.finished:
            for chunk in self._replay():
                yield chunk
            return
        clock = time.perf_counter_ns
        if self._areads is None and self._opener is not None:
            await self._open()  # raises typed HTTP errors, with .stream set
        if self._areads is None:
            return
        try:
            async for data in self._areads:
                for chunk in self._feed(data, clock()):
                    yield chunk
        except GeneratorExit:
            await self._astop_source()
            self._end(clock(), status=None if self._acc.done else "stopped")
            raise
        except (KeyboardInterrupt, _cancelled_error()):
            await self._astop_source()
            self._end(clock(), status="stopped")
            raise
        except Exception as exc:
            error = transport_exception(exc, self)
            await self._astop_source()
            if error is None:
                raise
            self._end(clock(), status="truncated", exception=error)
        else:
            await self._astop_source()
            self._end(clock())
        self._raise_failure(raise_errors)

    async def _open(self) -> None:
        assert self._opener is not None
        try:
            await self._opener(self)
        except (KeyboardInterrupt, _cancelled_error()):  # cancelled while connecting
            self._end(time.perf_counter_ns(), status="stopped")
            raise

    async def _astop_source(self) -> None:
        close, self._aclose_source = self._aclose_source, None
        if close is not None:
            await close()

    async def wait(self, *, raise_errors: bool | None = None) -> AsyncStream:  # type: ignore[override]
        raise_errors = self.raise_errors if raise_errors is None else raise_errors
        if self._alive is None:
            self._alive = self._aiterate(raise_errors=False)
        async for _ in self._alive:
            pass
        self._raise_failure(raise_errors)
        return self

    def __await__(self) -> Any:
        return self.wait().__await__()

    async def aclose(self) -> None:
        if self._alive is not None:
            await self._alive.aclose()  # type: ignore[attr-defined]
        if not self.finished:
            await self._astop_source()
            self._end(time.perf_counter_ns(), status="stopped")

    def close(self) -> None:
        raise TypeError("use `await stream.aclose()` on an AsyncStream")

    async def __aenter__(self) -> AsyncStream:
        if self._areads is None and self._opener is not None and not self.finished:
            await self._open()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    def reply(self, prompt_or_messages: str | list[dict[str, Any]], **params: Any) -> AsyncStream:
        from ._client import AsyncClient, as_messages

        client = self._client if isinstance(self._client, AsyncClient) else AsyncClient()
        messages, model, merged = self._next_turn(as_messages(prompt_or_messages), params)
        return client.stream(messages, model=model, **merged)


def _refail(stream: Stream, end: dict[str, Any]) -> None:
    """Rebuild the error of a request that failed before streaming, from its saved log."""
    from . import _exceptions

    log = stream.log
    body = next((e.raw for e in log if e.kind == "http-error"), None)
    if body is not None and (log.status_code or 0) >= 400:
        stream._fail_http(log.status_code or 400, log.headers, body, log.headers_ns or log.t0_ns)
    else:
        cls = getattr(_exceptions, str(end.get("exception")), None)
        if not (isinstance(cls, type) and issubclass(cls, NitoError)):
            cls = NitoError
        stream._fail(cls(str(end.get("message") or "the request failed")))
    log.end = end


def _cancelled_error() -> type[BaseException]:
    import asyncio

    return asyncio.CancelledError


def _code_text(code: Any) -> str:
    return "" if code is None else f" (code {code})"


# -- recorded streams --------------------------------------------------------------------------


def read_sse(
    source: bytes | str | os.PathLike[str],
    *,
    request: dict[str, Any] | None = None,
    status_code: int | None = None,
) -> Stream:
    """A Stream from a recorded SSE body: bytes, the body as text, or a path to a file.

    A recorded HTTP error body (``status_code`` >= 400, or a JSON object with an ``error`` key)
    gives a Stream with status ``failed`` and its ``error`` and ``exception`` set.

    A str is a path when such a file exists, else the body itself. Never raises for a mid-stream
    error or a truncated body: ``error``, ``done`` and ``status`` say what happened. The recording
    has no arrival times: ``timed`` is False, and ``ttft``, ``ttfb`` and ``elapsed`` are None (in a
    frame, ``t`` and ``gap`` are NaN).
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        body = bytes(source)
    elif isinstance(source, os.PathLike) or (
        isinstance(source, str) and "\n" not in source and len(source) < 4096 and os.path.isfile(source)
    ):
        body = Path(source).read_bytes()
    elif isinstance(source, str):
        body = source.encode("utf-8")
    else:
        raise TypeError(f"read_sse takes bytes, str or a path, not {type(source).__name__}")
    stream = Stream(request, log=ChunkLog(request, t0_ns=0), raise_errors=False)
    stream.log.timed = False
    if (status_code is not None and status_code >= 400) or _looks_like_error_body(body):
        # A recorded HTTP error (the gateway refused before streaming): keep the body, say why.
        if status_code is None:  # a bare body: its own error code is the best guess of the status
            code = error_details(body.decode("utf-8", "replace"))[1]
            status_code = int(code) if str(code).isdigit() and 400 <= int(code) < 600 else 400
        stream._fail_http(status_code, {}, body, 0)
        return stream
    stream.log.status_code = status_code
    stream._feed(body, 0)
    stream._end(0)
    return stream


def _looks_like_error_body(body: bytes) -> bool:
    """A JSON object with an "error" key and no SSE field in sight: an HTTP error body."""
    text = body.lstrip()
    if not text.startswith(b"{"):
        return False
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and "error" in value


def load(path: str | os.PathLike[str]) -> Stream:
    """A Stream from a log written by ``Stream.save``: the same events, times and results."""
    log, events = read_log(path)
    return from_events(log, events)


def from_events(log: ChunkLog, events: list[tuple[int, int | None, bytes]]) -> Stream:
    """A finished Stream from a log's metadata (its ``end`` included) and its events as
    (t_ns, kind code or None, raw bytes): what ``load`` reads from a file, or a store from
    its tables."""
    end = dict(log.end)
    stream = Stream(log.request, log=log, raise_errors=False)
    log.end = {}
    for t_ns, kind, raw in events:
        if kind == HTTP_ERROR:
            log.append(t_ns, kind, raw)
        else:
            stream._feed(raw, t_ns)
    last = events[-1][0] if events else log.t0_ns
    status = end.get("status")
    if status == "failed":
        _refail(stream, end)
        return stream
    # Only statuses that the bytes alone cannot tell are taken from the file.
    exception: NitoError | None = None
    if status == "truncated" and end.get("exception") in ("ConnectionLost", "StreamTimeoutError"):
        cls = ConnectionLost if end["exception"] == "ConnectionLost" else StreamTimeoutError
        exception = cls(end.get("message") or "")
    stream._end(last, status=status if status in ("stopped", "truncated") else None, exception=exception)
    return stream


