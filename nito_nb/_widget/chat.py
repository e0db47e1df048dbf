"""The chat widget: ``ChatWidget`` is a chat panel built from one ``StreamView`` per turn
(``view.py``) and the prompt box (``prompt_box.py``).

Background turns (measured; see docs/JUPYTER.md): each ChatWidget turn runs in its own thread
hosting a private asyncio event loop that iterates an ``AsyncStream``. Stop schedules
``task.cancel()`` on that loop (``call_soon_threadsafe``); the engine turns the cancellation into
status ``stopped``, keeps what arrived and closes the response, within a few ms of the click
(docs/BENCHMARKS.md).
The alternatives lose: ``Stream.close()`` from another thread raises "generator already executing"
while the worker is inside the read, and closing the httpx response from another thread unblocks
the read but the engine then records a lost connection (``truncated``), not a stop; a
task on the kernel's own loop stalls whenever a cell blocks the kernel (and does not exist in
plain Python). A thread works the same on ipykernel 6 and 7: widget updates are comm messages,
routed by comm id, so they reach the browser after the cell that made the widget has finished.
Worker threads never print or display: failures become the turn's error banner or the status line.

Tools: ``tools=`` takes Python functions or schemas, as ``%%nito --tools`` does, through the same
``nito_nb.tools``; with ``run_tools=True`` the model's calls of those functions run on the turn's
thread (``tools.tool_round``), their one-line reports go into the transcript, and the results are
sent back as the next round, on the same thread and loop, until the model answers without calls
(at most ``tools.MAX_TOOL_ROUNDS`` rounds). Send stays disabled, and Stop works, across the rounds.
"""

from __future__ import annotations

import asyncio
import html
import itertools
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ipywidgets
import traitlets

from .._client import AsyncClient, Client, as_messages, check_keywords, keyword_options, one_model
from .._core.errors import ConfigurationError, NitoError, one_line
from .._core.printable import printable
from .._core.status import SYMBOLS, Status
from .._core.status import note as status_note
from .._display.throttle import MAX_RATE
from .._loop import LoopThread
from .._render import check_format, join_parts
from .._stream import AsyncStream, Stream
from .._structured import schema_of
from ..tools import ToolRun, python_tools, tool_round, tool_schemas
from .prompt_box import PromptBox
from .view import StreamView

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ChatWidget"]

#: How long close() waits for a turn's thread after stopping it (it ends within milliseconds).
_JOIN_TIMEOUT_S = 5.0

_USER_STYLE = (
    "margin: 8px 0 2px; padding: 4px 8px; border-radius: 6px;"
    " background: var(--jp-layout-color2, rgba(127,127,127,.12));"
    " color: var(--jp-content-font-color1, inherit); white-space: pre-wrap; overflow-wrap: anywhere;"
)
_BANNER_STYLE = (
    "border-left: 3px solid var(--jp-error-color1, #d32f2f); background: rgba(211,47,47,.1);"
    " padding: 4px 8px; margin: 2px 0; white-space: pre-wrap;"
)


@dataclass
class _Turn:
    """One prompt (or one round of tool results) and its answer; ``task`` exists while its
    thread runs. The rounds of one prompt share its ``runner``."""

    new_messages: list[dict[str, Any]]
    box: ipywidgets.VBox
    stream: AsyncStream | None = None
    view: StreamView | None = None
    user: ipywidgets.HTML | None = None
    runner: LoopThread | None = None  # its thread and private loop (_loop.py)
    task: asyncio.Task[Any] | None = None
    following: bool = False
    stop_requested: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    runs: list[ToolRun] | None = None  # a tool round: the runs whose results it sends
    kept: bool = False  # its messages went into the conversation (or were left out) already


def _user_html(messages: Iterable[dict[str, Any]], runs: list[ToolRun] | None = None) -> str:
    if runs is not None:  # a tool round shows what ran, one line each, not the raw results
        body = html.escape("\n".join(run.line for run in runs), quote=True)
        return f'<div class="nito-out nito-user nito-tool-runs" style="{_USER_STYLE}"><b>Tools</b>\n{body}</div>'
    lines = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, str):
            content = "" if content is None else str(content)
        role = str(message.get("role", "user"))
        lines.append(content if role == "user" else f"[{role}] {content}")
    body = html.escape("\n".join(lines), quote=True)
    return f'<div class="nito-out nito-user" style="{_USER_STYLE}"><b>You</b>\n{body}</div>'


