"""Live views of a stream: one pipeline for the magic, the widget, the grid and runs.

- ``throttle.Throttle``: the one rate limiter;
- ``slots.Slots``: the one reconciler from rendered parts to outputs;
- ``refresh.Refresher``: the one refresh thread of a live view (stalls stay visible);
- ``snapshots.snapshot``: what a renderer reads (a consistent copy of the stream's state);
- ``sink.LiveSink``: the lifecycle every live output shares (start, update, the refresh thread's
  tick, finish) around those pieces;
- sinks: ``notebook.LiveDisplay`` (IPython outputs) and the magic's side-by-side grid
  (``nito_nb._magic.grid``), both ``LiveSink``s; ``terminal.TerminalDisplay`` (stdout); the
  widget's ``StreamView`` (``nito_nb._widget``) uses the same pieces.
"""

from __future__ import annotations

import importlib
from typing import Any

#: name -> submodule. Loaded on first use: the throttle (runs use it) must not
#: pull in the renderer (markdown-it, Pygments) that the live views need.
_WHERE = {
    "CLOCK_PERIOD": "refresh",
    "LiveDisplay": "notebook",
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
