"""The live view of a sweep in Jupyter: one line per rate step, the current rate's panel, a Stop
button, and the sweep's summary once it ended.

``sweep_model(sweep)`` turns the sweep's state into what is shown (a head line, one row per asked
rate, the current rate's panel model, the summary rows); ``sweep_html`` renders it, every value
escaped (model names are data). ``SweepView`` holds it in an ipywidgets box with the Stop button;
it is a live output (``_display/sink.py``) that the sweep's own thread updates while each rate
runs and finishes once the sweep has ended. Like a run's panel it is displayed with a
``text/html`` copy, updated once more at the end, so a saved notebook shows the summary.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

from .._core.fields import SWEEP
from .._core.printable import printable
from .._display.sink import LiveSink
from .progress import MAX_UPDATES_PER_S, panel_html, panel_model

if TYPE_CHECKING:
    from .sweep import Sweep

__all__ = ["SweepView", "sweep_html", "sweep_model"]

#: The summary's columns shown at the end (those present: ``model`` only with several models).
#: Its metrics' columns are declared in ``_core/fields.py`` (``Metric.sweep``).
SUMMARY_COLUMNS = ("rate", "model", "n", "ok", "achieved_rate", "error_rate", *SWEEP)


def _number(value: Any) -> str:
    if isinstance(value, float):
        return "–" if math.isnan(value) else f"{value:.3g}"
    return str(value)


def sweep_model(sweep: Sweep, achieved: dict[str, float] | None = None) -> dict[str, Any]:
    """What the view shows. ``achieved``: each ended run's achieved rate by run id (the caller
    computes each once: it needs the run's whole results)."""
    achieved = achieved if achieved is not None else {}
    runs = list(sweep.runs)
    steps = []
    current = None
    for i, rate in enumerate(sweep.asked):
        the_run = runs[i] if i < len(runs) else None
        if the_run is None:
            steps.append(
                {
                    "rate": f"{rate:g}/s",
                    "state": "not run" if sweep.ended else "waiting",
                    "requests": "",
                    "achieved rate": "",
                }
            )
            continue
        stats = the_run.stats()
        if not the_run.done:
            current = panel_model(stats)
        value = achieved.get(the_run.run_id)
        steps.append(
            {
                "rate": f"{rate:g}/s",
                "state": stats["state"],
                "requests": f"{stats['finished']}/{stats['total']}",
                "achieved rate": "" if value is None else f"{value:.3g}/s",
            }
        )
    n_done = sum(1 for r in runs if r.done)
    if not sweep.ended:
        head = f"sweep running: rate {len(runs)} of {len(sweep.asked)}" + (
            " (stopping)" if sweep.stopped else ""
        )
    else:
        state = "stopped" if sweep.stopped or any(r.error is not None for r in runs) else "done"
        head = f"sweep {state}: {n_done} of {len(sweep.asked)} rates"
    error = sweep.error or next((r.error for r in runs if r.error is not None), None)
    summary: list[dict[str, str]] = []
    if sweep.ended:
        df = sweep.summary().reset_index()
        columns = [
            c
            for c in SUMMARY_COLUMNS
            if c in df.columns and (c != "model" or df["model"].nunique() > 1)
        ]
        summary = [{c: _number(row[c]) for c in columns} for row in df.to_dict("records")]
    return {
        "head": head,
        "steps": steps,
        "current": current,
        "summary": summary,
        "error": None
        if error is None
        else printable(getattr(error, "message", None) or str(error)),
    }


def _table(rows: list[dict[str, str]], cls: str) -> str:
    if not rows:
        return ""
    e = html.escape
    head = "".join(f"<th style='text-align:left;padding:0 8px'>{e(name)}</th>" for name in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td style='padding:0 8px'>{e(v)}</td>" for v in row.values()) + "</tr>"
        for row in rows
    )
    return f"<table class='{cls}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def sweep_html(model: dict[str, Any]) -> str:
    e = html.escape
    error = f"<div style='color:#b00'>{e(model['error'])}</div>" if model["error"] else ""
    current = panel_html(model["current"]) if model["current"] is not None else ""
    summary = (
        f"<div class='nito-sweep-summary'><div>summary</div>{_table(model['summary'], 'nito-sweep-table')}"
        "</div>"
        if model["summary"]
        else ""
    )
    return (
        f"<div class='nito-sweep'><div class='nito-sweep-head'>{e(model['head'])}</div>{error}"
        f"{_table(model['steps'], 'nito-sweep-steps')}{current}{summary}</div>"
    )


def sweep_text(model: dict[str, Any]) -> str:
    lines = [
        model["head"],
        *(
            f"  {s['rate']}: {s['state']} {s['requests']} {s['achieved rate']}".rstrip()
            for s in model["steps"]
        ),
    ]
    lines += ["  " + ", ".join(f"{k} {v}" for k, v in row.items()) for row in model["summary"]]
    if model["error"]:
        lines.append(f"  {model['error']}")
    return "\n".join(lines)


class SweepView(LiveSink):
    """The ipywidgets view: the HTML and a Stop button that stops the whole sweep. Keeps its last
    view and lets go of the sweep (and its runs) once it has ended, as a run's Panel does."""

    refreshes = False  # the sweep's thread updates it

    def __init__(self, sweep: Sweep) -> None:
        import ipywidgets as widgets

        super().__init__(MAX_UPDATES_PER_S)
        self.sweep: Sweep | None = sweep
        self._final: dict[str, Any] | None = None
        self._achieved: dict[str, float] = {}
        self.html = widgets.HTML(sweep_html(self._model()))
        self.button = widgets.Button(
            description="Stop",
            button_style="danger",
            icon="stop",
            tooltip="End the sweep: the current rate's in-flight requests are recorded as"
            " stopped, no further rate runs",
        )
        self.button.on_click(self._stop)
        self.box = widgets.VBox([self.html, self.button])
        self._handles: list[Any] = []

    def _stop(self, _button: Any) -> None:
        sweep = self.sweep  # read once: the sweep's thread may end it meanwhile
        if sweep is not None:
            sweep.stop()

    def _model(self) -> dict[str, Any]:
        sweep = self.sweep
        if sweep is None:
            assert self._final is not None
            return self._final
        for the_run in list(sweep.runs):
            if the_run.done and the_run.run_id not in self._achieved:
                summary = the_run.summary()
                if len(summary) and "achieved_rate" in summary:
                    self._achieved[the_run.run_id] = float(summary["achieved_rate"].sum())
        return sweep_model(sweep, self._achieved)

    def _draw(self, *, live: bool) -> None:
        if live:
            self.html.value = sweep_html(self._model())
            return
        model = self._final = self._model()
        self.sweep = None
        self.html.value = sweep_html(model)
        self.button.disabled = True
        self.button.description = "Ended"
        bundle = self._bundle(model)
        for handle in self._handles:
            handle.update(bundle, raw=True)

    def _bundle(self, model: dict[str, Any]) -> dict[str, Any]:
        data = dict(self.box._repr_mimebundle_() or {})
        data["text/html"] = sweep_html(model)
        data["text/plain"] = sweep_text(model)
        return data

    def display(self) -> None:
        from IPython.display import display

        self._handles.append(display(self._bundle(self._model()), raw=True, display_id=True))
