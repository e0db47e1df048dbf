"""The one rate limiter of every live view (the magic's outputs, the widget, the grid, runs).

One update per chunk floods the kernel's IOPub socket (which then drops messages, the final one
included; docs/JUPYTER.md), so every view renders at most ``max_rate`` times a second. Timed from
the end of the previous render: on a busy machine or with a huge block, the stream still gets
``1 / max_rate`` seconds between renders instead of none.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = ["MAX_RATE", "Throttle"]

#: Renders per second of a live view unless its caller says otherwise (``max_rate``); a final
#: render is always sent on top.
MAX_RATE = 20.0


class Throttle:
    """``ready()``: may a render start now? ``done()``: a render just ended. Not thread-safe on
    its own: a view calls it under its lock."""

    __slots__ = ("_last", "clock", "due", "interval", "pending")

    def __init__(self, max_rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not (isinstance(max_rate, (int, float)) and math.isfinite(max_rate) and max_rate > 0):
            raise ValueError(f"max_rate must be positive, not {max_rate!r}")
        self.interval = 1.0 / max_rate
        self.clock = clock
        self._last: float | None = None
        #: The clock's time from which a render may start (``ready``): a caller that checks once
        #: per chunk may compare ``clock()`` with it and skip a call (``LiveSink.update``).
        self.due = -math.inf
        #: A render was refused since the last one: something may be waiting to be shown.
        self.pending = False

    @property
    def last(self) -> float | None:
        """When the last render ended (the clock's time), None before the first."""
        return self._last

    def ready(self) -> bool:
        """True if no render ended in the last ``interval`` seconds; else note a pending render."""
        if self.clock() < self.due:
            self.pending = True
            return False
        return True

    def hold(self, seconds: float) -> None:
        """No render starts before ``seconds`` from now (a live view's first render:
        ``LiveSink.first_render_delay``); one is pending meanwhile."""
        self.due = max(self.due, self.clock() + seconds)
        self.pending = True

    def done(self) -> None:
        """Record the end of a render (a pending one is now shown)."""
        self._last = self.clock()
        self.due = self._last + self.interval
        self.pending = False

    def idle_for(self) -> float:
        """Seconds since the last render ended (infinite before the first)."""
        return math.inf if self._last is None else self.clock() - self._last
