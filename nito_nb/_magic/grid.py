"""Several models side by side (``%%nito -m a,b,c``): the streams run concurrently on an
asyncio loop in a worker thread (``_loop.py``), which only reads them; the grid is a sink
of the display pipeline, one HTML output drawn by its own refresh thread (``_display/refresh.py``)
at the rate of its own ``Throttle``, like every live view; the cell's thread only waits for the
end (an Event, interruptible by the stop button), then draws the final grid and a table that
compares the models.

Why not render on the loop thread after each chunk: the loop also reads the bytes, and their
arrival times are taken there; a render would delay them.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._core.errors import MissingAPIKeyError, NitoError
from .._display.iopub import quiet_flushes
from .._display.sink import LiveSink
from .history import comparison_table
from .output import NO_KEY, error_line, in_kernel, show_attachments

if TYPE_CHECKING:
    from .magics import NitoMagics

__all__ = ["GRID_MAX_RATE", "GRID_WINDOW_CHARS", "ChoiceGrid", "Grid", "run_models"]

#: While several models stream side by side, each column shows about this many characters of the
#: answer's end (finished blocks are dropped from the front): each refresh re-sends the whole grid,
#: so the window keeps traffic proportional to time, not to the square of the answers.
GRID_WINDOW_CHARS = 2000
#: ... and the grid is refreshed at most this often: each refresh carries every column.
GRID_MAX_RATE = 10.0


class Grid(LiveSink):
    """Several streams side by side in one output (an HTML grid), a live output of the display
    pipeline (``_display/sink.py``): ``start()`` shows it and starts its refresh thread, which
    renders what arrived (at most ``max_rate`` times a second, capped at ``GRID_MAX_RATE``) and,
    while nothing arrives, the moving clocks; ``finish()`` renders the final state once, in the
    caller's thread."""

    refresher_name = "nito_nb-grid"

    def __init__(
        self,
        streams: Sequence[Any],
        models: Sequence[str],
        format: str,
        max_rate: float = GRID_MAX_RATE,
    ) -> None:
        from .._render import RenderCache

        super().__init__(min(max_rate, GRID_MAX_RATE))
        self.streams, self.models, self.format = list(streams), list(models), format
        self.caches = [RenderCache() for _ in self.streams]
        self.handle: Any = None
        self._sent: dict[str, str] | None = None
        self.n_messages = 0

    def _column(self, index: int, live: bool) -> tuple[str, str]:
        from .._display import snapshot
        from .._render import final_bundle, render_parts
        from .._render.choices import windowed
        from .._structured import structure_of

        state = self.streams[index]
        structured = structure_of(state)
        if not live or state.finished:
            bundle = final_bundle(state, format=self.format, structured=structured)
            return bundle["text/html"], bundle["text/plain"]
        parts = render_parts(
            snapshot(state),
            format=self.format,
            live=True,
            cache=self.caches[index],
            structured=structured,
        )
        return windowed(parts, GRID_WINDOW_CHARS)

    def bundle(self, live: bool) -> dict[str, str]:
        from .._render.choices import grid_bundle

        return grid_bundle(self.models, [self._column(i, live) for i in range(len(self.streams))])

    def _mark(self) -> tuple[Any, ...]:
        """Changes whenever a stream has received something (cheap to read)."""
        return tuple((s.n_events, s.status) for s in self.streams)

    def _draw(self, *, live: bool) -> None:
        self.refresh(live)

    def refresh(self, live: bool = True) -> None:
        """Render and send the grid now, if it changed (the throttle is the caller's business)."""
        from IPython.display import display

        bundle = self.bundle(live)
        if bundle == self._sent:  # a stall: nothing new to send
            return
        self._sent = bundle
        with quiet_flushes():  # nothing printed since the last message: no flush round trip
            if self.handle is None:
                self.handle = display(bundle, raw=True, display_id=True)
            else:
                self.handle.update(bundle, raw=True)
        self.n_messages += 1


