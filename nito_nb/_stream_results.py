"""What a user reads of a Stream, and does with it once read: :class:`StreamResults`, the base
that :class:`~nito_nb.Stream` and :class:`~nito_nb.AsyncStream` share. It is the read-only face of
a :class:`~nito_nb._core.state.StreamState`: the results so far (grouped below: the answer, the
call, its timings), ``snapshot()``, ``message``, ``on_done``, ``reply``, ``save``, ``frame`` and
the rich display.

Nothing here writes to the state: what a byte source tells a Stream (``feed``, ``end``,
``set_response``...) is on its producer, ``_stream_source.py``, which the client, capture, replay
and recordings hold, so that a Stream's tab completion shows only what a user reads and does.
``_stream.py`` adds the two ways of reading a live body, as sibling classes: a thread for
:class:`~nito_nb.Stream`, a task for :class:`~nito_nb.AsyncStream`.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._core.answer_parts import Anomaly, ToolCall
from ._core.attachments import Attachment, check_images_back, image_list, resend_history
from ._core.deadlines import Deadlines
from ._core.errors import NitoError, StreamError, one_line
from ._core.log import ChunkLog
from ._core.printable import printable
from ._core.request import as_messages
from ._core.state import StreamSnapshot, StreamState
from ._core.status import RUNNING, Status

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["StreamResults", "announce_end", "listen_to_ends", "register_default_starts"]

#: The engine's only imports that point up, all lazy, each inside the method named here: a frame
#: of the Stream (the pandas adapter), its rich display in a notebook (the renderer) and its live
#: display as a marimo cell's output (marimo calls ``_display_``). Declared
#: in this one place; tests/test_architecture.py fails on any other import cycle.
UPWARD_IMPORTS = (
    ("StreamResults.frame", "nito_nb._frame.build"),
    ("StreamResults._repr_mimebundle_", "nito_nb._render"),
    ("StreamResults._display_", "nito_nb._display.marimo"),
)

#: How a Stream made by no client (``load``, ``read_sse``) continues a conversation in reply():
#: ``nito_nb.stream`` / ``nito_nb.astream``, registered by the package root (keys: is async), so
#: that the engine never imports the layers above it.
_default_starts: dict[bool, Callable[..., Any]] = {}


def register_default_starts(sync: Callable[..., Any], async_: Callable[..., Any]) -> None:
    """What reply() of a recorded Stream calls: ``sync`` for a Stream, ``async_`` for an AsyncStream."""
    _default_starts[False] = sync
    _default_starts[True] = async_


#: The ``_settled`` of every Stream whose callbacks have run: set once, shared (``_run_callbacks``).
_SETTLED = threading.Event()
_SETTLED.set()

#: Who hears of every request of this process as it ends, whoever sent it (the client, the magic,
#: the widget, a run, capture, watch, a user's StreamSource that called ``start()``): what
#: ``nito_nb.otel.instrument()`` listens with. A recording (``load``, ``read_sse``, a replay) sent
#: nothing and is not heard of. Each listener is called once per Stream, in the thread that ended
#: it, after its ``on_done`` callbacks.
_end_listeners: list[Callable[[Any], None]] = []


def listen_to_ends(listener: Callable[[Any], None]) -> Callable[[], None]:
    """Call ``listener(stream)`` as each request of this process ends (above); returns the call
    that stops it."""
    _end_listeners.append(listener)

    def stop() -> None:
        if listener in _end_listeners:
            _end_listeners.remove(listener)

    return stop


def announce_end(stream: StreamResults) -> None:
    """``stream`` is a request of this session that ended in another process (a run's worker sent
    it back, ``_recordings.from_wire``): its listeners hear of it here."""
    stream._sent_here = True
    stream._announce()


class StreamResults:
    """One streamed chat completion as a user reads it: the part a :class:`Stream` and an
    :class:`AsyncStream` share (results so far, ``snapshot()``, ``on_done``, the conversation,
    ``save``, ``frame``). Not made directly; fed by its producer (``_stream_source.py``)."""

    _is_async = False

    def __init__(
        self,
        request: dict[str, Any] | None = None,
        *,
        log: ChunkLog | None = None,
        raise_errors: bool = True,
        max_event_size: int | None = None,
        max_body_size: int | None = None,
        transport_errors: Callable[[BaseException, Any], NitoError | None] | None = None,
        state: StreamState | None = None,
    ) -> None:
        #: Everything fed so far, under its one lock (the reader is a thread for a Stream; a
        #: display thread may read an AsyncStream's snapshot). Given: an ended state from another
        #: process (``_recordings.from_wire``).
        if state is None:
            self._state = StreamState(
                request,
                log=log,
                max_event_size=max_event_size,
                max_body_size=max_body_size,
                owner=self,
            )
        else:
            self._state = state
            state.adopt(self)
        self.raise_errors = raise_errors
        # finished and its on_done callbacks have run (then the shared one that is set: below)
        self._settled = threading.Event() if state is None else _SETTLED
        self._callback_thread: int | None = None  # the thread running the callbacks, meanwhile
        self._consumed = False  # iterated or waited for: results are then what arrived so far
        # A request this process sent (its producer called start()), and whether the end listeners
        # heard of its end (once): see ``listen_to_ends``.
        self._sent_here = False
        self._announced = False
        # Set by the producer (``_stream_source.py``), read here: how the request was made (its
        # client, base URL, key and timeout) for reply(), None for a recorded Stream; and the
        # call's deadlines, which an AsyncStream's body keeps itself.
        self._route: Any = None
        self._deadlines: Deadlines | None = None
        # The ``schema=`` of the call (``_structured.Schema``), None when it gave none; set by the
        # producer. ``parsed`` keeps its answer once the stream ended (the text no longer changes).
        self._schema: Any = None
        # The parts (image data) of the last user message, by sha256 or URL: reply() resends them;
        # the request metadata holds only their descriptors (_core/attachments.py).
        self._resend: dict[str, Attachment] = {}
        self._checked: Any = None
        # How the byte source's own failures (httpx's, for the client) become typed errors: given
        # by whoever makes the Stream, so that the engine knows no transport library.
        self._transport_errors = transport_errors

    def _results(self) -> StreamState:
        """The state to read results from (a sync Stream nobody iterates first waits for its end).
        Never raises: what describes the call (``status``, ``error``, ``done``, ``anomalies``), the
        display and nito_nb's own readers go through here."""
        return self._state

    def _answer(self) -> StreamState:
        """The state to read a result of the answer from: the one rule of every result property
        (``content``, ``reasoning``, ``reasoning_details``, ``refusal``, ``audio``,
        ``audio_transcript``, ``tool_calls``, ``finish_reason``, ``usage``, ``message``,
        ``messages``, and through them ``parsed``, ``parse_error``; ``logprobs``, ``choices``). A
        Stream whose body is read in the background and that nobody iterated or
        waited for is waited for (sync); if it ended in an error or a truncation and
        ``raise_errors`` is on, the first such read raises the error ``wait()`` raises, so that
        ``stream(...).content`` is never half an answer in silence. Then, as after ``wait()``, the
        Stream counts as read: its results are what arrived (also ``exc.stream.content``). An
        ``on_done`` callback is told the stream ended: its reads never raise."""
        unread = (
            not self._consumed
            and self._reads_in_background()
            and self._callback_thread != threading.get_ident()
        )
        state = self._results()
        if unread and state.finished:
            self._consumed = True
            self._raise_failure(self.raise_errors)
        return state

    def _reads_in_background(self) -> bool:
        """Whether a body is read for this Stream whether or not anybody iterates it (a sync
        Stream's reader thread). An AsyncStream reads only once iterated or awaited."""
        return False

    # -- the answer: what the model sent so far ------------------------------------------------
    # Text that the reader thread appends to is read under the state's lock (the accumulator
    # joins its pieces lazily); the rest is one attribute of the accumulator.

    @property
    def content(self) -> str:
        state = self._answer()
        with state.lock:
            return state.acc.content

    @property
    def reasoning(self) -> str:
        state = self._answer()
        with state.lock:
            return state.acc.reasoning

    @property
    def reasoning_details(self) -> list[dict[str, Any]]:
        state = self._answer()
        with state.lock:
            return state.acc.reasoning_details

    @property
    def audio_transcript(self) -> str | None:
        """The transcript of the answer's audio (OpenAI's audio output), None when none came."""
        state = self._answer()
        with state.lock:
            return state.acc.audio_transcript

    @property
    def refusal(self) -> str | None:
        """The model's refusal (OpenAI structured outputs' ``delta.refusal``), None if none came."""
        return self._answer().acc.refusal

    @property
    def audio(self) -> dict[str, Any] | None:
        """The answer's audio as it came (``id``, ``expires_at``; ``data_chars``: the size of its
        base64 data, which stays in the log), None when none came."""
        return self._answer().acc.audio

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self._answer().acc.tool_calls

    @property
    def finish_reason(self) -> str | None:
        return self._answer().acc.finish_reason

    @property
    def usage(self) -> dict[str, Any] | None:
        return self._answer().acc.usage

    @property
    def error(self) -> dict[str, Any] | None:
        return self._results().acc.error

    @property
    def done(self) -> bool:
        """True once ``[DONE]`` arrived."""
        return self._results().acc.done

    @property
    def anomalies(self) -> list[Anomaly]:
        return self._results().acc.anomalies

    # -- structured output (docs/STRUCTURED.md): the answer read with the call's schema --------

    def _structured(self) -> Any:
        """The answer checked against the schema (``_structured.Checked``) once the stream ended;
        None while it runs, or when the call asked for no schema."""
        from ._structured import structure_of

        state = self._results()
        if not state.finished:
            return None
        if self._checked is None:
            schema = structure_of(self)
            if schema is None:
                return None
            self._checked = schema.check(self.content, self.refusal)
        return self._checked

    @property
    def parsed(self) -> Any:
        """The answer as the ``schema=``'s object (the pydantic model's instance, or the dict for
        a dict schema), validated once the stream ended; None while it runs, when it is invalid
        (see ``parse_error``) or when the call asked for no schema."""
        checked = self._structured()
        return None if checked is None else checked.value

    @property
    def parse_error(self) -> Any:
        """None, or why the answer is not the schema's object: a ``ParseError`` whose ``errors``
        name each failure by field path and message (``str()`` gives them on one line)."""
        checked = self._structured()
        return None if checked is None else checked.error

    # -- token confidence (docs/STRUCTURED.md): OpenAI's logprobs, when the call asked for them --

    @property
    def logprobs(self) -> list[dict[str, Any]]:
        """The answer's tokens with their log probabilities, in order, as the chunks sent them
        (``logprobs=True, top_logprobs=K``): ``{"token", "logprob", "bytes", "top_logprobs"}``
        each, accumulated across chunks (choice 0's ``logprobs.content``; a refusal's tokens are
        in ``frame().nito.tokens()``). Empty when none came."""
        from ._core.logprobs import logprobs_of
        from ._core.text_slots import text_slots

        state = self._answer()  # one rule with content: a broken unread stream raises
        # While the stream runs, the tokens that could still start the key are held back, as the
        # content's end is (docs/SECURITY.md, "The tokens of logprobs"); where they start and how
        # many events arrived are read at once, so that no chunk starting the key comes between.
        with state.lock:
            held = (
                state.redactor.held_token()
                if state.redactor is not None and state.acc.hold is not None
                else None
            )
            arrived = len(state.log)
        tokens: list[dict[str, Any]] = []
        for event in state.log:
            # after [DONE]: not the answer's (rule 9)
            if event.seq >= arrived or event.kind == "done":
                break
            if event.kind == "chunk":
                chunk = event.chunk
                entries = logprobs_of(chunk)["content"]
                if held is not None and event.seq == held[0]:
                    first = text_slots(chunk)[held[1]][2]
                    tokens.extend(
                        entries[
                            : next((i for i, e in enumerate(entries) if e is first), len(entries))
                        ]
                    )
                    break
                tokens.extend(entries)
        return tokens

    @property
    def choices(self) -> list[Any]:
        """Every choice of a call that asked for several (``n=3``), in index order: each with its
        ``content``, ``reasoning``, ``refusal``, ``tool_calls``, ``finish_reason``, ``logprobs``
        and ``message``, folded from the log as choice 0 is (``_core/choices.py``). ``content`` and
        the other fields of the Stream stay choice 0's. One choice for a call with ``n`` of 1."""
        from ._core.choices import Choices

        state = self._answer()
        # While it arrives, what could still start the key stays back (as in content).
        return Choices(None if state.status not in RUNNING else state.secret).follow(state.log)

    # What the chunks say of themselves: read as they are, never waiting for the end.

    @property
    def role(self) -> str | None:
        return self._state.acc.role

    @property
    def id(self) -> str | None:
        return self._state.acc.id

    @property
    def model(self) -> str | None:
        """The model that served the call (as the gateway says), else the one requested."""
        return self._state.acc.model or self.request.get("model")

    @property
    def web_search(self) -> Any:
        return self._state.acc.web_search

    @property
    def free_tier(self) -> Any:
        return self._state.acc.free_tier

    @property
    def n_chunks(self) -> int:
        return self._state.acc.n_chunks

    # -- the call: what was asked, how it went, every event ----------------------------------------

    @property
    def request(self) -> dict[str, Any]:
        return self._state.log.request

    @property
    def status(self) -> Status:
        return self._state.status

    @property
    def finished(self) -> bool:
        return self._state.finished

    @property
    def exception(self) -> NitoError | None:
        """The exception that ended the stream badly (also for ``raise_errors=False``), or None."""
        return self._state.exception

    @property
    def log(self) -> ChunkLog:
        """Every event with its arrival time (``ChunkLog``)."""
        return self._state.log

    @property
    def n_events(self) -> int:
        return len(self._state.log)

    @property
    def attempts(self) -> int:
        """How many requests were sent: 1, or more when the request was retried before the body
        (a 429, a 5xx or a failed connection). The timings count from the first one."""
        return self.log.attempts

    @property
    def t0_wall(self) -> _dt.datetime:
        return self._state.log.t0_wall

    @property
    def timed(self) -> bool:
        """False for a recording read without arrival times (``read_sse``): its timings are None."""
        return self._state.log.timed

    # -- timings (seconds, from the first attempt's send; docs/METRICS.md) -----------------------

    @property
    def connect(self) -> float | None:
        """Seconds the attempt that got the response spent opening its connection (name lookup,
        TCP, TLS): part of ``ttfb`` and ``ttft``. None when unknown (docs/METRICS.md)."""
        return self._state.connect

    @property
    def ttfb(self) -> float | None:
        """Seconds from request sent to response headers."""
        return self._state.ttfb

    @property
    def ttft(self) -> float | None:
        """Seconds from request sent to the first chunk with content, reasoning or tool-call text."""
        return self._state.ttft

    @property
    def elapsed(self) -> float | None:
        """Seconds since the request was sent; once finished, to the last event (None untimed)."""
        return self._state.elapsed

    # -- made of the results -------------------------------------------------------------------

    @property
    def message(self) -> dict[str, Any]:
        """The answer as an assistant message, ready to send back in a conversation: ``content``,
        and when the stream had them, ``reasoning_details`` (merged), ``tool_calls`` (with their
        unread keys, such as Gemini's thought signature), the deprecated ``function_call`` and
        OpenAI's ``audio`` (its id)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        details = self.reasoning_details
        if details:  # OpenRouter asks for them back, unmodified, when tool calling continues
            message["reasoning_details"] = details
        calls = self.tool_calls
        if calls:
            tool_calls = [call.to_message() for call in calls if not call.function_call]
            if tool_calls:
                message["tool_calls"] = tool_calls
            for call in calls:
                if call.function_call:  # the deprecated functions API's shape
                    message["function_call"] = {"name": call.name, "arguments": call.arguments}
        audio = self.audio
        if audio and audio.get("id"):  # OpenAI: a previous audio answer is referred to by its id
            message["audio"] = {"id": audio["id"]}
        return message

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's messages followed by this answer: the conversation so far."""
        return [*self.request.get("messages", []), self.message]

    def snapshot(self) -> StreamSnapshot:
        """What has arrived so far, as one immutable value taken under the Stream's lock: the
        text, tool calls, status and timings of one moment. Never waits for the stream (unlike the
        properties of a sync Stream nobody iterates); renderers read this, not the live fields."""
        return self._state.snapshot()

    # -- how a stream ends: its source's end() and the Stream's own stop (close, a dropped Stream)

    def _end(
        self,
        t_ns: int | None = None,
        *,
        status: str | None = None,
        exception: NitoError | None = None,
    ) -> None:
        """The body ended (or was cut): the state settles the status; the ``on_done`` callbacks run
        in this thread, once (a second call does nothing)."""
        callbacks = self._state.end(t_ns, status=status, exception=exception)
        if callbacks is not None:  # this call ended it
            self._run_callbacks(callbacks)
            self._announce()
        # its producer says the failure is final: no retry follows
        elif self._state.status is Status.FAILED:
            self._announce()

    def _announce(self) -> None:
        """Tell the end listeners, once, that this request of this process ended."""
        if not self._sent_here or not _end_listeners:
            return
        with self._state.lock:  # the reader and a closing caller may both end it
            if self._announced:
                return
            self._announced = True
        for listener in tuple(_end_listeners):
            try:
                listener(self)
            except Exception as exc:  # as an on_done callback's: reported, never raised
                _report_callback_error(listener, exc, "the end listener")

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
            # Its waiters are woken; later ones find the shared Event that is always set. An Event
            # is a Condition, a Lock and a deque (about 1 KiB), kept by every ended Stream: a run
            # keeps thousands (bench/bench_runs_floor.py's memory per kept request).
            self._settled = _SETTLED

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
        if self._state.add_callback(callback):
            return self
        try:
            callback(self)
        except Exception as exc:
            _report_callback_error(callback, exc)
        return self

    # -- conversation, files, analysis -------------------------------------------------------
    def _reply(self, prompt_or_messages: Any, params: dict[str, Any], images_back: Any) -> Any:
        messages, model, merged = self._next_turn(
            as_messages(prompt_or_messages), params, check_images_back(images_back)
        )
        route = self._route
        if route is None:
            start = _default_starts.get(self._is_async)
            if start is None:
                raise NitoError(
                    "this Stream was made by no client: continue it with Client(...).stream(...)"
                )
            return start(messages, model=model, **merged)
        options = {**route.options(params), "raise_errors": self.raise_errors}
        if self._schema is not None and "schema" not in params and "response_format" not in params:
            # The next turn is read with the same schema (a pydantic model stays one).
            merged.pop("response_format", None)
            options["schema"] = self._schema
        return route.client.stream(messages, model=model, **{**options, **merged})

    def _next_turn(
        self, new_messages: list[dict[str, Any]], params: dict[str, Any], images_back: int
    ) -> tuple[list[dict[str, Any]], Any, dict[str, Any]]:
        """(messages, model, parameters) of the request that continues this conversation."""
        merged = {**self.request.get("params", {}), **params}
        model = merged.pop("model", self.request.get("model"))
        # The images of the last ``images_back`` turns that this Stream holds are sent again;
        # the others become a note of what was sent (docs/IMAGES.md).
        history, again = resend_history(self.messages, self._resend, images_back)
        if again:
            merged["images"] = [*again, *image_list(merged.get("images"))]
        return [*history, *new_messages], model, merged

    def _raise_failure(self, raise_errors: bool) -> None:
        """Raise the error that ended the stream badly (a mid-stream error or a truncation)."""
        if (
            raise_errors
            and self.exception is not None
            and self.status in (Status.ERROR, Status.TRUNCATED)
        ):
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
        acc = self._state.acc
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
        # The model's name and the finish reason are the server's words: printed, they must not
        # act on the terminal (an error's message is a repr, escaped already).
        return printable(f"<{type(self).__name__} {' '.join(parts)}>")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        try:
            from ._render import final_bundle
        except ImportError:  # the renderer is optional for the engine
            return {"text/plain": repr(self)}
        # Shown, not read: the display says how the stream ended (its error included), so it
        # renders a snapshot of the whole answer and never raises (see _answer).
        self._results()
        from ._structured import structure_of

        return final_bundle(self.snapshot(), structured=structure_of(self))

    def _display_(self) -> Any:
        """marimo's display protocol (only marimo calls it): a running sync Stream as a cell's
        output is shown live until it ends (``_display/marimo.py``); the final state is the same
        rendering as ``_repr_mimebundle_``'s."""
        from ._display.marimo import show_stream

        return show_stream(self)


def _report_callback_error(
    callback: Any, exc: Exception, what: str = "the on_done callback"
) -> None:
    name = getattr(callback, "__qualname__", None) or repr(callback)
    print(printable(f"nito_nb: {what} {name} raised {one_line(exc)}"), file=sys.stderr)
