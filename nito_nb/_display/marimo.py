"""A marimo cell's output as a live output: a stream (or a run's panel) shown while it grows.

marimo runs no IPython display machinery: a cell's output is its last expression, formatted once
the cell's code has run, and ``marimo.output.replace`` rewrites it while the cell still runs.
Only the thread that runs the cell may write it (marimo's context is thread-local), so this sink
has no refresh thread: ``follow_here()`` ticks in the cell's thread, with the same ticks and the
same ``Throttle`` as the Jupyter outputs (``sink.LiveSink``), until the state ends, and renders the
final state there. It is called while marimo formats the cell's output (``_display_``), which
marimo does with the cell's context still current; marimo's Stop (an interrupt) lands in it as a
KeyboardInterrupt: the stream or run is stopped and its final state shown.

marimo stacks its outputs and re-sends the whole stack on each change, so there is nothing to
gain from the notebook's separate outputs (``slots.Slots``): each render replaces the output with
the whole HTML, which is the renderer's own (model text escaped, ``_render``). The final state is
``final_bundle``'s, the same rendering as a Jupyter cell's.

marimo is imported only here and only when a marimo cell shows something (it is an extra); the
renderer only when a stream is shown (a run asks ``in_marimo()`` and must not load markdown-it).
"""

from __future__ import annotations

import html as html_module
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .sink import LiveSink, stream_mark
from .snapshots import snapshot

if TYPE_CHECKING:
    from .._render import RenderCache

__all__ = ["CellOutput", "cell_html", "in_marimo", "instead", "stream_html"]

#: Renders per second of a marimo cell that shows a stream: the Jupyter outputs' rate.
DEFAULT_MAX_RATE = 20.0

Replace = Callable[[str], None]


def in_marimo() -> bool:
    """True while a marimo notebook (edit, run or export) runs the calling thread's cell."""
    marimo = sys.modules.get("marimo")  # nobody runs a marimo notebook without importing it
    if marimo is None:
        return False
    try:
        return bool(marimo.running_in_notebook())
    except Exception:  # an older or broken marimo: no live cell, the final rendering still works
        return False


def replace_cell_output(html: str) -> None:
    """marimo's own: the calling cell's output becomes ``html`` (already safe HTML)."""
    import marimo

    marimo.output.replace(marimo.Html(html))


def cell_html(html: str) -> Any:
    """What a ``_display_`` returns to marimo: the HTML as a marimo ``Html``."""
    import marimo

    return marimo.Html(html)


def instead(what: str, use: str) -> Any:
    """The one line a marimo cell shows for an ipywidgets view: marimo shows anywidgets, not
    ipywidgets' own controls (buttons, boxes, HTML), so such a view would be blank there."""
    line = f"{what} is made of ipywidgets, which marimo does not show: use {use} (docs/MARIMO.md)."
    return cell_html(f"<div class='nito-instead'>{html_module.escape(line)}</div>")


def stream_html(
    state: Any, *, live: bool, format: str = "markdown", cache: RenderCache | None = None
) -> str:
    """The HTML of a stream's state: its live parts while it runs, else Jupyter's final bundle."""
    from .._render import final_bundle, join_parts, render_parts

    if live:
        return join_parts(render_parts(state, format=format, live=True, cache=cache))["text/html"]
    return final_bundle(state, format=format)["text/html"]


class CellOutput(LiveSink):
    """A marimo cell's output that shows ``html(live)`` until ``ended()``, followed in the
    cell's thread (``follow_here()``). ``mark()`` changes whenever something new arrived.
    ``replace`` writes the output (marimo's ``output.replace`` by default; tests pass their own).

    Counters: ``n_updates`` renders, ``bytes_sent`` the UTF-8 size of the HTML sent."""

    refreshes = False  # only the cell's thread may write the output: follow_here() ticks there
    ends_itself = True
    refresher_name = "nito_nb-marimo-cell"

    def __init__(
        self,
        html: Callable[[bool], str],
        *,
        ended: Callable[[], bool],
        mark: Callable[[], Any] = lambda: None,
        max_rate: float = DEFAULT_MAX_RATE,
        replace: Replace | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(max_rate, clock)
        self._html = html
        self._is_ended = ended
        self._mark_of = mark
        self._replace = replace or replace_cell_output
        self.shown = ""  # the last HTML sent
        self.n_updates = 0
        self.bytes_sent = 0

    def _mark(self) -> Any:
        return self._mark_of()

    def _ended(self) -> bool:
        return self._is_ended()

    def _draw(self, *, live: bool) -> None:
        html = self._html(live)
        self._replace(html)
        self.shown = html
        self.n_updates += 1
        self.bytes_sent += len(html.encode("utf-8"))


def stream_output(
    stream: Any,
    *,
    format: str = "markdown",
    max_rate: float = DEFAULT_MAX_RATE,
    replace: Replace | None = None,
) -> CellOutput:
    """The live cell output of one stream (a Stream, or anything with its ``snapshot()`` and
    ``finished``)."""
    from .._render import RenderCache

    cache = RenderCache()

    def html(live: bool) -> str:
        return stream_html(snapshot(stream), live=live, format=format, cache=cache)

    def ended() -> bool:
        return bool(stream.finished)  # the state's flag: reading it never waits for the stream

    return CellOutput(
        html, ended=ended, mark=lambda: stream_mark(stream), max_rate=max_rate, replace=replace
    )


def show_stream(stream: Any, *, replace: Replace | None = None) -> Any:
    """A Stream's ``_display_`` in marimo: a sync Stream still running is followed live in the
    cell (the cell's output until it ends; Stop closes it), then its final state is returned, the
    same rendering as Jupyter's. An AsyncStream is never waited for here: its reader runs on the
    loop that runs this cell, so the cell shows the state at this moment (``await s.wait()``
    first for the whole answer)."""
    if not getattr(stream, "_is_async", False) and not stream.finished:
        stream_output(stream, replace=replace).follow_here(interrupted=stream.close)
    return cell_html(stream_html(snapshot(stream), live=False))