class ChoiceGrid(Grid):
    """The choices of one stream (``n > 1``) side by side, as the models of a grid are, under the
    stream's status line (``_render/choices.py``); ``shade``: each answer shaded by its tokens'
    probability (``--shade``, one choice or several). Each render folds the events that came since
    the last one (``Choices.follow``); the final render folds the whole log afresh."""

    refresher_name = "nito_nb-choices"

    def __init__(
        self, stream: Any, n: int, format: str, max_rate: float = GRID_MAX_RATE, shade: bool = False
    ) -> None:
        from .._core.choices import Choices
        from .._render import RenderCache

        super().__init__([stream], [str(stream.request.get("model"))], format, max_rate)
        self.folded = Choices()
        self.caches = [RenderCache() for _ in range(n)]
        self.shade = shade

    def bundle(self, live: bool) -> dict[str, str]:
        from .._core.choices import Choices
        from .._display import snapshot
        from .._render.choices import choices_bundle
        from .._structured import structure_of

        stream = self.streams[0]
        state = snapshot(stream)  # taken first: the choices hold at least what it says
        if live and not state.finished:
            choices = self.folded.follow(stream.log)
        else:
            choices = Choices().follow(stream.log)
        return choices_bundle(
            state,
            choices,
            format=self.format,
            live=live,
            caches=self.caches,
            structured=structure_of(stream),
            window=GRID_WINDOW_CHARS,
            shade=self.shade,
        )


def run_models(
    magics: NitoMagics,
    messages: list[dict[str, Any]],
    models: list[str],
    params: dict[str, Any],
    args: Any,
    fmt: str,
) -> None:
    """Stream ``models`` at the same time and show them side by side (a grid in a kernel, one
    after the other in a terminal), then the comparison table; keep the list of Streams."""
    from .._client import AsyncClient
    from .._loop import LoopThread

    client = AsyncClient(**magics._connection())
    streams, names = [], []
    for model in models:
        try:
            streams.append(client.stream(messages, model=model, raise_errors=False, **params))
            names.append(model)
        except MissingAPIKeyError:  # a gateway model without a key: the others still run
            print(f"nito: {model}: {NO_KEY}", file=sys.stderr)
        except NitoError as exc:
            error_line(exc)
    if not streams:
        return
    if "images" in params:  # the prompt's images, once above the grid (the same for every model)
        show_attachments(streams[0])
    failures: dict[int, NitoError] = {}

    async def consume(index: int) -> None:
        try:
            await streams[index].wait(raise_errors=False)
        except NitoError as exc:  # an HTTP error when it connected: the Stream is "failed"
            failures[index] = exc
        except asyncio.CancelledError:
            # Cancelled while still connecting, the engine has not marked it: close it, so
            # that it says "stopped" like the others instead of "waiting" forever.
            await streams[index].aclose()
            raise

    async def run_all() -> None:
        try:
            await asyncio.gather(*(consume(i) for i in range(len(streams))))
        finally:
            await client.aclose()

    # The streams are read on a private loop in a worker thread (_loop.py); the grid
    # draws itself from its refresh thread; this thread, the cell's, waits for the end (an Event:
    # the stop button's KeyboardInterrupt lands in the wait) and draws the final grid.
    runner = LoopThread(run_all, name="nito_nb-models")
    grid = Grid(streams, names, fmt, magics.settings.max_rate) if in_kernel() else None
    try:
        runner.start()
        if grid is not None:
            grid.start()
        runner.wait()
    except BaseException:
        runner.cancel()  # the streams say "stopped"
        runner.wait(10)
        raise
    finally:
        _finish(magics, streams, names, grid, args, fmt)
    errors = [failures.get(i) or s.exception for i, s in enumerate(streams)]
    for error in filter(None, errors):
        if args.raise_:
            raise error
        error_line(error)


def _finish(
    magics: NitoMagics, streams: list[Any], names: list[str], grid: Grid | None, args: Any, fmt: str
) -> None:
    """The final view of every stream, the comparison table, and the streams kept."""
    from IPython.display import display

    if grid is not None:
        grid.finish()
    else:
        from .._display import TerminalDisplay

        for name, stream in zip(names, streams, strict=True):
            print(f"== {name} ==")
            TerminalDisplay(stream, format=fmt).finish()
    table = comparison_table(streams)
    if grid is not None:
        display(table)
    else:
        print(table.to_string(index=False))
    magics._keep(streams, args)
