"""The Stream: one streamed chat completion, live while it arrives, then inspected whole.

A Stream owns the three pure parts (the SSE decoder, the accumulator, the chunk log) and feeds them
the bytes its source hands it, stamping each read with ``time.perf_counter_ns()``. The client
(``_client.py``) gives it a source; ``read_sse`` and ``load`` feed it recorded bytes. Everything a
Stream knows is therefore a function of (bytes, arrival times): a loaded log is the same Stream.

Arrival times are the moment the bytes reached the process, whatever the caller does. So a live
body is read as soon as the response has started, by a reader of its own: a daemon thread for a
sync Stream, a task on the event loop for an AsyncStream. The reader stamps each read as it comes
off the socket, folds it into the Stream and hands the parsed chunks to whoever iterates, through
a queue. The alternative, sending the request only when the Stream is first iterated, would still
time every chunk by the consumer's pace (a consumer that sleeps between chunks, a cell that
displays slowly), so it was not chosen. The reader holds only a weak reference to a sync Stream:
a Stream nobody holds any more is closed by the garbage collector (its status says ``stopped``).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import errno
import functools
import json
import operator
import os
import queue
import re
import sys
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._core.accumulate import Accumulator, Anomaly, ToolCall
from ._core.chunk import as_error_event
from ._core.errors import (
    APIError,
    ConnectionLost,
    EventTooLargeError,
    MidStreamError,
    NitoError,
    Secret,
    StreamError,
    StreamTimeoutError,
    StreamTruncatedError,
    api_error,
    error_details,
    redact,
    redact_error,
    retry_after_of,
)
from ._core.layout import ChunkParser
from ._core.log import (
    BAD_DATA,
    CHUNK,
    COMMENT,
    DONE,
    EMPTY,
    HTTP_ERROR,
    OTHER,
    ChunkLog,
    LogFormatError,
    read_log,
)
from ._core.request import as_messages
from ._core.sse import EventTooLarge, ServerSentEvent, SSEDecoder
from ._core.state import StreamSnapshot, frozen_tool_call
from ._core.status import RUNNING, Status

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AsyncStream", "Stream", "load", "read_sse"]

_RUNNING = RUNNING

#: The engine's only imports that point up, both lazy, each inside the method named here: a frame
#: of the Stream (the pandas adapter) and its rich display in a notebook (the renderer). Declared
#: in this one place; tests/test_architecture.py fails on any other import cycle.
UPWARD_IMPORTS = (("Stream.frame", "nito_nb._frame.build"), ("Stream._repr_mimebundle_", "nito_nb._render"))

#: How a Stream made by no client (``load``, ``read_sse``) continues a conversation in reply():
#: ``nito_nb.stream`` / ``nito_nb.astream``, registered by the package root (keys: is async), so
#: that the engine never imports the layers above it.
_default_starts: dict[bool, Callable[..., Any]] = {}


def register_default_starts(sync: Callable[..., Any], async_: Callable[..., Any]) -> None:
    """What reply() of a recorded Stream calls: ``sync`` for a Stream, ``async_`` for an AsyncStream."""
    _default_starts[False] = sync
    _default_starts[True] = async_
_END = object()  # the reader's last item in a Stream's queue


class Stream:
    """One streamed chat completion.

    Iterate it to receive each chunk (a dict) as it arrives; read ``content``, ``reasoning``,
    ``tool_calls``, ``usage``... at any time for what has arrived so far. The body is read in the
    background from the moment the response starts, so arrival times never depend on when the
    chunks are iterated. Results of a sync Stream that was never iterated wait for its end when
    first asked for.
    """

    def __init__(
        self,
        request: dict[str, Any] | None = None,
        *,
        log: ChunkLog | None = None,
        raise_errors: bool = True,
        max_event_size: int | None = None,
        transport_errors: Callable[[BaseException, Stream], NitoError | None] | None = None,
    ) -> None:
        self.log = log if log is not None else ChunkLog(request, t0_ns=time.perf_counter_ns())
        self.raise_errors = raise_errors
        self.status: Status = Status.WAITING
        #: The exception that ended the stream badly (also for ``raise_errors=False``), or None.
        self.exception: NitoError | None = None
        self._acc = Accumulator()
        self._decoder = SSEDecoder(max_event_size)  # the client sets the limit; recordings have none
        self._parser = ChunkParser()
        self._first_token_ns: int | None = None
        self._n_token_events = 0
        self._callbacks: list[Callable[[Stream], Any]] = []
        # The background reader (a sync Stream with a live body): its thread, the queue of chunk
        # lists it hands the iterating caller, and how to cut its socket read from another thread.
        # The lock keeps the reader's folding and the caller's reading of results apart.
        self._lock = threading.RLock()
        self._reader: threading.Thread | None = None
        self._queue: queue.SimpleQueue[Any] | None = None
        self._abort_source: Callable[[], None] | None = None
        self._settled = threading.Event()  # finished and its on_done callbacks have run
        self._callback_thread: int | None = None  # the thread running the callbacks, meanwhile
        self._live: Iterator[dict[str, Any]] | None = None
        self._consumed = False  # iterated or waited for: results are then what arrived so far
        self._stop_requested = False  # close() was called, maybe from another thread
        #: How the request was made (the client, its base URL, key and timeout), for reply(); set
        #: by the client, None for a recorded Stream.
        self._route: Any = None
        #: The key the request carried: taken out of everything the gateway sends (see _take).
        self._secret: Secret | None = None
        # How the byte source's own failures (httpx's, for the client) become typed errors: given
        # by whoever makes the Stream, so that the engine knows no transport library.
        self._transport_errors = transport_errors

    # -- results (what has arrived so far) ---------------------------------------------------

    def _results(self) -> Accumulator:
        # A sync Stream that nobody iterates or waits for: its results are those of the whole
        # answer (`s = stream(...); s.content`), so wait for its end.
        if not self._consumed and self._reader is not None:
            if self.status in _RUNNING:
                self.wait(raise_errors=False)
            else:
                self._discard_queued()
        return self._acc

    @property
    def content(self) -> str:
        acc = self._results()
        with self._lock:  # the accumulator joins its pieces lazily: not while the reader appends
            return acc.content

    @property
    def reasoning(self) -> str:
        acc = self._results()
        with self._lock:
            return acc.reasoning

    @property
    def reasoning_details(self) -> list[dict[str, Any]]:
        acc = self._results()
        with self._lock:
            return acc.reasoning_details

    @property
    def attempts(self) -> int:
        """How many requests were sent: 1, or more when the request was retried before the body
        (a 429, a 5xx or a failed connection). The timings count from the first one."""
        return self.log.attempts

    @attempts.setter
    def attempts(self, value: int) -> None:
        self.log.attempts = value

    @property
    def refusal(self) -> str | None:
        """The model's refusal (OpenAI structured outputs' ``delta.refusal``), None if none came."""
        return self._results().refusal

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

    def snapshot(self) -> StreamSnapshot:
        """What has arrived so far, as one immutable value taken under the Stream's lock: the
        text, tool calls, status and timings of one moment. Never waits for the stream (unlike the
        properties of a sync Stream nobody iterates); renderers read this, not the live fields."""
        with self._lock:
            acc, log = self._acc, self.log
            timed = log.timed
            usage = acc.usage
            error = acc.error
            return StreamSnapshot(
                status=Status(self.status),
                content=acc.content,
                reasoning=acc.reasoning,
                refusal=acc.refusal,
                tool_calls=tuple(frozen_tool_call(call) for call in acc.tool_calls),
                model=acc.model or log.request.get("model"),
                id=acc.id,
                role=acc.role,
                finish_reason=acc.finish_reason,
                usage=dict(usage) if isinstance(usage, dict) else usage,
                error=dict(error) if isinstance(error, dict) else error,
                anomalies=tuple(dataclasses.replace(a) for a in acc.anomalies),
                done=acc.done,
                web_search=acc.web_search,
                free_tier=acc.free_tier,
                n_chunks=acc.n_chunks,
                n_token_events=self._n_token_events,
                ttfb=self.ttfb,
                ttft=self.ttft,
                elapsed=self.elapsed if timed else None,
                timed=timed,
                exception=self.exception,
            )

    # -- feeding (I/O-free) ------------------------------------------------------------------

    def feed(self, data: bytes, t_ns: int) -> list[dict[str, Any]]:
        """Fold one read of the body, arrived at ``t_ns`` (``time.perf_counter_ns()``), into the
        Stream: decode its events, log them, accumulate them; return the chunks it completed.

        I/O-free and thread-safe (under the Stream's lock): what the background reader does for
        each read, and what a replay, a capture or any other source of SSE bytes calls. Raises
        :class:`EventTooLargeError` when an event goes past ``max_event_size``."""
        with self._lock:
            return self._feed(data, t_ns)

    def end(
        self, t_ns: int | None = None, *, status: str | None = None, exception: NitoError | None = None
    ) -> None:
        """The body ended (or was cut) at ``t_ns`` (now if None): settle the status from what
        arrived (``done``, ``error`` or ``truncated``, unless ``status`` says otherwise), keep
        everything, run the ``on_done`` callbacks. A second call does nothing."""
        self._end(time.perf_counter_ns() if t_ns is None else t_ns, status=status, exception=exception)

    # The rest of the source API: what a byte source (the client, a capture, a replay) tells the
    # Stream besides the body, so that none of them writes its private fields.

    def protect(self, secret: Secret | str | None) -> None:
        """The key the request carried: from now on it is taken out of everything the server
        sends back (body events, error body, headers), and out of the Stream's errors."""
        self._secret = secret if secret is None or isinstance(secret, Secret) else Secret.of(secret)

    def set_response(self, status_code: int, headers: Any, t_ns: int) -> None:
        """The response's status and headers arrived at ``t_ns`` (none that carries a credential
        or echoes the key is kept)."""
        self._set_response(status_code, headers, t_ns)

    def fail_http(self, status_code: int, headers: Any, body: bytes, t_ns: int) -> APIError:
        """The server refused with an HTTP error: the body is logged (redacted), the Stream is
        ``failed``; returns the typed error (not raised)."""
        return self._fail_http(status_code, headers, body, t_ns)

    def fail(self, error: NitoError) -> NitoError:
        """The request failed before any body: the Stream is ``failed`` with ``error`` (returned)."""
        return self._fail(error)

    def note(self, kind: str, message: str) -> None:
        """Record an anomaly at the current event (the same kind again only counts)."""
        with self._lock:
            self._acc.note(kind, message, len(self.log))

    def _feed(self, data: bytes, t_ns: int) -> list[dict[str, Any]]:
        """Decode one read, log and accumulate its events; return the chunks it completed."""
        if self.status == "waiting":
            self.status = Status.STREAMING
        try:
            events = self._decoder.decode(data)
        except EventTooLarge as too_large:
            self._take(too_large.events, t_ns)  # the events before it are kept, as arrived
            raise EventTooLargeError(
                f"An event went past max_event_size ({too_large.limit:,} bytes): the stream was "
                f"stopped rather than hold it in memory. What arrived before it ({self._acc.n_chunks} "
                "chunks) is kept in .stream. If such events are expected, raise max_event_size "
                "(Client(max_event_size=...) or stream(..., max_event_size=...)).",
                size=too_large.size,
                limit=too_large.limit,
                stream=self,
            ) from None
        return self._take(events, t_ns)

    def _take(self, events: list[ServerSentEvent], t_ns: int) -> list[dict[str, Any]]:
        # The hot path (one pass per network read): every event is classified, logged and folded.
        if self._secret is not None:  # the one door of the body: the gateway may echo the key
            events = _redacted(events, self._secret)
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
            if name == "error":
                wrapped = as_error_event(chunk, name)
                if wrapped is not chunk:
                    chunk, content = wrapped, None
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
        with self._lock:  # the reader and a closing caller may both end it: the first one counts
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
                redact_error(exception, self._secret)
            self.status = Status(status)
            self.exception = exception
            self.log.end = {"status": self.status.value}
            if exception is not None:
                self.log.end["exception"] = type(exception).__name__
                self.log.end["message"] = exception.message
            callbacks, self._callbacks = self._callbacks, []
        self._run_callbacks(callbacks)

    def _run_callbacks(self, callbacks: list[Callable[[Stream], Any]]) -> None:
        # They run in the thread that finished the stream (the background reader, or the one that
        # closed it), like a future's done-callbacks. A failing callback is reported in one line
        # and does not stop the others: the stream itself ended well, and wait() must not raise
        # someone else's error.
        self._callback_thread = threading.get_ident()
        try:
            for callback in callbacks:
                try:
                    callback(self)
                except Exception as exc:
                    _report_callback_error(callback, exc)
        finally:
            self._callback_thread = None
            self._settled.set()

    def _fail(self, error: NitoError) -> NitoError:
        """The request failed before any body: no stream, only this error."""
        error.stream = self
        redact_error(error, self._secret)
        self.status = Status.FAILED
        self.exception = error
        self.log.end = {"status": Status.FAILED.value, "exception": type(error).__name__, "message": error.message}
        return error

    def _retry(self) -> None:
        """An attempt failed before the body and is tried again: forget its outcome (its error,
        its response and its log), count it, and keep the clock: t0 stays the first attempt's."""
        attempts, log = self.attempts, self.log
        self.log = ChunkLog(log.request, t0_ns=log.t0_ns, t0_wall=log.t0_wall)
        self.log.attempts = attempts + 1
        self._acc = Accumulator()
        self.status = Status.WAITING
        self.exception = None

    def _set_response(self, status_code: int, headers: Any, t_ns: int) -> None:
        """The response started: keep its status and headers, none that carries a credential or
        echoes the key."""
        self.log.set_response(status_code, headers or {}, t_ns)
        secret = self._secret
        if secret is not None:
            self.log.headers = {k: v for k, v in self.log.headers.items() if not secret.found_in(v)}

    def _fail_http(self, status_code: int, headers: Any, body: bytes, t_ns: int) -> APIError:
        """The gateway answered with an HTTP error: log its body, keep its error, build the exception."""
        body = redact(body, self._secret)
        self._set_response(status_code, headers, t_ns)
        if not any(e.kind == "http-error" for e in self.log):
            self.log.append(t_ns, HTTP_ERROR, body)
        headers = self.log.headers
        error = api_error(
            status_code,
            body.decode("utf-8", "replace"),
            content_type=headers.get("content-type", ""),
            retry_after=retry_after_of(headers),
        )
        self._acc.error = {"code": error.code, "message": error.message}
        self._fail(error)
        return error

    def _transport_error(self, exc: BaseException) -> NitoError | None:
        """The typed error for a failure of the byte source during the body, or None (a bug)."""
        if isinstance(exc, StreamError) and exc.stream is self:  # already typed by the Stream
            return exc
        classify = self._transport_errors
        return None if classify is None else classify(exc, self)

    # -- the background reader (sync) --------------------------------------------------------

    def _start_reader(self, reads: Iterator[bytes], close: Callable[[], None], abort: Callable[[], None]) -> None:
        """Read the body in a daemon thread from now on (the client calls this once the response
        has started): ``reads`` yields the body's bytes, ``close`` releases the response (only the
        reader calls it: httpx would make another thread wait for the read in progress), ``abort``
        cuts a read in progress from another thread. The chunks wait in the queue until someone
        iterates; a Stream that is only waited for lets them go when it ends."""
        self._queue = queue.SimpleQueue()
        self._abort_source = abort
        self._reader = threading.Thread(
            target=_read_body,
            args=(weakref.ref(self), reads, close, self._queue),
            name="nito_nb-stream-reader",
            daemon=True,
        )
        self._reader.start()

    def _stop(self, status: str | None) -> None:
        """Stop the reader (its socket read is cut, it closes the response) and end the stream."""
        self._stop_requested = True
        reader, abort = self._reader, self._abort_source
        if reader is not None and abort is not None and reader.is_alive() and reader is not threading.current_thread():
            abort()
        self._end(time.perf_counter_ns(), status=status)
        if self._queue is not None:
            self._queue.put(_END)  # wakes a caller blocked on the next chunk in another thread

    def _discard_queued(self) -> None:
        # Nobody iterates a finished Stream's live chunks any more (iterating it again replays the
        # log): let the parsed chunks go.
        q, self._queue = self._queue, None
        if q is not None and self._live is None:
            while not q.empty():
                q.get_nowait()

    # -- live iteration (sync) ---------------------------------------------------------------

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._live is not None:
            return self._live  # continue where a `break` left off
        if self._queue is None:  # finished and iterated (or waited for) once, or no live body
            return self._replay()
        self._consumed = True
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
        # The chunks the reader parsed, in order; the reader's items are lists of chunks (one per
        # read), then _END. A KeyboardInterrupt lands here, in the blocking get().
        assert self._queue is not None
        get = self._queue.get
        try:
            while True:
                item = get()
                if item is _END:
                    break
                if type(item) is list:
                    yield from item
                else:
                    raise item  # not a transport failure: a bug, passed on as it is
        except GeneratorExit:  # the consumer closed us (close(), or a with-block ended)
            self._stop(status=None if self._acc.done else "stopped")  # [DONE] came: done
            raise
        except KeyboardInterrupt:  # the kernel's stop button: keep what arrived, then stop
            self._stop(status="stopped")
            raise
        finally:
            self._live = None
            self._queue = None  # iterating it again replays the log
        self._settle()
        self._raise_failure(raise_errors)

    def _settle(self, timeout: float | None = None) -> bool:
        """Wait until the stream has ended and its callbacks have run (not from a callback)."""
        if self._callback_thread == threading.get_ident() or self._reader is None:
            return self.finished
        return self._settled.wait(timeout)

    def wait(self, *, raise_errors: bool | None = None, timeout: float | None = None) -> Stream:
        """Block until the stream has finished; raise its error if ``raise_errors`` (default: the
        Stream's). With ``timeout`` (seconds), return after that long even if it has not finished:
        the Stream goes on in the background and its status is unchanged (check ``finished``).
        A KeyboardInterrupt meanwhile stops it (status ``stopped``, what arrived is kept)."""
        raise_errors = self.raise_errors if raise_errors is None else raise_errors
        self._consumed = True
        try:
            if not self._settle(timeout):
                return self
        except KeyboardInterrupt:
            self._stop(status="stopped")
            raise
        self._discard_queued()
        self._raise_failure(raise_errors)
        return self

    def close(self) -> None:
        """Stop reading: the connection closes, what arrived stays, the status becomes ``stopped``
        (``done`` if ``[DONE]`` had already arrived).

        Safe from any thread, also while another one iterates (a Stop button): the background
        reader's socket read is cut, and the iterating thread ends quietly.
        """
        live = self._live
        if live is not None:
            try:
                live.close()  # type: ignore[attr-defined]
            except ValueError:  # "generator already executing": another thread is iterating it
                pass
        if not self.finished:
            self._stop(status=None if self._acc.done else "stopped")

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # Collected while its body is still being read (a `break` and nothing else holds it): stop
        # the reader and release the connection. The status (in callbacks, or a log kept
        # elsewhere) says stopped.
        try:
            if self._reader is not None and self.status in _RUNNING:
                self._stop(status="stopped")
        except Exception:  # never raise from the collector (e.g. at interpreter exit)
            pass

    def on_done(self, callback: Callable[[Stream], Any]) -> Stream:
        """Call ``callback(stream)`` once the stream has finished (at once if it already has), in
        the thread that finished it; an exception in it is reported on stderr, not raised."""
        with self._lock:
            if not self.finished:
                self._callbacks.append(callback)
                return self
        try:
            callback(self)
        except Exception as exc:
            _report_callback_error(callback, exc)
        return self

    # -- conversation, files, analysis -------------------------------------------------------

    def reply(self, prompt_or_messages: str | list[dict[str, Any]], **params: Any) -> Stream:
        """Continue the conversation: this Stream's messages, then the new ones, same model and
        parameters unless overridden. Pass tool results as ``[{"role": "tool", ...}]``.

        It is sent the way this Stream's request was: by the same client (its retries, timeouts
        and httpx client), to the same base URL, with the same key, ``timeout`` and
        ``max_event_size``. A ``base_url=`` given here sends it elsewhere, without this Stream's
        key. A recorded Stream (``load``, ``read_sse``) was made by no client: it continues as
        ``nito_nb.stream`` would.
        """
        return self._reply(prompt_or_messages, params)

    def _reply(self, prompt_or_messages: Any, params: dict[str, Any]) -> Any:
        messages, model, merged = self._next_turn(as_messages(prompt_or_messages), params)
        route = self._route
        if route is None:
            start = _default_starts.get(isinstance(self, AsyncStream))
            if start is None:
                raise NitoError("this Stream was made by no client: continue it with Client(...).stream(...)")
            return start(messages, model=model, **merged)
        options = {**route.options(params), "raise_errors": self.raise_errors}
        return route.client.stream(messages, model=model, **{**options, **merged})

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
        """One row per event: see the pandas adapter (``nito_nb._frame``)."""
        from ._frame.build import frame

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
    """The async twin: ``async for chunk in stream``. It connects on first use (``async for``,
    ``await stream.wait()``, ``async with``); from then on a task on the event loop reads the body
    as it arrives, whatever the consumer awaits meanwhile. Results are never read implicitly (use
    ``await stream.wait()``)."""

    def __init__(self, request: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(request, **kwargs)
        self._opener: Callable[[AsyncStream], Any] | None = None  # coroutine: connect, set _areads
        self._areads: AsyncIterator[bytes] | None = None
        self._aclose_source: Callable[[], Any] | None = None
        self._alive: AsyncIterator[dict[str, Any]] | None = None
        # The reader task (connects, then reads the body), the queue of chunk lists it hands the
        # consumer, the future of its connecting (None, or the error that refused it), and an
        # error that ended it (raised to whoever iterates or waits).
        self._task: Any = None
        self._aqueue: Any = None
        self._opened: Any = None
        self._task_error: BaseException | None = None

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

    def _astart(self) -> Any:
        """Start the reader task once, on the running loop; return it (None: nothing to read)."""
        import asyncio

        if self._task is None:
            if self.finished or (self._opener is None and self._areads is None):
                return None
            loop = asyncio.get_running_loop()
            self._aqueue = asyncio.Queue()
            self._opened = loop.create_future()
            self._task = loop.create_task(self._arun(self._aqueue, self._opened), name="nito_nb-stream-reader")
            self._task.add_done_callback(functools.partial(_never_started, self._aqueue, self._opened))
        return self._task

    async def _arun(self, out: Any, opened: Any) -> None:
        try:
            if self._areads is None and self._opener is not None:
                try:
                    await self._open()  # raises typed HTTP errors, with .stream set
                except Exception as exc:  # refused: whoever connects, iterates or waits raises it
                    self._task_error = exc
                    opened.set_result(exc)
                    return
            opened.set_result(None)
            if self._areads is not None:
                await self._aread(out)
        except Exception as exc:  # not a transport failure: handed to the consumer as it is
            self._task_error = exc
        finally:
            if not opened.done():  # cancelled while connecting
                opened.set_result(None)
            out.put_nowait(_END)

    async def _aread(self, out: Any) -> None:
        assert self._areads is not None
        clock = time.perf_counter_ns
        try:
            async for data in self._areads:
                t_ns = clock()  # stamped as the bytes came, not as consumed
                with self._lock:  # a display thread may take a snapshot meanwhile
                    chunks = self._feed(data, t_ns)
                if chunks:
                    out.put_nowait(chunks)
        except (KeyboardInterrupt, _cancelled_error()):  # stopped by the consumer or the loop's end
            await self._astop_source()
            self._end(clock(), status=None if self._acc.done else "stopped")
            raise
        except Exception as exc:
            error = self._transport_error(exc)
            await self._astop_source()
            if error is None:
                self._end(clock(), status="truncated")
                raise
            self._end(clock(), status="truncated", exception=error)
        else:
            await self._astop_source()
            self._end(clock())

    async def _aiterate(self, raise_errors: bool) -> AsyncIterator[dict[str, Any]]:
        task = self._astart()
        out = self._aqueue
        if task is None or out is None:  # finished (and iterated once), or nothing to read
            for chunk in self._replay():
                yield chunk
            return
        self._consumed = True
        try:
            while True:
                item = await out.get()
                if item is _END:
                    break
                for chunk in item:
                    yield chunk
        except GeneratorExit:  # aclose(), or an `async with` ended
            await self._astop()
            raise
        except (KeyboardInterrupt, _cancelled_error()):
            await self._astop()
            raise
        finally:
            self._alive = None
            self._aqueue = None  # iterating it again replays the log
        if self._task_error is not None:
            raise self._task_error
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

    async def _astop(self) -> None:
        """Cancel the reader (it closes the response and says stopped) and wait for it."""
        import asyncio

        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})
        if not self.finished:
            await self._astop_source()
            self._end(time.perf_counter_ns(), status="stopped")

    async def wait(  # type: ignore[override]
        self, *, raise_errors: bool | None = None, timeout: float | None = None
    ) -> AsyncStream:
        """Connect if needed and wait until the stream has finished; raise its error if
        ``raise_errors`` (an HTTP error when connecting always raises). With ``timeout`` (seconds),
        return after that long even if it has not finished: it goes on, its status is unchanged
        (check ``finished``). Cancelling the wait stops the stream."""
        import asyncio

        raise_errors = self.raise_errors if raise_errors is None else raise_errors
        task = self._astart()
        if task is not None:
            self._consumed = True
            try:
                done, _ = await asyncio.wait({task}, timeout=timeout)
            except (KeyboardInterrupt, asyncio.CancelledError):
                await self._astop()
                raise
            if not done:
                return self
            if self._alive is None:
                self._aqueue = None  # nobody iterates its live chunks: let them go
            if self._task_error is not None:
                raise self._task_error
        self._raise_failure(raise_errors)
        return self

    def __await__(self) -> Any:
        return self.wait().__await__()

    async def aclose(self) -> None:
        """Stop reading: the connection closes, what arrived stays, the status becomes ``stopped``."""
        alive = self._alive
        if alive is not None:
            try:
                await alive.aclose()  # type: ignore[attr-defined]
            except RuntimeError:  # another task is iterating it: cancelling the reader ends it
                pass
        await self._astop()

    def close(self) -> None:
        raise TypeError("use `await stream.aclose()` on an AsyncStream")

    async def __aenter__(self) -> AsyncStream:
        import asyncio

        if self._astart() is not None:
            try:
                error = await asyncio.shield(self._opened)
            except (KeyboardInterrupt, asyncio.CancelledError):
                await self._astop()
                raise
            if error is not None:
                raise error
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    def reply(self, prompt_or_messages: str | list[dict[str, Any]], **params: Any) -> AsyncStream:
        """The async twin of :meth:`Stream.reply` (same client, base URL, key and timeout)."""
        stream: AsyncStream = self._reply(prompt_or_messages, params)
        return stream