def _user_text(messages: Iterable[dict[str, Any]], runs: list[ToolRun] | None = None) -> str:
    if runs is not None:
        return "\n".join(["Tools:", *(run.line for run in runs)])
    # A tool result is not the user's words: label it with its role, as _user_html does.
    return "\n".join(
        f"You: {m.get('content', '')}"
        if m.get("role", "user") == "user"
        else f"[{m.get('role')}] {m.get('content', '')}"
        for m in messages
    )


class ChatWidget(ipywidgets.VBox):
    """A chat panel: a transcript, an input box, Send and Stop, a model picker, a status line.

    ``ChatWidget(model="sim/chat", system=None, tools=None, run_tools=False, **params)``; ``tools``
    are Python functions (schema from the signature and docstring) or tool schemas, as for
    ``%%nito --tools``; with ``run_tools=True`` the model's calls of those functions run and their
    results go back (``nito_nb.tools``), otherwise calls are only shown. ``params`` go into every
    request body (``temperature``, ``sim={"tps": 40}``...; ``schema=`` a pydantic model or JSON-schema
    dict: each answer shown as the object parsed so far, docs/STRUCTURED.md), ``api_key``/``base_url``/``timeout``
    configure the client. Press Send, or Enter in the box (``multiline=True``: a text area, where
    Enter makes a new line and Shift+Enter sends). The answer streams in a background thread, so Stop
    works while it streams; Send is disabled meanwhile.

    From code: ``ask(prompt)`` (returns the turn's AsyncStream), ``stop()``, ``wait()``,
    ``messages`` (the conversation), ``streams`` (every turn's Stream), ``frame()``, ``clear()``,
    ``transcript()`` and ``snapshot()`` (a static copy for saved notebooks), ``close()``.
    """

    # Python-side state, not synced: the child widgets carry what the page shows, and no front-end
    # code reads these (syncing them would only add messages).
    model = traitlets.Unicode()
    busy = traitlets.Bool(False)
    status = traitlets.Unicode("ready")

    def __init__(
        self,
        model: str = "sim/chat",
        *,
        system: str | None = None,
        tools: Iterable[Any] | None = None,
        run_tools: bool = False,
        format: str = "markdown",
        multiline: bool = False,
        models: Iterable[str] | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: Any = None,
        max_rate: float = MAX_RATE,
        **params: Any,
    ) -> None:
        # Plain attributes first: ipywidgets' __del__ calls close(), also when a check below fails.
        self._lock = threading.RLock()
        self._turns: list[_Turn] = []
        self._current: _Turn | None = None
        self._closed = False
        self._widgets: tuple[ipywidgets.Widget, ...] = ()
        self._stopping = False  # stop() was called: no further tool round starts
        check_format(format)
        check_keywords(params, keyword_options(ChatWidget.__init__), "ChatWidget()")
        # a list was an unhashable TypeError from the picker's options
        if not isinstance(model, str):
            raise ConfigurationError(
                one_model(
                    model, "ChatWidget()", "More models for its picker: models=['sim/echo', ...]."
                )
            )
        if max_rate <= 0:
            raise ValueError(f"max_rate must be positive, not {max_rate!r}")
        items = [tools] if callable(tools) or isinstance(tools, dict) else list(tools or [])
        schemas = tool_schemas(items)
        #: The functions run_tools=True may run, by tool name (empty: calls are only shown).
        self._functions: dict[str, Callable[..., Any]] = python_tools(items) if run_tools else {}
        if run_tools and not self._functions:
            raise ValueError(
                "run_tools=True runs the Python functions among tools=: give at least one"
            )
        super().__init__()
        self.add_class("nito-chat")
        self.system = system
        self.format = format
        self.max_rate = max_rate
        self.params = dict(params)
        if self.params.get("schema") is not None:
            # schema=: every answer shown as the object parsed so far (docs/STRUCTURED.md); a wrong
            # one is refused now, not at the first question.
            self.params["schema"] = schema_of(self.params["schema"])
        if tools is not None:
            self.params["tools"] = schemas
        self._api_key = api_key
        self._base_url = base_url
        # One client per widget: each turn's loop gets its own httpx pool, closed when the turn ends.
        self._client = AsyncClient(api_key=api_key, base_url=base_url, timeout=timeout)
        self._history: list[dict[str, Any]] = []
        #: An unexpected exception of a worker thread (kept here, never printed), else None.
        self.last_exception: BaseException | None = None
        self._models_thread: threading.Thread | None = None

        from ..sim import SIM_MODELS

        options = list(dict.fromkeys([model, *(models or []), *SIM_MODELS]))
        self._transcript = ipywidgets.VBox()
        self._transcript.add_class("nito-chat-transcript")
        self._input = PromptBox(
            multiline=multiline,
            placeholder="Message (Shift+Enter sends)" if multiline else "Message (Enter sends)",
        )
        self._input.on_msg(self._on_input_msg)
        self._input.layout = ipywidgets.Layout(flex="1 1 auto", width="auto")
        self._input.add_class("nito-chat-input")
        self._send_button = ipywidgets.Button(
            description="Send", button_style="primary", icon="paper-plane"
        )
        self._send_button.add_class("nito-chat-send")
        self._stop_button = ipywidgets.Button(description="Stop", icon="stop", disabled=True)
        self._stop_button.add_class("nito-chat-stop")
        self._picker = ipywidgets.Combobox(
            value=model,
            options=options,
            ensure_option=False,  # any model id of the gateway may be typed in
            description="Model",
            placeholder="model id, e.g. sim/chat",
        )
        self._picker.add_class("nito-chat-model")
        self._status_line = ipywidgets.Label(value="ready")  # a Label shows text, never markup
        self._status_line.add_class("nito-chat-status")
        self._note = ipywidgets.Label(value="")
        self._note.add_class("nito-chat-note")
        rows = (
            ipywidgets.HBox([self._input, self._send_button, self._stop_button]),
            ipywidgets.HBox([self._picker, self._status_line]),
        )
        self._widgets = (
            self._transcript,
            self._input,
            self._send_button,
            self._stop_button,
            self._picker,
            self._status_line,
            self._note,
            *rows,
        )
        self.children = (self._transcript, *rows, self._note)
        self.model = model
        traitlets.link((self._picker, "value"), (self, "model"))
        self._send_button.on_click(self._on_send_click)
        self._stop_button.on_click(self._on_stop_click)
        self.observe(self._on_busy, names="busy")
        self.observe(self._on_status, names="status")
        if api_key or _env_key():
            self.refresh_models()

    # -- the conversation ------------------------------------------------------------------------

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation to send next: the system message, then every kept turn.

        A turn is kept when its answer has content or tool calls (a stopped or broken answer
        keeps what arrived); a turn whose request failed, or that got no answer, is left out so
        that the next request is not two user messages in a row.
        """
        with self._lock:
            system = [{"role": "system", "content": self.system}] if self.system else []
            return [*system, *(dict(m) for m in self._history)]

    @property
    def streams(self) -> list[AsyncStream]:
        """Every turn's Stream, oldest first (also failed and stopped ones)."""
        with self._lock:
            return [turn.stream for turn in self._turns if turn.stream is not None]

    def frame(self) -> pd.DataFrame:
        """All turns as one DataFrame (the pandas adapter, ``nito_nb.frame``)."""
        from .._frame import frame

        return frame(self.streams)

    # -- sending and stopping ----------------------------------------------------------------------

    def ask(self, prompt: str | list[dict[str, Any]] | None = None) -> AsyncStream:
        """Start a turn with ``prompt`` (default: the input box); returns its AsyncStream at once.

        A list of messages (e.g. tool results) is appended as it is. Raises ``RuntimeError`` while
        a turn streams, and ``ConfigurationError`` (no key, no model) before anything is sent.
        """
        from_box = prompt is None
        text = self._input.value if from_box else prompt
        if isinstance(text, str) and not text.strip():
            raise ValueError("nothing to send: the message is empty")
        new = as_messages(text)
        with self._lock:
            if self._closed:
                raise RuntimeError("this ChatWidget is closed")
            if self.busy:
                raise RuntimeError("a turn is still streaming: stop() it or wait() for it first")
            turn = self._new_turn(new, (self.model or "").strip())
            self._stopping = False
            self.busy = True
            if from_box:
                self._input.value = ""
            chain = [turn]  # this prompt's turn, then one per tool round (the last is current)
            turn.runner = LoopThread(
                lambda: self._follow(chain),
                name=f"nito_nb-chat-turn-{len(self._turns)}",
                on_end=lambda: self._turn_ended(chain),
            )
            turn.runner.start()
        assert turn.stream is not None
        return turn.stream

    def _new_turn(
        self,
        new: list[dict[str, Any]],
        model: str,
        runs: list[ToolRun] | None = None,
        runner: LoopThread | None = None,
    ) -> _Turn:
        """Send ``new`` after the conversation and add the turn to the transcript (under the lock)."""
        stream = self._client.stream(
            [*self.messages, *new], model=model, raise_errors=False, **self.params
        )
        user = ipywidgets.HTML(value=_user_html(new, runs))
        view = StreamView(stream, format=self.format, max_rate=self.max_rate)
        # The runner is set before the turn becomes current: wait() and stop() read it from there.
        turn = _Turn(
            new, ipywidgets.VBox([user, view]), stream, view, user, runner=runner, runs=runs
        )
        turn.box.add_class("nito-chat-turn")
        self._turns.append(turn)
        self._current = turn
        self.status = f"streaming: {model}"
        self._transcript.children = (*self._transcript.children, turn.box)
        return turn

    def stop(self) -> None:
        """Stop the streaming turn: its connection closes, the partial answer stays (``stopped``)."""
        # the same lock a tool round takes to become current: one of them sees the other
        with self._lock:
            self._stopping = True
            turn = self._current
        if turn is None:
            return
        with turn.lock:
            turn.stop_requested = True
        if turn.runner is not None:  # no loop yet: _follow sees stop_requested; closed: over
            turn.runner.call_soon(_cancel_following, turn)

    def wait(self, timeout: float | None = None) -> AsyncStream | None:
        """Block until the streaming turn (if any) has finished; returns the last turn's Stream."""
        turn = self._current
        if turn is not None and turn.runner is not None and turn.runner.wait(timeout):
            # past its last line already: this only waits for it to exit
            turn.runner.thread.join(1.0)
        streams = self.streams
        return streams[-1] if streams else None

    def clear(self) -> None:
        """Stop any turn and forget the conversation: transcript, messages and streams."""
        self.stop()
        self.wait(_JOIN_TIMEOUT_S)
        with self._lock:
            turns, self._turns = self._turns, []
            self._history = []
            self._transcript.children = ()
            self.status = "ready"
        for turn in turns:
            _close_turn(turn)

    # -- the turn's thread -------------------------------------------------------------------------

    def _turn_ended(self, chain: list[_Turn]) -> None:
        # On the turn's thread, after its loop closed. Nothing may escape it (_loop.py):
        # a failure is kept and shown as a note.
        turn = chain[-1]
        assert turn.runner is not None
        if turn.runner.error is not None:
            self._internal_error(turn.runner.error)
        try:
            self._end_turn(turn)
        except BaseException as exc:
            self._internal_error(exc)

    def _internal_error(self, exc: BaseException) -> None:
        self.last_exception = exc
        self.status = f"{SYMBOLS[Status.FAILED]} internal error: {one_line(exc)}"

    async def _follow(self, chain: list[_Turn]) -> None:
        """Follow the prompt's turn, then each tool round (``run_tools=True``), on this loop."""
        try:
            turn = chain[0]
            for rounds_done in itertools.count():
                await self._follow_turn(turn)
                self._keep(turn)
                next_turn = self._tool_round(turn, rounds_done)
                if next_turn is None:
                    return
                chain.append(next_turn)
                turn = next_turn
        finally:
            await self._client.aclose()  # this loop's connection pool; the loop ends with the turn

    def _tool_round(self, turn: _Turn, rounds_done: int) -> _Turn | None:
        """Run the answer's tool calls (if a round is due) and send their results: the next turn."""
        stream = turn.stream
        assert stream is not None
        if self._stopping or not (self._functions and stream.tool_calls):
            return None
        # The names are the model's words: printable, as every status (a bidi override in a
        # Label would reorder the line).
        self.status = printable(
            "running tools: " + ", ".join(str(call.name) for call in stream.tool_calls)
        )
        runs = tool_round(stream, self._functions, rounds_done)  # a failing tool is its result
        if not runs:
            return None
        model = str(stream.request.get("model") or self.model)
        with self._lock:
            if self._stopping or self._closed or turn not in self._turns:
                # Stopped (or cleared) while the tools ran: the results are kept, nothing is sent,
                # so the conversation stays valid (each call answered) for the next prompt.
                if turn.kept and turn in self._turns:
                    self._history.extend(run.message for run in runs)
                return None
            try:
                return self._new_turn([run.message for run in runs], model, runs, turn.runner)
            except NitoError as exc:  # refused before sending (the key went away...): a note
                self._history.extend(run.message for run in runs)
                self.status = f"{SYMBOLS[Status.FAILED]} {one_line(exc, with_type=False)}"
                return None

    async def _follow_turn(self, turn: _Turn) -> None:
        assert turn.stream is not None and turn.view is not None
        with turn.lock:
            turn.task = asyncio.current_task()
            turn.following = not turn.stop_requested
        try:
            if turn.following:
                await turn.view.afollow()
            else:  # Stop came before the thread started: nothing was sent yet
                await turn.stream.aclose()
                turn.view.update(force=True)
        except asyncio.CancelledError:
            pass  # Stop: afollow() has closed the stream (status stopped) and rendered it
        except NitoError:
            pass  # an HTTP error before the body: the stream is failed and its view says why
        finally:
            turn.following = False

    def _keep(self, turn: _Turn) -> None:
        """Add a finished turn to the conversation, once: its messages and the answer if one came
        (a stopped or broken answer keeps what arrived). A failed or empty answer is left out,
        except for a tool round's results, which answer calls already kept."""
        stream = turn.stream
        with self._lock:
            if turn.kept or stream is None or turn not in self._turns:
                return
            turn.kept = True
            if stream.status != Status.FAILED and (stream.content or stream.tool_calls):
                self._history.extend([*turn.new_messages, stream.message])
            elif turn.runs is not None:
                self._history.extend(turn.new_messages)

    def _end_turn(self, turn: _Turn) -> None:
        stream = turn.stream
        self._keep(turn)
        with self._lock:
            if self._current is turn:
                self._current = None
            if stream is not None:
                self.status = _status_note(stream)
            self.busy = False

    # -- models --------------------------------------------------------------------------------

    def refresh_models(self) -> threading.Thread:
        """Fetch the gateway's model list into the picker, in a background thread (returned).

        A failure becomes a one-line note under the widget, never an exception.
        """

        def run() -> None:
            try:  # nothing escapes a worker thread (see _loop.py)
                with Client(api_key=self._api_key, base_url=self._base_url) as client:
                    ids = [str(m.get("id")) for m in client.models() if m.get("id")]
                self._picker.options = list(dict.fromkeys([*self._picker.options, *sorted(ids)]))
                self._note.value = f"{len(ids)} gateway models"
            except Exception as exc:
                self._note.value = f"model list unavailable: {one_line(exc, with_type=False)}"

        thread = threading.Thread(target=run, name="nito_nb-chat-models", daemon=True)
        self._models_thread = thread
        thread.start()
        return thread

    # -- callbacks (these run on the kernel's shell thread) ----------------------------------------

    def _on_send_click(self, _button: Any) -> None:
        self._send_from_box()

    def _on_input_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("event") == "submit":
            text = content.get("text")
            if isinstance(text, str):  # the text as the user saw it (see PromptBox)
                self._input.value = text
            self._send_from_box()

    def _send_from_box(self) -> None:
        if self.busy:
            self.status = "still streaming: Stop it first"
            return
        if not self._input.value.strip():
            return
        try:
            self.ask()
        except (NitoError, ValueError, RuntimeError) as exc:
            self.status = f"{SYMBOLS[Status.FAILED]} {one_line(exc, with_type=False)}"

    def _on_stop_click(self, _button: Any) -> None:
        self.stop()

    def _on_busy(self, change: dict[str, Any]) -> None:
        # Two widgets, two messages, and the browser can draw between them: enable the button
        # that becomes usable first, so there is never a moment when neither Send nor Stop works
        # (seen in the browser test on ipykernel 6: Send already disabled, Stop not yet enabled).
        if change["new"]:
            self._stop_button.disabled = False
            self._send_button.disabled = True
        else:
            self._send_button.disabled = False
            self._stop_button.disabled = True

    def _on_status(self, change: dict[str, Any]) -> None:
        self._status_line.value = str(change["new"])

    # -- text for viewers without widgets ----------------------------------------------------------

    def transcript(self) -> dict[str, str]:
        """The conversation as shown, as a mime bundle (``text/html``, escaped, and ``text/plain``)."""
        htmls: list[str] = []
        texts: list[str] = []
        with self._lock:
            turns = list(self._turns)
        for turn in turns:
            htmls.append(_user_html(turn.new_messages, turn.runs))
            texts.append(_user_text(turn.new_messages, turn.runs))
            if turn.view is not None:
                bundle = join_parts(turn.view.parts)
                htmls.append(bundle["text/html"])
                texts.append(bundle["text/plain"])
        return {"text/html": "".join(htmls), "text/plain": "\n\n".join(texts)}

    def snapshot(self) -> None:
        """Display the transcript as it is now, as a static output (kept by saved notebooks and
        shown by viewers without widget support). Call it in a cell of its own."""
        from IPython.display import display

        display(self.transcript(), raw=True)

    def __repr__(self) -> str:
        # ipywidgets' repr lists every synced trait, children included, recursively: keep it cheap.
        return f"<ChatWidget model={self.model!r} turns={len(self._turns)} status={self.status!r}>"

    def _display_(self) -> Any:
        """marimo's display protocol (only marimo calls it): one line that says what to use there."""
        from .._display.marimo import instead

        return instead(
            "ChatWidget", "mo.ui.chat(nito_nb.marimo_chat(model, system=..., tools=...))"
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        data = super()._repr_mimebundle_(**kwargs)
        if data is not None:
            # What viewers without widgets show: the transcript as it was when displayed (a saved
            # notebook keeps this stale copy; snapshot() saves a current one).
            bundle = self.transcript()
            data["text/plain"] = "\n\n".join(filter(None, [repr(self), bundle["text/plain"]]))
            data["text/html"] = bundle["text/html"] or f"<pre>{html.escape(repr(self))}</pre>"
        return data

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the running turn (closing its connection), wait for its thread, close the widgets."""
        if self._closed:
            return
        self._closed = True
        self.stop()
        self.wait(_JOIN_TIMEOUT_S)
        with self._lock:
            turns = list(self._turns)
        for turn in turns:
            _close_turn(turn)
        for widget in self._widgets:
            widget.close()
        super().close()


def _cancel_following(turn: _Turn) -> None:
    # Runs on the turn's own loop, so it cannot race with the turn: only a stream still being
    # followed is cancelled (never the connection pool's close that comes after it).
    if turn.following and turn.task is not None:
        turn.task.cancel()


def _close_turn(turn: _Turn) -> None:
    for widget in (turn.view, turn.user, turn.box):
        if widget is not None:
            widget.close()


def _status_note(stream: Stream | AsyncStream) -> str:
    note = status_note(stream.status)
    if stream.status == Status.FAILED and stream.exception is not None:
        note += f": {one_line(stream.exception, with_type=False)}"
    return note


def _env_key() -> str | None:
    return os.environ.get("NITO_API_KEY")
