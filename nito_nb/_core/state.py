"""What a stream knows: :class:`StreamState`, fed by a source of bytes under one lock, and
:class:`StreamSnapshot`, what it has received so far as one immutable value.

The state is I/O-free (no network, no thread of its own): the Stream and the AsyncStream
(``_stream.py``) are shells that read a body and hand each read to :meth:`StreamState.feed`, and so
does any other source (a replay, a capture, a store). A renderer reads a snapshot, never the live
state: the snapshot is taken under the state's lock, in one step, so its text, tool calls, status
and counts belong to the same moment, and no fragment the reader thread appends afterwards can
change or tear it.

The fold of a read's events (the hot path, once per piece of the body) and the chunks it returns
are in ``folding.py``, the state's base: this module is the state's lifecycle around it.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import metrics
from .accumulate import Accumulator
from .answer_parts import Anomaly, ToolCall
from .encoding import BOMB_RATIO, PIECE, BodyBounds, TooLarge
from .errors import (
    APIError,
    BodyTooLargeError,
    EventTooLargeError,
    MidStreamError,
    NitoError,
    Secret,
    StreamTruncatedError,
    redact_error,
    redact_in_json,
)
from .folding import Chunks, EventFolding
from .http_errors import api_error, retry_after_of
from .layout import ChunkParser
from .log import HTTP_ERROR, ChunkLog
from .metrics import n_output_tokens, output_chunks_per_s, output_tps
from .redaction import StreamRedactor, redact_body
from .sse import EventTooLarge, SSEDecoder
from .status import RUNNING, Status

__all__ = ["StreamSnapshot", "StreamState", "frozen_tool_call"]


@dataclass(frozen=True)
class StreamSnapshot:
    """A Stream's results at one moment (``Stream.snapshot()``). Times are seconds since the
    request was sent (None for a recording without arrival times, or before they are known)."""

    status: Status
    content: str = ""
    reasoning: str = ""
    refusal: str | None = None
    #: The transcript of OpenAI's audio output (``delta.audio.transcript``), None when no audio came.
    audio_transcript: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    model: str | None = None
    id: str | None = None
    role: str | None = None
    finish_reason: str | None = None
    usage: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    anomalies: tuple[Anomaly, ...] = ()
    done: bool = False
    web_search: Any = None
    free_tier: Any = None
    n_chunks: int = 0
    #: K: the chunks that carried answer text (docs/METRICS.md's token-bearing chunks).
    n_token_chunks: int = 0
    #: Seconds the attempt that got the response spent opening its connection (docs/METRICS.md).
    connect: float | None = None
    ttfb: float | None = None
    ttft: float | None = None
    #: The last token-bearing chunk's arrival, seconds since the request was sent (docs/METRICS.md).
    last_token: float | None = None
    #: The last event's arrival, seconds since the request was sent (None before any event).
    last_event: float | None = None
    #: Seconds since the request was sent; once finished, to the last event.
    elapsed: float | None = None
    timed: bool = True
    exception: BaseException | None = None

    @property
    def finished(self) -> bool:
        return not self.status.running

    @property
    def n_output_tokens(self) -> int | float | None:
        """docs/METRICS.md's N: the usage's ``completion_tokens``; None without usage."""
        return n_output_tokens(self.usage)

    @property
    def output_tps(self) -> float | None:
        """docs/METRICS.md's ``output_tps`` so far: N / (elapsed − ttft); None without usage."""
        return output_tps(self.n_output_tokens, self.ttft, self.elapsed)

    @property
    def output_chunks_per_s(self) -> float | None:
        """docs/METRICS.md's ``output_chunks_per_s`` so far: K / (elapsed − ttft)."""
        return output_chunks_per_s(self.n_token_chunks, self.ttft, self.elapsed)


def frozen_tool_call(call: ToolCall) -> ToolCall:
    """A copy of a tool call that later fragments do not reach (its arguments as shown now)."""
    arguments = call.arguments
    return dataclasses.replace(call, _parts=[arguments] if arguments else [], _hold=None)


