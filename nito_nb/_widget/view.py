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
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import ipywidgets
import traitlets

from .._display import CLOCK_PERIOD, Refresher, Slots, Throttle
from .._display.refresh import due_in
from .._render import Part, RenderCache, check_format, join_parts, render_parts
from .._stream import AsyncStream, Stream

__all__ = ["DEFAULT_MAX_RATE", "StreamView"]

#: Renders per second of one view; a final render is always sent on top.
DEFAULT_MAX_RATE = 20.0


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _state_of(stream: Stream | AsyncStream) -> Any:
    """What to render for ``stream`` right now: its snapshot (never waits, never sees a half
    update). A failed Stream shows its exception as the error: the client sets no ``error`` for
    an HTTP error before the body, so the banner would not say what went wrong."""
    snap = stream.snapshot()
    if snap.status == "failed" and not snap.error and snap.exception is not None:
        exc = snap.exception
        code = getattr(exc, "status_code", None) or type(exc).__name__
        message = getattr(exc, "message", None) or str(exc)
        return dataclasses.replace(snap, error={"code": code, "message": message})
    return snap


class StreamView(ipywidgets.VBox):
    """The live view of one Stream: status line, reasoning, answer, tool-call cards, error banner.

    ``StreamView(stream)`` shows what has arrived so far. Keep it current in one of three ways:

    - a sync Stream iterated elsewhere: call ``view.update()`` after each chunk (cheap: it renders at
      most ``max_rate`` times a second, and once more when the stream has finished);
    - ``view.follow()``: iterate a sync Stream in a background thread (returns the thread);
    - ``await view.afollow()``: iterate an AsyncStream (or run it as a task).

    Counters for tests and benchmarks: ``n_updates`` (renders that sent something), ``n_messages``
    (widget values sent), ``bytes_sent`` (UTF-8 bytes of those values).
    """

    # Counters, not front-end state: deliberately not synced (syncing would add a message per render).
    n_updates = traitlets.Int(0)
    n_messages = traitlets.Int(0)
    bytes_sent = traitlets.Int(0)

    def __init__(
        self,
        stream: Stream | AsyncStream,
        *,
        format: str = "markdown",
        max_rate: float = DEFAULT_MAX_RATE,
        **kwargs: Any,
    ) -> None:
        # Plain attributes first: ipywidgets' __del__ calls close(), also when a check below fails.
        self._lock = threading.RLock()  # update() may come from the user's thread, a follower
        self._page = Slots()  # and the refresh thread
        self._refresher: Refresher | None = None
        self._fed = False  # update() was called since the refresh thread's last tick
        self._closed = False
        check_format(format)
        self._throttle = Throttle(max_rate)
        super().__init__(**kwargs)
        self.add_class("nito-stream-view")
        self.stream = stream
        # A view shows what has arrived so far: its reads of the results must not wait for the
        # end, as a sync Stream nobody iterates or shows does (its body is read in the background).
        stream._consumed = True
        self.format = format
        self.max_rate = max_rate
        self._cache = RenderCache()
        self._shown_events: int | None = None
        self._final = False
        self._thread: threading.Thread | None = None
        #: The exception a follow() thread ended with (the Stream keeps its own errors too).
        self.follow_error: BaseException | None = None
        self.update(force=True)
        if not self._final:
            # The view's one refresh thread: text that came during a stall is shown within a
            # period, and the status line's clock keeps moving (see _display/refresh.py).
            self._refresher = Refresher(
                self._tick, min(self._throttle.interval, CLOCK_PERIOD) / 2, "nito_nb-StreamView"
            ).start()

    # -- rendering -------------------------------------------------------------------------------

    @property
    def parts(self) -> list[Part]:
        """The parts shown now, in order."""
        with self._lock:
            return [slot.parts[key] for slot in self._slots for key in slot.keys]

    @property
    def finished(self) -> bool:
        """True once the final state of a finished stream has been rendered."""
        return self._final

    @property
    def _slots(self) -> list[Any]:
        return self._page.slots

    def update(self, *, force: bool = False) -> bool:
        """Render if the last render is at least ``1 / max_rate`` s old, or the stream has finished
        (the final render, sent once), or ``force``. Returns whether it rendered."""
        self._fed = True
        with self._lock:
            if self._final or self._closed:
                return False
            finished = self.stream.finished
            if not (force or finished or self._throttle.ready()):
                return False
            self._render(finished)
            return True

    def _tick(self) -> float | None:
        """The refresh thread's turn: what arrived since the last render (at the view's rate), the
        final state once the stream has finished, and the running clock while nothing arrives.
        While ``update()`` is being called the follower renders by itself (see _display/notebook.py)."""
        if self._fed:
            self._fed = False
            return None
        with self._lock:
            if self._final or self._closed:
                if self._refresher is not None:
                    self._refresher.stop()
                return None
            finished = self.stream.finished
            fresh = self.stream.n_events != self._shown_events or self._throttle.pending
            wait = 0.0 if finished else due_in(self._throttle, fresh)
            if wait > 0:
                return wait  # the refresh thread comes back then (_display/refresh.py)
            self._render(finished)
            return None

    def _render(self, finished: bool) -> None:
        self._shown_events = self.stream.n_events
        try:
            self._flush(live=not finished)
        finally:
            self._throttle.done()
        self._final = finished

    def _flush(self, *, live: bool) -> None:
        parts = render_parts(
            _state_of(self.stream), format=self.format, live=live, cache=self._cache
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
                    if self._closed:
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

    def close(self) -> None:
        """Close the view and its parts; a follow() thread stops its stream at the next chunk."""
        if self._refresher is not None:
            self._refresher.stop()
        with self._lock:
            self._closed = True
            for slot in self._slots:
                if slot.view is not None:
                    slot.view.close()
        super().close()

    def text(self) -> str:
        """The view as plain text (what a viewer without widgets should show)."""
        return join_parts(self.parts)["text/plain"]

    def __repr__(self) -> str:
        # ipywidgets' repr lists every synced trait, children included, recursively: keep it cheap.
        return f"<StreamView {self.stream!r}>"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        data = super()._repr_mimebundle_(**kwargs)
        if data is not None:
            data.update(join_parts(self.parts))
        return data

