"""The deadlines of an AsyncStream's body (``_core/deadlines.py``), kept on its event loop.

A sync Stream's reader thread keeps them in its socket reads (``_transport/deadlines.py``); an
AsyncStream's body is read by callbacks of the loop (a pushed body) or by httpx's iterator, so
its reader task is cancelled when a deadline passes, and ends the stream with the error that
names the deadline (``AsyncStream._aread``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ._core.deadlines import Deadlines
from ._core.errors import NitoError

__all__ = ["BodyWatchdog", "uncancel"]


class BodyWatchdog:
    """The deadlines of an AsyncStream's body: one timer, moved on only when it fires (re-armed
    on every read it would cost more than the read), that cancels the reader task once the next
    deadline has passed. ``passed`` is then the error that says which one. A body with bytes
    waiting for their turn to be parsed (``_transport/pump.py``), or in its socket for a loop that
    was busy, is given the time to take them: they may hold the events that keep it within its
    deadline (``PushedBody.waiting``)."""

    __slots__ = ("_body", "_deadlines", "_handle", "_loop", "passed", "task")

    def __init__(self, deadlines: Deadlines, body: Any) -> None:
        self._deadlines = deadlines
        self._body = body
        self._loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        self.passed: NitoError | None = None
        self._handle: Any = None
        self._arm(self._deadlines.left(time.perf_counter_ns()))

    def _arm(self, seconds: float) -> None:
        self._handle = self._loop.call_later(max(seconds, 0.0), self._check)

    def _check(self) -> None:
        left = self._deadlines.left(time.perf_counter_ns())
        if left > 0:
            self._arm(left)
        elif getattr(self._body, "waiting", False):
            self._arm(_PARSE_WAIT)
        elif self.task is not None:
            self.passed = self._deadlines.error(self._deadlines.due()[1])
            self.task.cancel()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


#: How long a deadline that passed waits again while bytes that arrived in time wait to be parsed.
_PARSE_WAIT = 0.005


def uncancel(task: Any) -> int:
    """Take back one cancellation of ``task``; the ones left (Python 3.11+: ``Task.uncancel``;
    before, a cancellation that was caught is over)."""
    method = getattr(task, "uncancel", None)
    return 0 if method is None else int(method())
