"""What a Stream and an AsyncStream share: :class:`StreamBase`, the results, the I/O-free feeding
and the source API over the engine's pure parts (``_core``: the SSE decoder, the chunk reader and
accumulator, the log), under one lock. ``_stream.py`` adds the two ways of reading a live body,
as sibling classes: a thread for :class:`~nito_nb.Stream`, a task for :class:`~nito_nb.AsyncStream`.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._core.accumulate import Accumulator, Anomaly, ToolCall
from ._core.chunk import as_error_event
from ._core.errors import (
    APIError,
    EventTooLargeError,
    MidStreamError,
    NitoError,
    Secret,
    StreamError,
    StreamTruncatedError,
    api_error,
    redact,
    redact_error,
    redact_events,
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
)
from ._core.request import as_messages
from ._core.sse import EventTooLarge, ServerSentEvent, SSEDecoder
from ._core.state import StreamSnapshot, frozen_tool_call
from ._core.status import RUNNING, Status

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["StreamBase", "register_default_starts"]

_RUNNING = RUNNING

#: The engine's only imports that point up, both lazy, each inside the method named here: a frame
#: of the Stream (the pandas adapter) and its rich display in a notebook (the renderer). Declared
#: in this one place; tests/test_architecture.py fails on any other import cycle.
UPWARD_IMPORTS = (("StreamBase.frame", "nito_nb._frame.build"), ("StreamBase._repr_mimebundle_", "nito_nb.render"))

#: How a Stream made by no client (``load``, ``read_sse``) continues a conversation in reply():
#: ``nito_nb.stream`` / ``nito_nb.astream``, registered by the package root (keys: is async), so
#: that the engine never imports the layers above it.
_default_starts: dict[bool, Callable[..., Any]] = {}


def register_default_starts(sync: Callable[..., Any], async_: Callable[..., Any]) -> None:
    """What reply() of a recorded Stream calls: ``sync`` for a Stream, ``async_`` for an AsyncStream."""
    _default_starts[False] = sync
    _default_starts[True] = async_


class StreamBase:
    """One streamed chat completion: the part a :class:`Stream` and an :class:`AsyncStream` share
    (results so far, ``snapshot()``, ``feed()``/``end()`` and the rest of the source API,
    ``on_done``, conversation, ``save``, ``frame``). Not made directly."""

    _is_async = False

    def __init__(
        self,
        request: dict[str, Any] | None = None,
        *,
        log: ChunkLog | None = None,
        raise_errors: bool = True,
        max_event_size: int | None = None,
        transport_errors: Callable[[BaseException, Any], NitoError | None] | None = None,
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
        self._callbacks: list[Callable[[Any], Any]] = []
        # One lock keeps the folding of a read and every reading of results apart (the reader is
        # a thread for a Stream; a display thread may read an AsyncStream's snapshot).
        self._lock = threading.RLock()
        self._settled = threading.Event()  # finished and its on_done callbacks have run
        self._callback_thread: int | None = None  # the thread running the callbacks, meanwhile
        self._consumed = False  # iterated or waited for: results are then what arrived so far
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
                n_token_chunks=self._n_token_events,
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

    def set_route(self, route: Any) -> None:
        """How the request was made (its client, base URL, key, timeout), for reply()."""
        self._route = route

    @property
    def protected(self) -> bool:
        """A key is being redacted from what the server sends back (see :meth:`protect`)."""
        return self._secret is not None

    def new_attempt(self) -> None:
        """The attempt failed before any body and is tried again (the client's retries)."""
        self._retry()

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
            events = redact_events(events, self._secret)
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

    def _run_callbacks(self, callbacks: list[Callable[[Any], Any]]) -> None:
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

    def _replay(self) -> Iterator[dict[str, Any]]:
        """A finished Stream iterates again over its recorded chunks."""
        for event in self.log:
            if event.kind == "chunk":
                chunk = event.chunk
                if chunk is not None:
                    yield chunk

    def on_done(self, callback: Callable[[Any], Any]) -> Any:
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
    def _reply(self, prompt_or_messages: Any, params: dict[str, Any]) -> Any:
        messages, model, merged = self._next_turn(as_messages(prompt_or_messages), params)
        route = self._route
        if route is None:
            start = _default_starts.get(self._is_async)
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
            from .render import final_bundle
        except ImportError:  # the renderer is optional for the engine
            return {"text/plain": repr(self)}
        return final_bundle(self)


def _report_callback_error(callback: Any, exc: Exception) -> None:
    name = getattr(callback, "__qualname__", None) or repr(callback)
    print(f"nito_nb: the on_done callback {name} raised {type(exc).__name__}: {exc}", file=sys.stderr)


def _code_text(code: Any) -> str:
    return "" if code is None else f" (code {code})"
