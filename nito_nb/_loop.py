"""The one background asyncio loop thread: the magic's several models and each widget turn.

A coroutine runs on a private event loop in a daemon thread, so that the kernel's own loop and the
cell's thread stay free (the cell's thread renders; a widget's callbacks keep working). Two rules
learnt the hard way live here once:

- the end is an Event, never ``Thread.join``: when a KeyboardInterrupt lands in
  ``join(timeout)``, threading marks the thread stopped while it still runs (its bpo-45274
  clean-up, Python 3.11's threading.py), and a later ``join()`` returned at once (the final grid
  was drawn while the streams still said "streaming");
- ``cancel()`` is safe from any thread and at any time: it schedules ``task.cancel()`` on the
  loop (``call_soon_threadsafe``) and does nothing once the loop has closed.

Nothing escapes the thread: ``threading.excepthook`` would print, and since ipykernel 7.1 a
thread's output lands in whichever cell ran last. What the coroutine raises is kept in ``error``
(a cancellation is not an error).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from ._core.waiting import wait_timeout

__all__ = ["LoopThread"]


class LoopThread:
    """Run ``main()`` (a coroutine function) on a private asyncio loop in a daemon thread."""

    def __init__(
        self,
        main: Callable[[], Coroutine[Any, Any, Any]],
        *,
        name: str,
        on_end: Callable[[], Any] | None = None,
    ) -> None:
        self._main: Callable[[], Coroutine[Any, Any, Any]] | None = main
        self._on_end = on_end
        self.ended = threading.Event()  # set once the thread is past its last line but one
        self.error: BaseException | None = None
        self.result: Any = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancel_requested = False
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> LoopThread:
        self.thread.start()
        return self

    def cancel(self) -> None:
        """Cancel the coroutine (its ``CancelledError`` handlers run on the loop)."""
        with self._lock:
            self._cancel_requested = True
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: it is over already
                loop.call_soon_threadsafe(task.cancel)

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> bool:
        """Run ``callback(*args)`` on the loop (from any thread); False if there is no loop (not
        started yet, or closed)."""
        with self._lock:
            loop = self._loop
        if loop is None:
            return False
        try:
            loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop has closed
            return False
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the end (an Event, see the module docstring); True if it has ended."""
        return self.ended.wait(wait_timeout(timeout))

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            with self._lock:
                assert self._main is not None  # a LoopThread runs once
                task = loop.create_task(self._main())
                self._loop, self._task = loop, task
                if self._cancel_requested:  # cancelled before the thread started
                    task.cancel()
            try:
                self.result = loop.run_until_complete(task)
            except asyncio.CancelledError:
                pass
            except BaseException as exc:
                self.error = exc
            finally:
                try:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                finally:
                    loop.close()
        except BaseException as exc:  # pragma: no cover - the loop's own machinery failed
            self.error = self.error or exc
        finally:
            try:
                if self._on_end is not None:
                    self._on_end()
            except BaseException as exc:
                self.error = self.error or exc
            finally:
                # Let go of what was run: ``main`` and ``on_end`` are usually bound methods of
                # the owner (a Run), which keeps this object; that cycle held a dropped Run and
                # all its streams until a full GC pass (tens of MB per thousand requests).
                self._main = self._on_end = None
                self._task = None
                self.ended.set()
