"""``%nito --replay PATH``: a saved log (``.jsonl``) or a recorded SSE body shown as if live.

A fresh Stream is fed the recorded bytes through its producer's I/O-free ``feed()``/``end()``:
the same accumulation as a live stream, at the recorded pace (or a steady one for an SSE file)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from .._core.status import Status
from .output import start_view

if TYPE_CHECKING:
    from .magics import NitoMagics

__all__ = ["SSE_REPLAY_SECONDS", "replay"]

#: A recorded SSE file has no arrival times: it is replayed at a steady pace, at most this long.
SSE_REPLAY_SECONDS = 5.0

#: The longest replay a --speed may ask for. A smaller speed is refused, not clamped: a clamp would
#: silently show another pace than the one asked for, and a replay this long holds the kernel for a
#: day (and below about 1e-300 the wait overflowed time.sleep).
MAX_REPLAY_SECONDS = 86400.0


def replay(magics: NitoMagics, args: Any, fmt: str) -> None:
    """Show the recording at ``args.speed`` in the magic's live view, then keep the recording."""
    from .._recordings import read_file
    from .._stream_source import StreamSource

    speed = args.speed
    if speed != 0 and not (math.isfinite(speed) and speed > 0):  # negative and NaN were "at once"
        raise UsageError(
            f"--speed is a factor, a finite number > 0 (2: twice as fast), or 0 for at once, not {speed:g}"
        )
    path = Path(args.replay).expanduser()
    if not path.is_file():
        raise UsageError(f"--replay: no such file: {str(path)!r}")
    try:
        recorded = read_file(path)
    except Exception as exc:
        raise UsageError(
            f"--replay: cannot read {path.name}: {' '.join(str(exc).split())}"
        ) from None
    if recorded.status == Status.FAILED or not len(recorded.log):
        display = magics._display(recorded, fmt)
        display.finish()
        magics._keep(recorded, args, save=False)
        return
    events = list(recorded.log)
    timed = any(event.t_ns != events[0].t_ns for event in events)
    step = min(0.02, SSE_REPLAY_SECONDS / len(events))
    recorded_s = events[-1].t if timed else (len(events) - 1) * step
    if speed > 0 and recorded_s / speed > MAX_REPLAY_SECONDS:
        raise UsageError(
            f"--speed {speed:g} would take {recorded_s / speed:.3g} s to replay {path.name} (over a day; "
            f"recorded in {recorded_s:.3g} s): give a larger speed, or 0 for at once"
        )
    # A fresh Stream fed the recorded bytes: the same accumulation as live, at the recorded pace.
    # feed()/end(): the producer's I/O-free, thread-safe calls (the view's refresh thread takes
    # snapshots meanwhile).
    replay = StreamSource(recorded.request, raise_errors=False)
    display = magics._display(replay.stream, fmt)
    start = time.perf_counter()
    try:
        start_view(display)
        for index, event in enumerate(events):
            if speed > 0:
                due = (event.t if timed else index * step) / speed
                wait = start + due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
            replay.feed(event.raw, time.perf_counter_ns())
            display.update()
        status = recorded.status if recorded.status in (Status.STOPPED, Status.TRUNCATED) else None
        replay.end(status=status)
    except BaseException:
        replay.end(status=Status.STOPPED)
        raise
    finally:
        display.finish()
        # What is kept is the recording itself (its original times), not the re-timed copy.
        magics._keep(recorded, args, save=False)
