"""Live views of a stream: one pipeline for the magic, the widget, the grid and runs.

- ``throttle.Throttle``: the one rate limiter;
- ``slots.Slots``: the one reconciler from rendered parts to outputs;
- ``refresh.Refresher``: the one refresh thread of a live view (stalls stay visible);
- ``snapshots.snapshot``: what a renderer reads (a consistent copy of the stream's state);
- ``iopub.quiet_flushes``: a live view's messages in a kernel, without ipykernel's flushes of
  stdout and stderr when nothing was printed (each a round trip to the IOPub thread);
- ``sink.LiveOutput``: what every live output offers (start, update, finish, close), and
  ``sink.LiveSink``: the one lifecycle they all share (one lock, one refresh thread, the final
  render once, in the caller's thread) around those pieces;
- the live outputs, all ``LiveSink``s: ``notebook.LiveDisplay`` (IPython outputs),
  ``terminal.TerminalDisplay`` (stdout), the magic's side-by-side grid (``nito_nb._magic.grid``),
  the widget's ``StreamView`` (``nito_nb._widget``), a run's panel and stderr line and a
  sweep's view (``nito_nb._runs.progress``, ``nito_nb._runs.sweep_view``).
"""

from __future__ import annotations

import importlib
from typing import Any

#: name -> submodule. Loaded on first use: the throttle (runs use it) must not
#: pull in the renderer (markdown-it, Pygments) that the live views need.
_WHERE = {
    "CLOCK_PERIOD": "refresh",
    "LiveDisplay": "notebook",
    "LiveOutput": "sink",
    "LiveSink": "sink",
    "in_kernel": "notebook",
    "live_display": "notebook",
    "Refresher": "refresh",
    "Slot": "slots",
    "Slots": "slots",
    "snapshot": "snapshots",
    "TerminalDisplay": "terminal",
    "Throttle": "throttle",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CLOCK_PERIOD",
    "LiveDisplay",
    "LiveOutput",
    "LiveSink",
    "Refresher",
    "Slot",
    "Slots",
    "TerminalDisplay",
    "Throttle",
    "in_kernel",
    "live_display",
    "snapshot",
]
