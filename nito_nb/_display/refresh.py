"""The one refresh thread of a live view (the idea of rich's ``live.py``).

A view is updated by whoever feeds its stream (after each chunk, throttled). That alone leaves a
stall invisible: the last ``1 / max_rate`` seconds of text wait for the next chunk, and the status
line's clock stops, so a model that thinks for 20 s looks hung mid-word. So each live view also has
one daemon thread that calls the view's ``tick()`` a few times a second; the view takes its one lock
in ``tick()`` as in ``update()`` and ``finish()``, and ``finish()`` renders a last time in the
caller's thread. The thread is never joined: ``stop()`` sets an Event and the view ignores any
tick after its final render (a KeyboardInterrupt landing in ``Thread.join`` marks a still-running
thread stopped, bpo-45274, so joins are avoided in every runner of this package).

When to render is one rule for every view (``due_in``): new data as soon as the view's throttle
allows, else the clock every ``CLOCK_PERIOD``. A tick that is early returns how long to wait, and
the thread sleeps that long instead of a whole period: new text is on the page within the
throttle's interval, not the interval plus a period.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .throttle import Throttle

__all__ = ["CLOCK_PERIOD", "Refresher", "due_in"]

#: While nothing arrives, a live view re-renders this often, so that its status line's elapsed
#: time visibly advances (at least once a second, with margin for a busy machine).
CLOCK_PERIOD = 0.5


def due_in(throttle: Throttle, fresh: bool) -> float:
    """Seconds until a live view's refresh thread should render (0: now). ``fresh``: something
    arrived since the last render; it is shown as soon as the throttle allows. Otherwise only the
    status line's clock moves, every ``CLOCK_PERIOD``. Before the first render: as soon as the
    throttle allows (a view may hold its first render back: ``Throttle.hold``)."""
    if throttle.last is None:
        return max(0.0, throttle.due - throttle.clock())
    wait = throttle.interval if fresh else CLOCK_PERIOD
    return max(0.0, wait - throttle.idle_for())


class Refresher:
    """Call ``tick()`` every ``period`` seconds in a daemon thread until ``stop()``; a tick that
    returns a number of seconds below the period is called again after that long instead.

    A tick that raises stops the thread and is kept in ``error`` (a worker thread never prints:
    since ipykernel 7.1 its output would land in whichever cell ran last).
    """

    def __init__(
        self, tick: Callable[[], object], period: float, name: str = "nito_nb-refresh"
    ) -> None:
        if period <= 0:
            raise ValueError(f"period must be positive, not {period!r}")
        self._tick = tick
        self.period = period
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.error: BaseException | None = None
        self.n_ticks = 0

    def start(self) -> Refresher:
        self._thread.start()
        return self

    def run(self) -> None:
        """Tick in the caller's thread until ``stop()`` (instead of ``start()``): for a host whose
        outputs only the thread that runs the cell may write (marimo's). A tick's exception ends
        it and is kept in ``error``, as in the thread."""
        self._run()

    def stop(self) -> None:
        """No tick starts after this returns (one under way finishes; the view's lock orders it)."""
        self._stopped.set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._stopped.is_set()

    def _run(self) -> None:
        delay = self.period
        while not self._stopped.wait(delay):
            try:
                wanted = self._tick()
                self.n_ticks += 1
            except BaseException as exc:  # nothing escapes a worker thread
                self.error = exc
                return
            delay = self.period
            if isinstance(wanted, (int, float)) and not isinstance(wanted, bool) and wanted > 0:
                delay = min(self.period, max(float(wanted), _MIN_DELAY))


#: The shortest sleep between two ticks (a tick asking for 0.0001 s must not spin).
_MIN_DELAY = 0.002
