"""The live display in a notebook: a thin, throttled shell over the renderer.

Why it is built this way (measured, see docs/JUPYTER.md): one display update per chunk floods the
kernel's IOPub socket, which then silently drops messages, the final one included; and re-sending
one growing output is quadratic. So:

- ``update()`` is cheap (it reads the clock) and renders at most ``max_rate`` times a second
  (``Throttle``); ``finish()`` always renders once more, so the final state is never lost;
- the answer goes out as separate outputs (``render_parts`` mapped by ``Slots``): a finished block
  is sent once and never again, only the small live tail and the status line are re-sent;
- outputs can only be appended: a part that belongs above others (reasoning after the first answer
  text) takes its place and the outputs below it are re-sent one further down;
- its first render waits ``FIRST_RENDER_DELAY`` (a quarter second) after ``start()``: a stream
  that ends sooner sends only its final state, one message per output;
- ``start()`` adds the view's refresh thread (``Refresher``): during a stall the text that came in
  the last ``1 / max_rate`` seconds is shown as soon as the throttle allows, and the status line's
  clock keeps moving (twice a second). ``update()``, the thread and ``finish()`` share one lock.
  That lifecycle is ``sink.LiveSink``'s, shared by every live output (``sink.LiveOutput``);
- the status line, which changes at every render (its counters, its clock), is re-sent at most
  every ``CLOCK_PERIOD`` while the stream runs, at once when the stream's state changes (waiting
  to streaming), and always at the end: each message costs the
  kernel two flushes of stdout and stderr, each a round trip to its IOPub thread, and the answer
  under it is what a reader follows (bench/bench_magic.py --kernel; docs/JUPYTER.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from .._render import RenderCache, check_format, render_parts
from .._structured import structure_of
from .iopub import quiet_flushes
from .refresh import CLOCK_PERIOD
from .sink import LiveSink, stream_mark
from .slots import Slot, Slots
from .snapshots import snapshot
from .terminal import TerminalDisplay
from .throttle import MAX_RATE

__all__ = [
    "CLOCK_PERIOD",
    "FIRST_RENDER_DELAY",
    "LiveDisplay",
    "TerminalDisplay",
    "in_kernel",
    "live_display",
]

DisplayFunction = Callable[..., Any]

#: Seconds from ``start()`` to a live view's first render. A stream that ends sooner (a short
#: answer, a recording, a fast simulator) is shown once, final: its live frames would go by
#: faster than anyone reads them, and in a kernel each message costs more than its bytes (a
#: ``sim/long`` cell of 0.2 s sent ten; bench/bench_magic.py --kernel). A longer one is on the page
#: a quarter second after its cell starts, then refreshed as before.
FIRST_RENDER_DELAY = 0.25


def _bundle_size(bundle: dict[str, str]) -> int:
    return sum(len(value.encode("utf-8")) for value in bundle.values())


class LiveDisplay(LiveSink):
    """Show a growing Stream (or any object with its attributes) in a notebook output, live.

    Call ``update()`` after every chunk and ``finish()`` once at the end (or use ``with``); call
    ``start()`` to show the state ``FIRST_RENDER_DELAY`` seconds later (a stream that ends sooner
    shows only its final state, at ``finish()``) and keep the view fresh during stalls (its refresh
    thread). Without
    ``start()`` nothing is shown before the first ``update()`` and nothing refreshes between calls.
    ``clock`` and ``display`` can be replaced (tests, benchmarks):
    ``display(bundle, raw=True, display_id=True)`` must return a handle with
    ``update(bundle, raw=True)``.

    Counters: ``n_updates`` rounds that sent something, ``n_messages`` display messages,
    ``bytes_sent`` total size of the bundles sent (UTF-8 bytes of html + plain text),
    ``render_seconds`` time spent rendering and sending (the throttled checks are not in it).
    """

    refresher_name = "nito_nb-live-display"
    first_render_delay = FIRST_RENDER_DELAY

    def __init__(
        self,
        stream_or_state: Any,
        *,
        format: str = "markdown",
        max_rate: float = MAX_RATE,
        clock: Callable[[], float] = time.monotonic,
        display: DisplayFunction | None = None,
    ) -> None:
        # Fail early on a bad format, without touching the state: a sync Stream read before it is
        # iterated would read itself to the end.
        check_format(format)
        super().__init__(max_rate, clock)
        self.state = stream_or_state
        self.format = format
        self.max_rate = max_rate
        self._clock = clock
        self._display = display
        self._cache = RenderCache()
        # The call's schema (schema=, or its request's response_format): the answer is then shown
        # as the object parsed so far (docs/STRUCTURED.md). Read from the request: never waits.
        self._structured = structure_of(stream_or_state)
        self._page = Slots()
        self._handles: list[Any] = []  # the outputs on the page, top to bottom
        self._blank: set[int] = set()  # outputs below the last slot, emptied
        self._status_sent = -math.inf  # when the status line was last sent (the clock's time)
        self._status_stale = False  # the status line on the page is not the last one rendered
        self._status_words = ""  # the state it said when last sent ("● streaming")
        self.n_updates = 0
        self.n_messages = 0
        self.bytes_sent = 0
        self.render_seconds = 0.0

    @property
    def _slots(self) -> list[Slot]:
        return self._page.slots

    def _show(self, bundle: dict[str, str]) -> Any:
        if self._display is not None:
            return self._display(bundle, raw=True, display_id=True)
        from IPython.display import display

        return display(bundle, raw=True, display_id=True)

    def _mark(self) -> Any:
        return stream_mark(self.state)

    def _draw(self, *, live: bool) -> None:
        started = time.perf_counter()
        try:
            with quiet_flushes():  # nothing printed since the last message: no flush round trip
                self._send(snapshot(self.state), live=live)
        finally:
            self.render_seconds += time.perf_counter() - started

    def _send(self, state: Any, *, live: bool) -> None:
        parts = render_parts(
            state, format=self.format, live=live, cache=self._cache, structured=self._structured
        )
        moved, _removed = self._page.reconcile(parts)
        sent = False
        handles = self._handles
        now = self._clock()
        for position, slot in enumerate(self._page.slots):
            if position == 0 and "status" in slot.parts:
                # The status line (always the first part): at most every CLOCK_PERIOD while live,
                # but at once when its output is new or the stream's state changes (waiting to
                # streaming: its first words).
                shown = moved != 0
                if shown and not (slot.dirty or self._status_stale):
                    continue
                state_words = slot.parts["status"].text.partition(" · ")[0]
                if (
                    shown
                    and live
                    and state_words == self._status_words
                    and now - self._status_sent < CLOCK_PERIOD
                ):
                    self._status_stale = True
                    continue
                self._status_sent, self._status_stale = now, False
                self._status_words = state_words
            elif not slot.dirty and (moved is None or position < moved):
                continue
            bundle = slot.bundle()
            if position < len(handles):
                handles[position].update(bundle, raw=True)
            else:
                handles.append(self._show(bundle))
            slot.view = handles[position]
            slot.dirty = False
            self.n_messages += 1
            self.bytes_sent += _bundle_size(bundle)
            sent = True
        # A part the renderer dropped leaves outputs below the last slot: blank them (once).
        for position in range(len(self._page.slots), len(handles)):
            if position not in self._blank:
                handles[position].update({"text/html": "", "text/plain": ""}, raw=True)
                self._blank.add(position)
                self.n_messages += 1
        self._blank.difference_update(range(len(self._page.slots)))
        if sent:
            self.n_updates += 1


def in_kernel() -> bool:
    """True inside a Jupyter kernel (not in plain Python or terminal IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def live_display(
    stream_or_state: Any, *, format: str = "markdown", max_rate: float = MAX_RATE
) -> LiveDisplay | TerminalDisplay:
    """A ``LiveDisplay`` in a notebook kernel, else a ``TerminalDisplay`` printing to stdout."""
    if in_kernel():
        return LiveDisplay(stream_or_state, format=format, max_rate=max_rate)
    return TerminalDisplay(stream_or_state, format=format, max_rate=max_rate)
