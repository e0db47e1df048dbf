"""Progress of a run: a widget panel in Jupyter, the same table in a marimo cell, one line on
stderr elsewhere.

``panel_model(stats)`` (pure) turns the run's counts into what is shown: one line per model and
one for the run, so the panel's size never depends on the number of requests. ``Panel`` renders
it as HTML in an ipywidgets box with a Stop button. The panel is displayed with a ``text/html``
copy of the same table beside the widget, updated once more at the end: a saved notebook (where
no widget state survives) shows that static summary.

In marimo (no ipywidgets, and only the cell's thread may write its output) the run shown as a
cell's output (``Run._display_``) is followed in the cell: the same table, at the same rate
(``_display/marimo.py``), until the run ends; marimo's Stop stops the run.

Both displays are live outputs (``_display/sink.py``: one lock, one final render): the run's
writer thread calls ``update()`` as it works (it wakes at least twice a second) and ``finish()``
once the run has ended; each renders at most ``MAX_UPDATES_PER_S`` times a second. They need no
refresh thread of their own.
"""

from __future__ import annotations

import html
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._core.printable import printable
from .._display.sink import LiveSink

if TYPE_CHECKING:
    from .runner import Run

__all__ = [
    "MAX_UPDATES_PER_S",
    "Panel",
    "StderrLine",
    "panel_model",
    "progress_for",
    "show",
    "show_in_cell",
]

#: How long marimo's Stop waits for the stopped run's clean end before the final table.
STOP_WAIT_S = 30.0

#: A run's (or a sweep's) progress is rendered at most this often.
MAX_UPDATES_PER_S = 4.0
#: Without a terminal (a log file, CI), the stderr line is written at most this often.
QUIET_INTERVAL_S = 10.0


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.0f} min"


def _client_text(client: dict[str, Any] | None) -> str:
    """The client's own health: always its loop lag and CPU, and a warning when it limited the run."""
    if not client or client["client_lag_p99"] != client["client_lag_p99"]:  # no sample yet
        return ""
    cpu = client["client_cpu_max"]
    text = f"; client loop lag p99 {client['client_lag_p99'] * 1e3:.1f} ms" + (
        f", CPU {cpu:.0%}" if cpu == cpu else ""
    )
    if client["client_bound"]:
        text += f" (⚠ {client['client_note']})"
    return text


def _rate_text(m: dict[str, Any]) -> str:
    """A model's rate: requests ended per second; for a load run beside the rate its schedule
    asks, and once it ended the summary's achieved rate (docs/LOAD.md): at rate=2000 a client
    that managed 376/s showed 2000/s as achieved."""
    scheduled = m.get("scheduled_per_s")
    if scheduled is None:
        return f"{m['requests_per_s']:.1f} req/s"
    achieved = m.get("achieved_per_s")
    if achieved is not None:
        return f"achieved {achieved:.1f} req/s of {scheduled:.4g}/s scheduled"
    return f"{m['requests_per_s']:.1f} req/s of {scheduled:.4g}/s scheduled"