def _refail(stream: Stream, end: dict[str, Any]) -> None:
    """Rebuild the error of a request that failed before streaming, from its saved log."""
    from ._core import errors as _exceptions

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


def _read_body(
    ref: weakref.ReferenceType[Stream],
    reads: Iterator[bytes],
    close: Callable[[], None],
    out: queue.SimpleQueue[Any],
) -> None:
    """The background reader of a sync Stream: fold each read into the Stream as it arrives and
    pass its chunks on. It holds the Stream only while folding a read, so that a Stream nobody
    holds can be collected (and closed) while this thread waits for the socket."""
    clock = time.perf_counter_ns
    try:
        try:
            for data in reads:
                t_ns = clock()  # the moment the bytes came off the socket
                stream = ref()
                if stream is None:
                    return
                with stream._lock:
                    if stream.status not in _RUNNING:  # closed meanwhile: stop reading
                        return
                    chunks = stream._feed(data, t_ns)
                del stream
                if chunks:
                    out.put(chunks)
        except Exception as exc:
            stream = ref()
            if stream is None or stream._stop_requested:  # close() cut the read under us
                return
            error = stream._transport_error(exc)
            if error is None:  # not a transport failure: end the stream, hand the error over
                stream._end(clock(), status="truncated")
                out.put(exc)
            else:
                stream._end(clock(), status="truncated", exception=error)
        else:
            stream = ref()
            if stream is not None:
                stream._end(clock(), status="stopped" if stream._stop_requested and not stream._acc.done else None)
    finally:
        stream = ref()
        if stream is not None and not stream._stop_requested and stream.status in _RUNNING:
            stream._end(clock(), status="truncated")  # this thread died of something unexpected
        stream = None
        try:
            close()
        except Exception:  # a connection already cut: nothing left to release
            pass
        out.put(_END)


