"""One protocol for every live output, and the lifecycle they all share.

A live output shows something that grows (a stream, a run, a sweep) while it grows, then its
final state. ``LiveOutput`` says what every one offers; ``LiveSink`` is the one implementation
of its lifecycle, and every live output of the package is a ``LiveSink``: ``LiveDisplay`` (one
stream's outputs in a notebook, ``notebook.py``), ``TerminalDisplay`` (stdout), the magic's
side-by-side ``Grid``, the widget's ``StreamView``, a run's ``Panel`` and ``StderrLine`` and a
sweep's ``SweepView``. A sink says only what it shows (``_draw``), what tells it that something
new arrived (``_mark``) and, if its state ends by itself, when (``_ended``). The rules, in the
manner of rich's ``Live`` (one lock, one refresh thread, a last render by the caller):

- ``start()`` renders now (a sink with a ``first_render_delay``: that long after, so that a state
  which ends sooner is rendered once, final) and starts the sink's one refresh thread
  (``Refresher``), unless its owner wakes it up anyway (``refreshes = False``: a run's writer
  thread, a sweep's thread);
- ``update()``, for whoever feeds the state, renders at most ``max_rate`` times a second
  (``feed(chunks)``: the same after each chunk, for a caller that iterates them); while
  it is being called the refresh thread stays out of the way (a fast stream is not rendered from
  two threads at once: it slowed the stream, bench/bench_magic.py; docs/BENCHMARKS.md);
- the refresh thread's tick renders what arrived as soon as the throttle allows, and the moving
  clock while nothing arrives (``due_in``);
- ``finish()`` stops the refresh thread, then renders the final state once, in the caller's
  thread; nothing renders after it, and a second call does nothing. A sink whose state ends by
  itself (the widget's stream) finishes itself at the first ``update()`` or tick that sees the end;
- ``close()`` stops the refresh thread and lets go without a final render (nothing renders after).

``update()``, the tick, ``finish()`` and ``close()`` take the sink's one lock, so no render ever
runs in two threads at once and none comes after the final one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from .refresh import CLOCK_PERIOD, Refresher, due_in
from .snapshots import optional
from .throttle import Throttle

__all__ = ["LiveOutput", "LiveSink", "stream_mark"]


def stream_mark(state: Any) -> Any:
    """The ``_mark`` of a sink that shows one stream (or any state with its counters): its
    count of events, else of chunks."""
    n_events = optional(state, "n_events")
    return n_events if n_events is not None else optional(state, "n_chunks")


@runtime_checkable
class LiveOutput(Protocol):
    """What every live output offers (``LiveSink`` implements it; see the module's rules)."""

    @property
    def finished(self) -> bool:
        """True once the final state has been rendered."""
        ...

    def start(self) -> Any:
        """Show the state now and keep it fresh until ``finish()`` or ``close()``; returns the output."""
        ...

    def update(self) -> Any:
        """Something new arrived: render it if the throttle allows."""
        ...

    def feed(self, items: Iterable[Any]) -> None:
        """Iterate ``items`` and ``update()`` after each one."""
        ...

    def finish(self) -> None:
        """Render the final state, once, in the caller's thread."""
        ...

    def close(self) -> None:
        """Stop refreshing and let go, without a final render."""
        ...


class LiveSink:
    """The lifecycle of a live output; subclasses implement ``_draw(live)`` and, when they have a
    refresh thread, ``_mark()``."""

    #: The refresh thread's name.
    refresher_name = "nito_nb-live"
    #: Whether ``start()`` gives the output a refresh thread; an output that its owner wakes up
    #: regularly anyway has none.
    refreshes = True
    #: Seconds from ``start()`` to the first render (0: at once). A view that holds it back shows
    #: a state that ends sooner only once, final; ``update()`` and the refresh thread render from
    #: then on as the throttle allows.
    first_render_delay = 0.0
    #: Whether the state says by itself when it has ended (``_ended``): then the first
    #: ``update()`` or tick that sees it renders the final state.
    ends_itself = False

    def __init__(self, max_rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        # What close() needs first: an ipywidget's __del__ calls it, also when __init__ failed.
        self._lock = threading.RLock()
        self._refresher: Refresher | None = None
        self._closed = False
        self._finished = False
        self._over = (
            False  # finished or closed: nothing renders any more (one flag: read per chunk)
        )
        self._shown_mark: Any = None
        self._fed = False  # update() was called since the refresh thread's last tick
        self._throttle = Throttle(max_rate, clock)  # last: a bad max_rate raises here

    @property
    def finished(self) -> bool:
        """True once the final state has been rendered."""
        return self._finished

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called: nothing renders any more."""
        return self._closed

    # -- what a sink says ------------------------------------------------------------------------

    def _draw(self, *, live: bool) -> None:
        """Render the state and send what changed (``live=False``: the final state)."""
        raise NotImplementedError

    def _mark(self) -> Any:
        """Something that changes whenever the state has received something new (cheap to read)."""
        return None

    def _ended(self) -> bool:
        """With ``ends_itself``: whether the state has ended (its final render is due)."""
        return False

    def _closing(self) -> None:
        """``close()``'s own work, under the lock (let go of what the output holds)."""

    # -- the lifecycle ---------------------------------------------------------------------------

    def start(self) -> Any:
        """Show the state now (or ``first_render_delay`` later), and refresh it from a thread of its
        own until ``finish()``."""
        with self._lock:
            if self._over or self._refresher is not None:
                return self
            if self.ends_itself and self._ended():
                self._finish_once()
                return self
            if self.first_render_delay > 0:
                self._throttle.hold(self.first_render_delay)  # the refresh thread renders then
            else:
                self._render(live=True)
            if self.refreshes:
                self._refresher = Refresher(
                    self._tick, self.refresh_period, self.refresher_name
                ).start()
        return self

    @property
    def refresh_period(self) -> float:
        """How often the refresh thread ticks: half the render interval, so that a tick that finds
        the feeder active skips and the next one still comes within an interval of the feeder's
        last update()."""
        return min(self._throttle.interval, CLOCK_PERIOD) / 2

    def follow_here(self, interrupted: Callable[[], None] | None = None) -> None:
        """Show the state now and keep it fresh from the caller's thread until it ends, then render
        the final state there: ``start()`` and ``finish()`` for a host whose outputs only the thread
        that runs the cell may write (marimo's). The refresh ticks are the same, at the same rate.
        For a sink whose state ends by itself (``ends_itself``) and that has no thread of its own
        (``refreshes = False``). A KeyboardInterrupt (the notebook's Stop) calls ``interrupted``,
        which must end the state; the final state is rendered all the same."""
        if not self.ends_itself or self.refreshes:
            raise TypeError(
                f"{type(self).__name__} cannot be followed: its state must end by itself"
            )
        self.start()
        stopped: BaseException | None = None
        with self._lock:
            if self._over:
                return
            refresher = self._refresher = Refresher(
                self._tick, self.refresh_period, self.refresher_name
            )
        try:
            refresher.run()  # until the tick that sees the end finishes the sink (which stops it)
        except KeyboardInterrupt as exc:
            stopped = exc
        if stopped is None and refresher.error is not None:
            stopped = refresher.error  # a tick's own failure, or the interrupt landing in a render
        if isinstance(stopped, KeyboardInterrupt) and interrupted is not None:
            interrupted()
        self._finish_once()
        if stopped is not None and not isinstance(stopped, KeyboardInterrupt):
            raise stopped

    def update(self, *, force: bool = False) -> bool:
        """Render if the last render ended at least ``1 / max_rate`` seconds ago (or ``force``);
        else do nothing. A sink whose state has ended (``ends_itself``) renders its final state
        instead, once. Returns whether it rendered."""
        self._fed = True
        # The cheap refusal first, without the lock: this runs once per chunk (50,000 times in a
        # 0.2 s cell: the throttle's test inlined, one call less, is 2-5% of such a cell).
        throttle = self._throttle
        if not force and throttle.clock() < throttle.due and not self.ends_itself:
            throttle.pending = True
            return False
        if self._over or not (
            force or self._throttle.ready() or (self.ends_itself and self._ended())
        ):
            return False
        if self.ends_itself and self._ended():
            return self._finish_once()
        with self._lock:
            if self._over or not (force or self._throttle.ready()):
                return False
            self._render(live=True)
            return True

    def feed(self, items: Iterable[Any]) -> None:
        """Iterate ``items`` (a stream's chunks, in the thread that reads them) and render as
        ``update()`` after each one would: its cheap refusal, which is all most chunks get, runs
        in the loop itself (a method call per chunk, 50,000 in a 0.2 s cell, took 2-3 times as
        long: 20-26 ms against 7-11 ms at load 9). An exception of the iteration passes on."""
        update = self.update
        if self.ends_itself:  # its state may end at any item: update() checks for it
            for _ in items:
                update()
            return
        throttle = self._throttle
        clock = throttle.clock
        for _ in items:
            if clock() < throttle.due:  # update()'s refusal, as it makes it
                self._fed = throttle.pending = True
            else:
                update()

    def _tick(self) -> float | None:
        """The refresh thread's turn: what arrived since the last render, as soon as the throttle
        allows, and the running clock while nothing arrives; only when the feeder has gone quiet."""
        if self._fed:
            self._fed = False
            return None
        if self.ends_itself and self._ended():
            self._finish_once()
            return None
        with self._lock:
            if self._over:
                return None
            fresh = self._mark() != self._shown_mark or self._throttle.pending
            wait = due_in(self._throttle, fresh)
            if wait > 0:
                return wait  # the refresh thread comes back then (_display/refresh.py)
            self._render(live=True)
            return None

    def finish(self) -> None:
        """Render the final state: once, in the caller's thread, after the refresh thread has
        stopped; later calls (and every update) render nothing."""
        self._finish_once()

    def _finish_once(self) -> bool:
        if self._refresher is not None:
            self._refresher.stop()  # no tick starts after this; one under way waits for the lock
        with self._lock:
            if self._over:
                return False
            self._render(live=False)
            self._finished = self._over = True
            return True

    def close(self) -> None:
        """Stop refreshing and let go, without a final render: nothing renders after this."""
        if self._refresher is not None:
            self._refresher.stop()
        with self._lock:
            self._closed = self._over = True
            self._closing()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.finish()

    def _render(self, *, live: bool) -> None:
        try:
            self._shown_mark = self._mark()
            self._draw(live=live)
        finally:
            self._throttle.done()  # timed from the end of the render (see Throttle)
