"""What every live output sink shares: a throttle, one refresh thread, one lock, a final render.

``LiveDisplay`` (one stream's outputs) and the magic's side-by-side grid are such sinks; a sink
says only what it shows (``_draw``) and what tells it that something new arrived (``_mark``).
The widget's ``StreamView`` follows the same rules (``due_in``) but is an ipywidget with its own
life (close, follow).

- ``start()`` renders now and starts the refresh thread (``Refresher``);
- ``update()``, for whoever feeds the stream, renders at most ``max_rate`` times a second; while
  it is being called the refresh thread stays out of the way (a fast stream is not rendered from
  two threads at once: it slowed the stream, bench/bench_magic.py; docs/BENCHMARKS.md);
- the refresh thread's tick renders what arrived as soon as the throttle allows, and the moving
  clock while nothing arrives (``due_in``);
- ``finish()`` renders the final state in the caller's thread; no tick renders after it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .refresh import CLOCK_PERIOD, Refresher, due_in
from .throttle import Throttle

__all__ = ["LiveSink"]


class LiveSink:
    """The lifecycle of a live output; subclasses implement ``_mark()`` and ``_draw(live)``."""

    #: The refresh thread's name.
    refresher_name = "nito_nb-live"

    def __init__(self, max_rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._throttle = Throttle(max_rate, clock)
        self._lock = threading.RLock()
        self._refresher: Refresher | None = None
        self._shown_mark: Any = None
        self._fed = False  # update() was called since the refresh thread's last tick
        self.finished = False

    def _mark(self) -> Any:
        """Something that changes whenever the state has received something new (cheap to read)."""
        raise NotImplementedError

    def _draw(self, *, live: bool) -> None:
        """Render the state and send what changed."""
        raise NotImplementedError

    def start(self) -> Any:
        """Show the state now, and refresh it from a thread of its own until ``finish()``."""
        with self._lock:
            if self.finished or self._refresher is not None:
                return self
            self._render(live=True)
            # Half the render interval: a tick that finds the feeder active skips, and the next
            # one still comes within an interval of the feeder's last update().
            self._refresher = Refresher(
                self._tick, min(self._throttle.interval, CLOCK_PERIOD) / 2, self.refresher_name
            ).start()
        return self

    def update(self) -> None:
        """Render if the last render ended at least ``1 / max_rate`` seconds ago; else do nothing."""
        self._fed = True
        # The cheap refusal first, without the lock: this runs once per chunk.
        if self.finished or not self._throttle.ready():
            return
        with self._lock:
            if self.finished or not self._throttle.ready():
                return
            self._render(live=True)

    def _tick(self) -> float | None:
        """The refresh thread's turn: what arrived since the last render, as soon as the throttle
        allows, and the running clock while nothing arrives; only when the feeder has gone quiet."""
        if self._fed:
            self._fed = False
            return None
        with self._lock:
            if self.finished:
                return None
            fresh = self._mark() != self._shown_mark or self._throttle.pending
            wait = due_in(self._throttle, fresh)
            if wait > 0:
                return wait  # the refresh thread comes back then (_display/refresh.py)
            self._render(live=True)
            return None

    def finish(self) -> None:
        """Render the final state (always, in the caller's thread; repeated calls send nothing new)."""
        if self._refresher is not None:
            self._refresher.stop()
        with self._lock:
            self._render(live=False)
            self.finished = True

    def _render(self, *, live: bool) -> None:
        try:
            self._shown_mark = self._mark()
            self._draw(live=live)
        finally:
            self._throttle.done()  # timed from the end of the render (see Throttle)