def _never_started(out: Any, opened: Any, task: Any) -> None:
    # A reader task cancelled before it ran never reached its `finally`: release its waiters.
    if not opened.done():
        opened.set_result(None)
        out.put_nowait(_END)


def _report_callback_error(callback: Any, exc: Exception) -> None:
    name = getattr(callback, "__qualname__", None) or repr(callback)
    print(f"nito_nb: the on_done callback {name} raised {type(exc).__name__}: {exc}", file=sys.stderr)


_RAW = operator.itemgetter(5)  # ServerSentEvent.raw, read in C


def _redacted(events: list[ServerSentEvent], secret: Secret) -> list[ServerSentEvent]:
    """``events`` with the key taken out of each one that echoes it (raw bytes and every field)."""
    # One search over the whole read first: the key holds no line break, so no occurrence spans
    # two events, and most reads have none (2 µs per event otherwise, on the hot path).
    if not secret.found_in(b"".join(map(_RAW, events))):
        return events
    out = []
    for event in events:
        if secret.found_in(event.raw):
            data, name, last_id, retry, comment, raw = event
            event = ServerSentEvent(
                redact(data, secret),
                redact(name, secret),
                None if last_id is None else redact(last_id, secret),
                retry,
                None if comment is None else redact(comment, secret),
                redact(raw, secret),
            )
        out.append(event)
    return out


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

    A str is the body itself when it reads as SSE text (it has a line break, or starts with an SSE
    field such as ``data:``, a ``:`` comment, or ``{`` as an error body does); any other str is a
    path, and a missing file is a FileNotFoundError. A file that holds no server-sent event at all (a CSV, a saved log, an HTML
    page) is a LogFormatError that says what it looks like and what reads it. Otherwise never
    raises for a mid-stream error or a truncated body: ``error``, ``done`` and ``status`` say what
    happened. The recording has no arrival times: ``timed`` is False, and ``ttft``, ``ttfb`` and
    ``elapsed`` are None (in a frame, ``t`` and ``gap`` are NaN).
    """
    path: Path | None = None
    if isinstance(source, (bytes, bytearray, memoryview)):
        body = bytes(source)
    elif isinstance(source, os.PathLike) or (isinstance(source, str) and not _is_sse_text(source)):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(
                errno.ENOENT, "No such file (read_sse reads a str that is not SSE text as a path)", str(source)
            )
        body = path.read_bytes()
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
    if path is not None and not len(stream.log) and body.strip():
        raise LogFormatError(_not_sse(path, body))
    return stream


#: Text that starts like an SSE body (a field name and its colon or line end, or a comment), or
#: like a recorded HTTP error body (a JSON object): no file name starts that way.
_SSE_START = re.compile(r"\ufeff?\s*(?:\{|:|(?:data|event|id|retry)(?::|$))")


def _is_sse_text(text: str) -> bool:
    return not text or "\n" in text or "\r" in text or _SSE_START.match(text) is not None


def _not_sse(path: Path, body: bytes) -> str:
    """What a file that holds no server-sent event looks like, and what reads it."""
    first = body.lstrip().split(b"\n", 1)[0][:200].decode("utf-8", "replace").strip()
    where = repr(str(path))
    if _first_line_is_log(body):
        return f"{where} is a log saved by Stream.save, not an SSE body: read it with nito_nb.load(path)."
    if path.suffix.lower() == ".csv" or first.startswith(("stream,", ",stream,")):
        return (
            f"{where} is a CSV file, not a recorded stream: nito_nb reads SSE bodies ('data: {{...}}' "
            "lines) and saved logs (.jsonl). A frame saved with to_csv is read back with "
            "nito_nb.frame(pandas.read_csv(path))."
        )
    return (
        f"{where} holds no server-sent event (it starts {first[:60]!r}): nito_nb reads recorded SSE "
        "bodies ('data: {...}' lines separated by blank lines) and logs saved by Stream.save (.jsonl, "
        "read with nito_nb.load)."
    )


def _first_line_is_log(head: bytes) -> bool:
    try:
        header = json.loads(head.lstrip().split(b"\n", 1)[0])
    except ValueError:
        return False
    return isinstance(header, dict) and "nito_nb_log" in header


def read_file(path: str | os.PathLike[str]) -> Stream:
    """A Stream from a file: a log saved by ``Stream.save`` (its first line says so, whatever the
    file's name), else a recorded SSE body. The one rule for ``frame(path)`` and ``--replay``."""
    with open(path, "rb") as f:
        head = f.readline(64 * 1024)
    return load(path) if _first_line_is_log(head) else read_sse(Path(path))


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
    if log.cut is not None:  # what was complete is loaded; the stream says the file was cut
        stream._acc.note("cut-log", log.cut, len(log))
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
    elif status == "truncated" and end.get("exception") == "EventTooLargeError":
        exception = EventTooLargeError(end.get("message") or "", size=None, limit=None)
    stream._end(last, status=status if status in ("stopped", "truncated") else None, exception=exception)
    return stream


