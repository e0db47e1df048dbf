"""The live view of one Stream as ipywidgets: ``StreamView(stream)`` shows any Stream (sync or
async) as it arrives; the chat (``chat.py``) shows one per turn. One rendering path, shared with
the magic through ``render_parts``.

Why it is built this way (measured; see docs/JUPYTER.md):

- Safety: every HTML value comes from ``render_parts`` (model text escaped or rendered by
  markdown-it with raw HTML off) or from ``html.escape``; ``ipywidgets.HTML`` runs ``<img onerror>``
  in unescaped values, so nothing else ever reaches a value. Labels (text only) hold status notes.
- Traffic: a view renders at most ``max_rate`` (20) times a second and always once more at the end.
  Each part of the answer is its own ``ipywidgets.HTML``; finished answer blocks never change again
  (finished blocks of one round share one widget), so only the live tail and the status line are
  re-sent: traffic is linear in the answer length, not quadratic.
- Lifecycle: a ``LiveSink`` (``_display/sink.py``), as every live output: one lock, one refresh
  thread, one final render. Its stream says when it has ended, so the view finishes itself (the
  first ``update()`` or tick that sees the end renders the final state); ``close()`` lets go.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import ipywidgets
import traitlets

from .._core.status import Status
from .._display import Slots
from .._display.sink import LiveSink
from .._display.throttle import MAX_RATE
from .._render import Part, RenderCache, check_format, join_parts, render_parts
from .._stream import AsyncStream, Stream
from .._structured import structure_of

__all__ = ["StreamView"]


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _state_of(stream: Stream | AsyncStream) -> Any:
    """What to render for ``stream`` right now: its snapshot (never waits, never sees a half
    update). A failed Stream shows its exception as the error: the client sets no ``error`` for
    an HTTP error before the body, so the banner would not say what went wrong."""
    snap = stream.snapshot()
    if snap.status == Status.FAILED and not snap.error and snap.exception is not None:
        exc = snap.exception
        code = getattr(exc, "status_code", None) or type(exc).__name__
        message = getattr(exc, "message", None) or str(exc)
        return dataclasses.replace(snap, error={"code": code, "message": message})
    return snap


class StreamView(LiveSink, ipywidgets.VBox):
    """The live view of one Stream: status line, reasoning, answer, tool-call cards, error banner.

    ``StreamView(stream)`` shows what has arrived so far. Keep it current in one of three ways:

    - a sync Stream iterated elsewhere: call ``view.update()`` after each chunk (cheap: it renders at
      most ``max_rate`` times a second, and once more when the stream has finished);
    - ``view.follow()``: iterate a sync Stream in a background thread (returns the thread);
    - ``await view.afollow()``: iterate an AsyncStream (or run it as a task).

    Counters for tests and benchmarks: ``n_updates`` (renders that sent something), ``n_messages``
    (widget values sent), ``bytes_sent`` (UTF-8 bytes of those values).
    """

    refresher_name = "nito_nb-StreamView"
    ends_itself = True  # the final render is due once the stream has finished

    # Counters, not front-end state: deliberately not synced (syncing would add a message per render).
    n_updates = traitlets.Int(0)
    n_messages = traitlets.Int(0)
    bytes_sent = traitlets.Int(0)

    def __init__(
        self,
        stream: Stream | AsyncStream,
        *,
        format: str = "markdown",
        max_rate: float = MAX_RATE,
        **kwargs: Any,
    ) -> None:
        # Plain attributes first: ipywidgets' __del__ calls close(), also when a check below fails.
        self._page = Slots()  # the outputs shown
        # One lock and one throttle: update() may come from the user's thread, a follower and the
        # refresh thread.
        LiveSink.__init__(self, max_rate)
        check_format(format)
        ipywidgets.VBox.__init__(self, **kwargs)
        self.add_class("nito-stream-view")
        self.stream = stream
        # A view shows what has arrived so far: its reads of the results must not wait for the
        # end, as a sync Stream nobody iterates or shows does (its body is read in the background).
        stream._consumed = True
        self.format = format
        self.max_rate = max_rate
        self._cache = RenderCache()
        # a schema= answer: the object as parsed (docs/STRUCTURED.md)
        self._structured = structure_of(stream)
        self._thread: threading.Thread | None = None
        #: The exception a follow() thread ended with (the Stream keeps its own errors too).
        self.follow_error: BaseException | None = None
        # Shown now; the view's one refresh thread then shows text that came during a stall
        # within a period, and keeps the status line's clock moving (see _display/refresh.py).
        self.start()

    # -- rendering -------------------------------------------------------------------------------

    @property
    def parts(self) -> list[Part]:
        """The parts shown now, in order."""
        with self._lock:
            return [slot.parts[key] for slot in self._slots for key in slot.keys]

    @property
    def _slots(self) -> list[Any]:
        return self._page.slots

    def _ended(self) -> bool:
        return self.stream.finished

    def _mark(self) -> Any:
        return self.stream.n_events

    def _draw(self, *, live: bool) -> None:
        self._flush(live=live)

    def _flush(self, *, live: bool) -> None:
        parts = render_parts(
            _state_of(self.stream),
            format=self.format,
            live=live,
            cache=self._cache,
            structured=self._structured,
        )
        moved, removed = self._page.reconcile(parts)
        for slot in removed:
            if slot.view is not None:
                slot.view.close()
        sent = 0
        for slot in self._page.slots:
            if not slot.dirty:
                continue
            value = slot.html()
            if slot.view is None:
                slot.view = ipywidgets.HTML(value=value)
            elif slot.view.value != value:
                slot.view.value = value
            else:
                continue
            sent += 1
            self.bytes_sent += _utf8_len(value)
        if moved is not None:
            self.children = tuple(slot.view for slot in self._page.slots if slot.view is not None)
        if sent:
            self.n_messages += sent
            self.n_updates += 1

    # -- following -------------------------------------------------------------------------------

    def follow(self) -> threading.Thread:
        """Iterate the (sync) Stream in a background thread, updating the view; returns the thread.

        ``close()`` makes the thread stop the stream at its next chunk (only the thread that
        iterates a sync Stream can close it).
        """
        if isinstance(self.stream, AsyncStream):
            raise TypeError("an AsyncStream is followed with `await view.afollow()`")
        if self._thread is not None:
            raise RuntimeError("this view already follows its stream")
        stream = self.stream

        def run() -> None:
            try:
                for _ in stream:
                    if self.closed:
                        break
                    self.update()
            except Exception as exc:
                # A StreamError at the end: the view shows it. Never print from this thread.
                self.follow_error = exc
            finally:
                if not stream.finished:
                    stream.close()  # safe: this is the thread iterating it
                self.update(force=True)

        self._thread = threading.Thread(target=run, name="nito_nb-StreamView", daemon=True)
        self._thread.start()
        return self._thread

    async def afollow(self) -> AsyncStream:
        """Iterate the AsyncStream, updating the view; the final state is always rendered.

        Between chunks the view's refresh thread catches up, so a pause after a burst never
        leaves the last ``1 / max_rate`` seconds of text unseen. Cancelling this coroutine stops
        the stream (status ``stopped``, what arrived kept, connection closed). It raises what
        iterating the stream raises (a ``StreamError`` at the end unless ``raise_errors=False``),
        after the final render.
        """
        stream = self.stream
        if not isinstance(stream, AsyncStream):
            raise TypeError(
                "afollow() follows an AsyncStream; for a Stream use follow() or update()"
            )
        try:
            async for _ in stream:
                self.update()
        finally:
            if not stream.finished:
                # Cancelled while connecting (before the body): nothing to keep, mark it stopped.
                await stream.aclose()
            self.update(force=True)
        return stream

    # -- lifecycle and reprs ---------------------------------------------------------------------

    def _closing(self) -> None:
        # close(): the view and its parts go; a follow() thread stops its stream at the next chunk.
        for slot in self._slots:
            if slot.view is not None:
                slot.view.close()
        ipywidgets.VBox.close(self)

    def text(self) -> str:
        """The view as plain text (what a viewer without widgets should show)."""
        return join_parts(self.parts)["text/plain"]

    def __repr__(self) -> str:
        # ipywidgets' repr lists every synced trait, children included, recursively: keep it cheap.
        return f"<StreamView {self.stream!r}>"

    def _display_(self) -> Any:
        """marimo's display protocol (only marimo calls it): one line that says what to use there."""
        from .._display.marimo import instead

        return instead(
            "StreamView", "the Stream itself as the cell's output, which marimo shows live"
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        data = super()._repr_mimebundle_(**kwargs)
        if data is not None:
            data.update(join_parts(self.parts))
        return data