class StreamState(EventFolding):
    """Everything a stream knows, fed by its source and read by everyone else, under one lock.

    I/O-free: a function of the bytes fed and their arrival times. It owns the SSE decoder, the
    chunk parser, the accumulator, the timed log, the status and the error that ended the stream,
    the key to redact and the ``on_done`` callbacks waiting for the end; its base,
    :class:`~nito_nb._core.folding.EventFolding`, folds each read's events into them. The source
    operations (:meth:`feed`, :meth:`end`, :meth:`set_response`, :meth:`fail_http`, :meth:`fail`,
    :meth:`new_attempt`, :meth:`note`) and :meth:`snapshot` each take the lock, so a reader in one
    thread and a renderer in another never see half a read. ``owner`` is the object the errors'
    ``.stream`` points to (a Stream), held weakly so that a Stream nobody holds can be collected.
    """

    def __init__(
        self,
        request: dict[str, Any] | None = None,
        *,
        log: ChunkLog | None = None,
        max_event_size: int | None = None,
        max_body_size: int | None = None,
        owner: Any = None,
    ) -> None:
        self.log = log if log is not None else ChunkLog(request, t0_ns=time.perf_counter_ns())
        self.status: Status = Status.WAITING
        #: The exception that ended the stream badly, or None.
        self.exception: NitoError | None = None
        self.acc = Accumulator()
        self.decoder = SSEDecoder(max_event_size)  # the client sets the limit; recordings have none
        #: The body's content coding and its decoded size against ``max_body_size`` (the client
        #: sets the limit; recordings have none).
        self.body = BodyBounds(max_body_size)
        self._run = 0  # identical comments in a row (one read), ending at the last event logged
        self.parser = ChunkParser()
        self.first_token_ns: int | None = None
        self.last_token_ns: int | None = None
        self.n_token_chunks = 0
        #: The on_done callbacks waiting for the end (handed back by :meth:`end`).
        self.callbacks: list[Callable[[Any], Any]] = []
        #: The key the request carried: taken out of everything the server sends (see protect).
        self.secret: Secret | None = None
        #: Takes the key out of the decoded text of the chunks, across chunks (when protected).
        self.redactor: StreamRedactor | None = None
        # One lock keeps the folding of a read and every reading of results apart (a reader thread
        # feeds while a display thread takes snapshots). Reentrant: end() flushes through _take.
        self.lock = threading.RLock()
        self._owner = None if owner is None else weakref.ref(owner)

    @property
    def owner(self) -> Any:
        """What the errors' ``.stream`` is: the Stream this state belongs to, else the state."""
        return self if self._owner is None else self._owner()

    # -- an ended state crossing to another process (a run's workers send theirs back) -----------

    @property
    def portable(self) -> bool:
        """Whether this state can cross to another process: ended, without an exception (an
        error's ``.stream`` is the owner, which stays behind)."""
        return self.exception is None and self.status not in RUNNING

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the lock, the owner and the waiting callbacks, and never the key; only
        a :attr:`portable` state (``_recorded.to_wire``)."""
        if not self.portable:
            raise TypeError("only an ended StreamState without an exception crosses processes")
        state = dict(self.__dict__)
        del state["lock"], state["_owner"]
        state.update(callbacks=[], secret=None, redactor=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.lock = threading.RLock()
        self._owner = None

    def adopt(self, owner: Any) -> None:
        """Belong to ``owner`` (a Stream made around this state, ``_recorded.from_wire``)."""
        self._owner = weakref.ref(owner)

    def shift(self, delta_ns: int) -> None:
        """Move every time by ``delta_ns`` (onto another process's clock: ``_runs/clock.py``)."""
        self.log.shift(delta_ns)
        if self.first_token_ns is not None:
            self.first_token_ns += delta_ns
        if self.last_token_ns is not None:
            self.last_token_ns += delta_ns

    # -- what has arrived (read under the lock by the shells) --------------------------------

    @property
    def finished(self) -> bool:
        return self.status not in RUNNING

    @property
    def connect(self) -> float | None:
        return metrics.connect(self.log.connect_ns)

    @property
    def ttfb(self) -> float | None:
        log = self.log
        return metrics.ttfb(log.headers_ns, log.t0_ns) if log.timed else None

    @property
    def ttft(self) -> float | None:
        return metrics.ttft(self.first_token_ns, self.log.t0_ns) if self.log.timed else None

    @property
    def last_token(self) -> float | None:
        """The last token-bearing chunk's arrival, seconds since t0 (the end of ``itl``)."""
        return metrics.since(self.last_token_ns, self.log.t0_ns) if self.log.timed else None

    @property
    def last_event(self) -> float | None:
        """The last event's arrival, seconds since the request was sent (docs/METRICS.md's e2e);
        None before any event."""
        log = self.log
        times = log.times_ns()
        if not log.timed or not len(times):
            return None
        return metrics.e2e(times[-1], log.t0_ns)

    @property
    def elapsed(self) -> float | None:
        log = self.log
        if not log.timed:
            return None
        if not self.finished:
            return metrics.seconds(time.perf_counter_ns(), log.t0_ns)
        last = self.last_event
        if last is not None:
            return last
        return metrics.seconds(log.headers_ns or log.t0_ns, log.t0_ns)

    def snapshot(self) -> StreamSnapshot:
        """What has arrived so far, as one immutable value taken under the lock."""
        with self.lock:
            acc, log = self.acc, self.log
            usage, error = acc.usage, acc.error
            return StreamSnapshot(
                status=Status(self.status),
                content=acc.content,
                reasoning=acc.reasoning,
                refusal=acc.refusal,
                audio_transcript=acc.audio_transcript,
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
                n_token_chunks=self.n_token_chunks,
                connect=self.connect,
                ttfb=self.ttfb,
                ttft=self.ttft,
                last_token=self.last_token,
                last_event=self.last_event,
                elapsed=self.elapsed,
                timed=log.timed,
                exception=self.exception,
            )

    # -- the source operations ---------------------------------------------------------------

    def feed(self, data: bytes, t_ns: int) -> Chunks:
        """Fold one read of the body, arrived at ``t_ns``: decode its events, log them, accumulate
        them; return the chunks it completed. Raises :class:`EventTooLargeError` when an event
        goes past ``max_event_size`` (the events before it are kept)."""
        with self.lock:
            return self._feed(data, t_ns)

    def feed_live(self, data: bytes, t_ns: int) -> Chunks | None:
        """:meth:`feed`, unless the stream has already ended (closed meanwhile): then None, and
        nothing is fed. The live reader's one call per read."""
        with self.lock:
            if self.status not in RUNNING:
                return None
            return self._feed(data, t_ns)

    def _feed(self, data: bytes, t_ns: int) -> Chunks:
        if self.status is Status.WAITING:
            self.status = Status.STREAMING
        body = self.body
        try:
            if body.decoder is None and len(data) <= PIECE:  # the usual read: no copy, no generator
                body.count(len(data))
                return self._decode(data, t_ns)
            chunks = Chunks([], [], [])
            # decoded (or cut) in bounded pieces, all of this read's time
            for piece in body.pieces(data):
                chunks.extend(self._decode(piece, t_ns))
            return chunks
        except TooLarge as too_large:
            raise self._too_large(too_large) from None

    def _too_large(self, too_large: TooLarge) -> BodyTooLargeError:
        kept = f"What arrived before it ({self.acc.n_chunks} chunks) is kept in .stream."
        if too_large.bomb:
            wire = too_large.wire or 1
            message = (
                f"The body came compressed ({too_large.coding}) and decoded to {too_large.size:,} bytes from "
                f"{wire:,} on the wire (over {BOMB_RATIO}:1): a compression bomb, not an answer (answers "
                f"compress far less). The stream was stopped rather than decode "
                f"the rest. {kept} The server at {self.log.request.get('base_url') or 'this base URL'} is "
                "faulty or hostile: check it."
            )
        else:
            compressed = (
                ""
                if too_large.wire is None
                else f" (from {too_large.wire:,} bytes of {too_large.coding})"
            )
            message = (
                f"The body decoded to more than max_body_size ({too_large.limit:,} bytes){compressed}: the "
                f"stream was stopped rather than hold it in memory. {kept} If such a body is expected, raise "
                "max_body_size (Client(max_body_size=...) or stream(..., max_body_size=...))."
            )
        return BodyTooLargeError(
            message,
            size=too_large.size,
            limit=too_large.limit,
            wire=too_large.wire,
            stream=self.owner,
        )

    def _decode(self, data: bytes, t_ns: int) -> Chunks:
        """Decode, log and fold one piece of the body."""
        try:
            events = self.decoder.decode(data)
        except EventTooLarge as too_large:
            self._take(too_large.events, t_ns)  # the events before it are kept, as arrived
            kept = f"What arrived before it ({self.acc.n_chunks} chunks) is kept in .stream."
            # no event at all: saying "an event" sent people after the wrong cause
            if too_large.blank:
                message = (
                    f"The server sent more than {too_large.limit:,} bytes of empty lines and no event: it is "
                    f"faulty or hostile (an event stream holds events). The stream was stopped rather than "
                    f"hold them in memory. {kept} Check the server at "
                    f"{self.log.request.get('base_url') or 'this base URL'}."
                )
            else:
                message = (
                    f"An event went past max_event_size ({too_large.limit:,} bytes): the stream was "
                    f"stopped rather than hold it in memory. {kept} If such events are expected, raise "
                    "max_event_size (Client(max_event_size=...) or stream(..., max_event_size=...))."
                )
            raise EventTooLargeError(
                message,
                size=too_large.size,
                limit=too_large.limit,
                stream=self.owner,
            ) from None
        return self._take(events, t_ns)

    def end(
        self,
        t_ns: int | None = None,
        *,
        status: str | None = None,
        exception: NitoError | None = None,
    ) -> list[Callable[[Any], Any]] | None:
        """The body ended (or was cut) at ``t_ns`` (now if None): settle the status from what
        arrived (``done``, ``error`` or ``truncated``, unless ``status`` says otherwise) and keep
        everything. Returns the ``on_done`` callbacks for the caller to run, outside the lock; None
        when the stream had already ended (the first end counts, a second does nothing; after
        :meth:`fail`, it makes the failure final and hands back the callbacks that waited)."""
        if t_ns is None:
            t_ns = time.perf_counter_ns()
        with self.lock:  # the reader and a closing caller may both end it: the first one counts
            if self.status not in RUNNING:
                if self.status is Status.FAILED and self.callbacks:
                    # Its producer made a failure final (end() after fail(): no retry follows):
                    # the on_done callbacks that waited since before it run now, once.
                    callbacks, self.callbacks = self.callbacks, []
                    return callbacks
                return None
            acc = self.acc
            if self.decoder.pending:
                seq = len(self.log)
                self._take(self.decoder.flush(), t_ns)
                acc.note(
                    "unterminated", "the body ended inside an event (no blank line after it)", seq
                )
            acc.release()  # nothing more can complete a key: what was held back shows
            acc.check_end(len(self.log))
            # Only a live feed needs the layouts: an ended stream kept long (a run's) keeps none.
            self.parser.forget()
            if self.redactor is not None:
                self.redactor.forget()  # the layouts it read, which it holds too
            if status is None:
                status = (
                    Status.ERROR
                    if acc.error is not None
                    else Status.DONE
                    if acc.done
                    else Status.TRUNCATED
                )
            if exception is None and status == Status.ERROR:
                error = acc.error or {}
                message = str(error.get("message") or "an error chunk without a message")
                code = error.get("code")
                exception = MidStreamError(
                    f"The gateway reported an error mid-stream: {message}"
                    f"{'' if code is None else f' (code {code})'}. What arrived before it "
                    f"({len(acc.content):,} characters) is kept in .stream; retry, or try another model.",
                    code=code,
                )
            elif exception is None and status == Status.TRUNCATED:
                exception = StreamTruncatedError(
                    f"The stream ended without [DONE] after {acc.n_chunks} chunks: the answer may be "
                    "incomplete. What arrived is kept in .stream; retry, and if it keeps happening, "
                    "check for a proxy that cuts long responses."
                )
            if exception is not None:
                exception.stream = self.owner
                redact_error(exception, self.secret)
            self.status = Status(status)
            self.exception = exception
            self.log.end = {"status": self.status.value}
            if exception is not None:
                self.log.end["exception"] = type(exception).__name__
                self.log.end["message"] = exception.message
            callbacks, self.callbacks = self.callbacks, []
            return callbacks

    def protect(self, secret: Secret | str | None) -> None:
        """The key the request carried: from now on it is taken out of everything the server
        sends back (body events, their decoded text also when a key is escaped or split across
        chunks, error body, headers), and out of the errors; while the stream runs, what could
        still be the start of it is held back from every text a reader sees."""
        self.secret = secret if secret is None or isinstance(secret, Secret) else Secret.of(secret)
        self._guard()

    def _guard(self) -> None:
        """A new redactor and accumulator hold for the key (a new attempt starts afresh)."""
        secret = self.secret
        self.redactor = None if secret is None else StreamRedactor(secret)
        if self.status in RUNNING:
            self.acc.hold = secret

    def set_response(self, status_code: int, headers: Any, t_ns: int) -> None:
        """The response's status and headers arrived at ``t_ns`` (none that carries a credential
        or echoes the key is kept)."""
        with self.lock:
            log, secret = self.log, self.secret
            log.set_response(status_code, headers or {}, t_ns)
            # one search of all the values first: a key in one of them is in them all joined
            if secret is not None and secret.found_in("\n".join(log.headers.values())):
                log.headers = {k: v for k, v in log.headers.items() if not secret.found_in(v)}

    def set_encoding(self, content_encoding: str | None) -> None:
        """The body comes with this ``Content-Encoding``: what is fed from now on is decoded, in
        bounded pieces (``_core/encoding.py``; ``UnsupportedEncoding`` for a coding it does not
        decode)."""
        with self.lock:
            self.body.set_encoding(content_encoding)

    def set_connect(self, duration_ns: int) -> None:
        """The attempt under way took ``duration_ns`` to open its connection."""
        with self.lock:
            self.log.connect_ns = duration_ns

    def fail_http(
        self, status_code: int, headers: Any, body: bytes, t_ns: int, error: APIError | None = None
    ) -> APIError:
        """The server refused with an HTTP error: the body is logged (redacted), the status is
        ``failed``; returns the typed error (not raised): ``error`` if given (a redirect's, which
        the body does not tell), else the one of the status and body."""
        with self.lock:
            if self.secret is not None:
                body = redact_body(redact_in_json(body, self.secret), self.secret)
            self.set_response(status_code, headers, t_ns)
            log = self.log
            if not any(e.kind == "http-error" for e in log):
                log.append(t_ns, HTTP_ERROR, body)
            if error is None:
                error = api_error(
                    status_code,
                    body.decode("utf-8", "replace"),
                    content_type=log.headers.get("content-type", ""),
                    retry_after=retry_after_of(log.headers),
                )
            self.acc.error = {"code": error.code, "message": error.message}
            self.fail(error)
            return error

    def fail(self, error: NitoError) -> NitoError:
        """The request failed before any body: the status is ``failed`` with ``error`` (returned)."""
        with self.lock:
            error.stream = self.owner
            redact_error(error, self.secret)
            self.acc.release()
            self.status = Status.FAILED
            self.exception = error
            self.log.end = {
                "status": Status.FAILED.value,
                "exception": type(error).__name__,
                "message": error.message,
            }
            return error

    def new_attempt(self) -> None:
        """The attempt failed before the body and is tried again: forget its outcome (its error,
        its response and its log), count it, and keep the clock: t0 stays the first attempt's."""
        with self.lock:
            log = self.log
            self.log = ChunkLog(log.request, t0_ns=log.t0_ns, t0_wall=log.t0_wall)
            self.log.attempts = log.attempts + 1
            self.acc = Accumulator()
            self.status = Status.WAITING
            self.exception = None
            self._guard()

    def note(self, kind: str, message: str) -> None:
        """Record an anomaly at the current event (the same kind again only counts)."""
        with self.lock:
            self.acc.note(kind, message, len(self.log))

    def add_callback(self, callback: Callable[[Any], Any]) -> bool:
        """Keep ``callback`` for :meth:`end` to hand back; False (not kept) if it has ended."""
        with self.lock:
            if self.status not in RUNNING:
                return False
            self.callbacks.append(callback)
            return True