def panel_model(stats: dict[str, Any]) -> dict[str, Any]:
    """What the panel shows, as text: a header line and one row per model. Pure. The gateway's
    words in it (its error codes, an error's message) are printable: the same text goes to the
    panel, its text/plain and the stderr line."""
    rows = []
    for m in stats["models"]:
        errors = printable(
            ", ".join(f"{kind}: {n}" for kind, n in sorted(m["errors"].items())) or "none"
        )
        rows.append(
            {
                "model": m["model"],
                "fraction": m["finished"] / m["total"] if m["total"] else 1.0,
                "done": f"{m['finished']}/{m['total']}"
                + (f" ({m['stopped']} stopped)" if m.get("stopped") else ""),
                "in_flight": str(m["in_flight"]),
                "errors": errors,
                "rate": _rate_text(m)
                + ("" if m["tokens_per_s"] is None else f", {m['tokens_per_s']:.0f} tok/s"),
                "ttft": f"{_seconds(m['ttft_p50'])} / {_seconds(m['ttft_p90'])}",
                "itl": f"{_seconds(m['itl_p50'])} / {_seconds(m['itl_p90'])}",
                "cost": f"${m['cost']:.4f}",
            }
        )
    head = (
        f"{stats['state']}: {stats['finished']}/{stats['total']} requests, "
        f"elapsed {_seconds(stats['elapsed'])}"
        + (f", ETA {_seconds(stats['eta'])}" if stats["eta"] is not None else "")
        + (f", {stats['skipped']} already done in the store" if stats["skipped"] else "")
        + (f", {stats['retries']} retries" if stats["retries"] else "")
        + (
            f", rate limited {stats['rate_limited']}× (in flight ≤ {stats['limit']})"
            if stats["rate_limited"]
            else ""
        )
        + _client_text(stats.get("client"))
        + (f"; stopped sending: {stats['stop_reason']}" if stats.get("stop_reason") else "")
        + (
            f"; not sent to {', '.join(map(repr, stats['refused_models']))}: not found (404)"
            if stats.get("refused_models")
            else ""
        )
    )
    error = None if stats["error"] is None else printable(stats["error"])
    return {"head": head, "rows": rows, "error": error, "state": stats["state"]}


_COLUMNS = (
    ("model", "model"),
    ("done", "done"),
    ("in_flight", "in flight"),
    ("errors", "errors"),
    ("rate", "rate"),
    ("ttft", "TTFT p50 / p90"),
    ("itl", "ITL p50 / p90"),
    ("cost", "cost"),
)


