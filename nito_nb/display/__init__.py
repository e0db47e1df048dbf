"""Live views of a stream: one pipeline for the magic, the widget, the grid and runs.

- ``throttle.Throttle``: the one rate limiter;
- ``slots.Slots``: the one reconciler from rendered parts to outputs;
- ``refresh.Refresher``: the one refresh thread of a live view (stalls stay visible);
- ``snapshot.snapshot``: what a renderer reads (a consistent copy of the stream's state);
- ``runner.LoopThread``: the one background asyncio loop thread (several models, widget turns);
- sinks: ``live.LiveDisplay`` (IPython outputs), ``terminal.TerminalDisplay`` (stdout); the
  widget's ``StreamView`` (``nito_nb._widget``) and the magic's grid use the same pieces.
"""

from __future__ import annotations

from .live import CLOCK_PERIOD, LiveDisplay, in_kernel, live_display
from .refresh import Refresher
from .slots import Slot, Slots
from .snapshot import snapshot
from .terminal import TerminalDisplay
from .throttle import Throttle

__all__ = [
    "CLOCK_PERIOD",
    "LiveDisplay",
    "Refresher",
    "Slot",
    "Slots",
    "TerminalDisplay",
    "Throttle",
    "in_kernel",
    "live_display",
    "snapshot",
]