def panel_html(model: dict[str, Any]) -> str:
    """The model as an HTML table (every value escaped: model names are data)."""
    e = html.escape
    head = "".join(
        f"<th style='text-align:left;padding:0 8px'>{e(title)}</th>" for _, title in _COLUMNS
    )
    body = []
    for row in model["rows"]:
        bar = (
            "<div style='width:120px;height:8px;background:#ddd;display:inline-block;margin-right:6px'>"
            f"<div style='width:{row['fraction'] * 100:.0f}%;height:8px;background:#4a8'></div></div>"
        )
        cells = []
        for name, _ in _COLUMNS:
            value = e(str(row[name]))
            cells.append(
                f"<td style='padding:0 8px'>{bar + value if name == 'done' else value}</td>"
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    error = f"<div style='color:#b00'>{e(model['error'])}</div>" if model["error"] else ""
    return (
        f"<div class='nito-run'><div>{e(model['head'])}</div>{error}"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def panel_text(model: dict[str, Any]) -> str:
    lines = [
        model["head"],
        *(
            f"  {r['model']}: {r['done']}, in flight {r['in_flight']}, errors {r['errors']}, "
            f"{r['rate']}, TTFT {r['ttft']}"
            for r in model["rows"]
        ),
    ]
    if model["error"]:
        lines.append(f"  {model['error']}")
    return "\n".join(lines)


class Panel(LiveSink):
    """The ipywidgets panel: the table and a Stop button. Updated by the run's writer thread.

    Once the run has ended the panel keeps its last table and lets go of the run: ipywidgets keeps
    every widget (and the button's handler) while its output exists, and a panel that held its
    Run kept the run's streams in memory after the user had dropped it."""

    refreshes = False  # the run's writer thread updates it

    def __init__(self, run: Run) -> None:
        import ipywidgets as widgets

        super().__init__(MAX_UPDATES_PER_S)
        self.run: Run | None = run
        self._final: dict[str, Any] | None = None  # the last table, once the run has ended
        self.n_updates = 0
        self.html = widgets.HTML(panel_html(panel_model(run.stats())))
        self.button = widgets.Button(
            description="Stop",
            button_style="danger",
            icon="stop",
            tooltip="End the run: in-flight requests are recorded as stopped",
        )
        self.button.on_click(self._stop)
        self.box = widgets.VBox([self.html, self.button])
        self._handles: list[Any] = []

    def _stop(self, _button: Any) -> None:
        run = self.run  # read once: the writer thread may end it meanwhile
        if run is not None:
            run.stop()

    def _model(self) -> dict[str, Any]:
        run = self.run
        if run is None:
            assert self._final is not None
            return self._final
        return panel_model(run.stats())

    def _draw(self, *, live: bool) -> None:
        self.n_updates += 1
        if live:
            self.html.value = panel_html(self._model())
            return
        self._final = self._model()
        self.run = None
        self.html.value = panel_html(self._final)
        self.button.disabled = True
        self.button.description = "Ended"
        bundle = self.bundle()
        for handle in self._handles:
            handle.update(bundle, raw=True)

    def bundle(self) -> dict[str, Any]:
        """The widget, with the table as text/html for a saved notebook (no widget state there)."""
        data = dict(self.box._repr_mimebundle_() or {})
        model = self._model()
        data["text/html"] = panel_html(model)
        data["text/plain"] = panel_text(model)
        return data

    def display(self) -> None:
        from IPython.display import display

        self._handles.append(display(self.bundle(), raw=True, display_id=True))


class StderrLine(LiveSink):
    """Outside Jupyter: one line on stderr, rewritten in place on a terminal. Lets go of the run
    once it has ended, as the Panel does (the run refers to its line)."""

    refreshes = False  # the run's writer thread updates it

    def __init__(self, run: Run, stream: Any = None) -> None:
        super().__init__(MAX_UPDATES_PER_S)
        self.run: Run | None = run
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.n_updates = 0
        self._last_quiet = time.monotonic()

    def _line(self) -> str:
        assert self.run is not None
        stats = self.run.stats()
        model = panel_model(stats)
        errors = sum(sum(m["errors"].values()) for m in stats["models"])
        # stopped by the user: not "not ok"
        stopped = sum(m.get("stopped", 0) for m in stats["models"])
        return (
            f"nito: {model['head']}, {errors} not ok"
            + (f", {stopped} stopped" if stopped else "")
            + (f" ({model['error']})" if model["error"] else "")
        )

    def _draw(self, *, live: bool) -> None:
        if not live:
            self.stream.write(("\r\x1b[K" if self.tty else "") + self._line() + "\n")
            self.stream.flush()
            self.run = None
            return
        self.n_updates += 1
        if self.tty:
            self.stream.write("\r\x1b[K" + self._line())
            self.stream.flush()
        elif time.monotonic() - self._last_quiet >= QUIET_INTERVAL_S:
            self._last_quiet = time.monotonic()
            self.stream.write(self._line() + "\n")


def progress_for(run: Run, progress: bool | None) -> Panel | StderrLine | None:
    """The display of a run: a Panel in a kernel, a StderrLine elsewhere, None with progress=False."""
    if progress is False:
        return None
    from .._display.marimo import in_marimo
    from .._display.notebook import in_kernel

    if in_marimo():
        # Only the cell's thread may write a marimo output, and a line on marimo's stderr from the
        # writer's thread would land in whichever cell runs: the run as a cell's output shows it.
        return None

    if in_kernel():
        try:
            return Panel(run)
        except ImportError:  # no ipywidgets: the line still says how it goes
            pass
    return StderrLine(run)


def show(run: Run) -> None:
    """Display the run: its panel in a kernel, its progress as text elsewhere."""
    progress = run.progress
    if isinstance(progress, Panel):
        progress.display()
    else:
        print(panel_text(panel_model(run.stats())))


def show_in_cell(run: Run, mark: Callable[[], Any], replace: Any = None) -> Any:
    """A run as a marimo cell's output (``Run._display_``): its table, followed in the cell until
    the run ends (``mark()`` changes when a request ends or starts); then the final table, the
    same as a Jupyter notebook's static copy. marimo's Stop stops the run and waits for its end."""
    from .._display.marimo import CellOutput, cell_html

    def table(_live: bool) -> str:
        return panel_html(panel_model(run.stats()))

    def stop() -> None:
        run.stop()
        run.wait(STOP_WAIT_S)

    if not run.done:
        CellOutput(
            table, ended=lambda: run.done, mark=mark, max_rate=MAX_UPDATES_PER_S, replace=replace
        ).follow_here(interrupted=stop)
    return cell_html(table(False))
