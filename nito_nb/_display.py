"""The live display: a thin, throttled shell over the renderer.

Why it is built this way (measured, see docs/JUPYTER.md): one display update per chunk floods the
kernel's IOPub socket, which then silently drops messages, the final one included; and re-sending
one growing output is quadratic. So:

- ``update()`` is cheap (it reads the clock) and renders at most ``max_rate`` times a second;
  ``finish()`` always renders once more, so the final state is never lost to throttling;
- the answer goes out as separate outputs (``render_parts``): a finished block is sent once and
  never again, only the small live tail and the status line are re-sent: traffic is linear;
- outputs can only be appended, so parts are shown in the order they first appear.

Outside a kernel (plain Python, terminal IPython) ``TerminalDisplay`` prints the answer as it grows.
``live_display(state)`` picks the right one. Both are context managers that ``finish()`` on exit.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from ._render import RenderCache, Slot, _check_format, render_parts, status_text

__all__ = ["LiveDisplay", "TerminalDisplay", "live_display"]

DisplayFunction = Callable[..., Any]


def _bundle_size(bundle: dict[str, str]) -> int:
    return sum(len(value.encode("utf-8")) for value in bundle.values())


class LiveDisplay:
    """Show a growing Stream (or any object with its attributes) in a notebook output, live.

    Call ``update()`` after every chunk and ``finish()`` once at the end (or use ``with``). Nothing
    is shown before the first ``update()``; between calls nothing refreshes (no thread), so during
    a stall the last ``1 / max_rate`` seconds of text wait for the next chunk or ``finish()``.
    ``clock`` and ``display`` can be replaced (tests, benchmarks): ``display(bundle, raw=True,
    display_id=True)`` must return a handle with ``update(bundle, raw=True)``.

    Counters: ``n_updates`` rounds that sent something, ``n_messages`` display messages,
    ``bytes_sent`` total size of the bundles sent (UTF-8 bytes of html + plain text),
    ``render_seconds`` time spent rendering and sending (the throttled checks are not in it).
    """

    def __init__(
        self,
        stream_or_state: Any,
        *,
        format: str = "markdown",
        max_rate: float = 20.0,
        clock: Callable[[], float] = time.monotonic,
        display: DisplayFunction | None = None,
    ) -> None:
        if max_rate <= 0:
            raise ValueError(f"max_rate must be positive, not {max_rate!r}")
        self.state = stream_or_state
        self.format = format
        self.max_rate = max_rate
        self._interval = 1.0 / max_rate
        self._clock = clock
        self._display = display
        self._last: float | None = None
        self._cache = RenderCache()
        self._slots: list[Slot] = []
        self._slot_of: dict[str, Slot] = {}
        self.finished = False
        self.n_updates = 0
        self.n_messages = 0
        self.bytes_sent = 0
        self.render_seconds = 0.0
        # Fail early on a bad format, without touching the state: a sync Stream read before it is
        # iterated would read itself to the end.
        _check_format(format)

    def update(self) -> None:
        """Render if the last render ended at least ``1 / max_rate`` seconds ago; else do nothing."""
        if self.finished:
            return
        now = self._clock()
        if self._last is not None and now - self._last < self._interval:
            return
        self._flush(live=True)
        # Timed from the end of the render: if rendering is slow (a busy machine, a huge block),
        # the stream still gets 1 / max_rate seconds between renders instead of none.
        self._last = self._clock()

    def finish(self) -> None:
        """Render the final state (always; repeated calls send nothing new)."""
        self._last = self._clock()
        self._flush(live=False)
        self.finished = True

    def __enter__(self) -> LiveDisplay:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.finish()

    def _show(self, bundle: dict[str, str]) -> Any:
        if self._display is not None:
            return self._display(bundle, raw=True, display_id=True)
        from IPython.display import display

        return display(bundle, raw=True, display_id=True)

    def _flush(self, *, live: bool) -> None:
        started = time.perf_counter()
        try:
            self._send(live=live)
        finally:
            self.render_seconds += time.perf_counter() - started

    def _send(self, *, live: bool) -> None:
        parts = render_parts(self.state, format=self.format, live=live, cache=self._cache)
        for slot in self._slots:
            slot.dirty = False
        for part in parts:
            known = self._slot_of.get(part.key)
            if known is not None:
                if known.parts[part.key] is not part and known.parts[part.key] != part:
                    known.replace(part)
                continue
            last = self._slots[-1] if self._slots else None
            if last is not None and last.can_absorb(part):
                last.add(part)
                self._slot_of[part.key] = last
            else:
                slot = Slot(part)
                self._slots.append(slot)
                self._slot_of[part.key] = slot
        sent = False
        for slot in self._slots:
            if not slot.dirty:
                continue
            bundle = slot.bundle()
            if slot.view is None:
                slot.view = self._show(bundle)
            else:
                slot.view.update(bundle, raw=True)
            slot.dirty = False
            self.n_messages += 1
            self.bytes_sent += _bundle_size(bundle)
            sent = True
        if sent:
            self.n_updates += 1


class TerminalDisplay:
    """The same interface for a terminal: print the answer as it grows, never resending text.

    Reasoning is printed first (under a ``Reasoning:`` heading) while no answer has come; tool
    calls, the error and the status line are printed by ``finish()``.
    """

    def __init__(
        self,
        stream_or_state: Any,
        *,
        format: str = "markdown",
        max_rate: float = 20.0,
        clock: Callable[[], float] = time.monotonic,
        file: TextIO | None = None,
    ) -> None:
        if max_rate <= 0:
            raise ValueError(f"max_rate must be positive, not {max_rate!r}")
        self.state = stream_or_state
        self.format = format
        self._interval = 1.0 / max_rate
        self._clock = clock
        self._file = file
        self._last: float | None = None
        self._content_at = 0
        self._reasoning_at = 0
        self.finished = False
        self.n_updates = 0
        self.bytes_sent = 0

    def _write(self, text: str) -> None:
        if not text:
            return
        out = self._file if self._file is not None else sys.stdout
        out.write(text)
        out.flush()
        self.n_updates += 1
        self.bytes_sent += len(text.encode("utf-8"))

    def update(self) -> None:
        """Print what arrived since the last print, at most ``max_rate`` times a second."""
        if self.finished:
            return
        now = self._clock()
        if self._last is not None and now - self._last < self._interval:
            return
        self._last = now
        self._flush()

    def _flush(self) -> None:
        content = getattr(self.state, "content", None) or ""
        reasoning = getattr(self.state, "reasoning", None) or ""
        pieces = []
        if self._content_at == 0 and len(reasoning) > self._reasoning_at:
            if self._reasoning_at == 0:
                pieces.append("Reasoning:\n")
            pieces.append(reasoning[self._reasoning_at :])
            self._reasoning_at = len(reasoning)
        if len(content) > self._content_at:
            if self._content_at == 0 and self._reasoning_at:
                pieces.append("\n\nAnswer:\n")
            pieces.append(content[self._content_at :])
            self._content_at = len(content)
        self._write("".join(pieces))

    def finish(self) -> None:
        """Print the rest, the tool calls, the error and the status line (once)."""
        if self.finished:
            return
        self._flush()
        self.finished = True
        lines = [""] if self._content_at or self._reasoning_at else []
        refusal = getattr(self.state, "refusal", None)
        if refusal:
            lines.append(f"Refusal: {refusal}")
        for call in getattr(self.state, "tool_calls", None) or []:
            lines.append(f"tool call {getattr(call, 'name', '?')} ({getattr(call, 'id', '')}):")
            lines.append(str(getattr(call, "arguments", "") or ""))
        error = getattr(self.state, "error", None)
        if error:
            message = error.get("message") if isinstance(error, dict) else error
            code = error.get("code") if isinstance(error, dict) else None
            lines.append(f"Error {code}: {message}" if code is not None else f"Error: {message}")
        lines.append(status_text(self.state))
        self._write("\n".join(lines) + "\n")

    def __enter__(self) -> TerminalDisplay:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.finish()


def in_kernel() -> bool:
    """True inside a Jupyter kernel (not in plain Python or terminal IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def live_display(
    stream_or_state: Any, *, format: str = "markdown", max_rate: float = 20.0
) -> LiveDisplay | TerminalDisplay:
    """A ``LiveDisplay`` in a notebook kernel, else a ``TerminalDisplay`` printing to stdout."""
    if in_kernel():
        return LiveDisplay(stream_or_state, format=format, max_rate=max_rate)
    return TerminalDisplay(stream_or_state, format=format, max_rate=max_rate)
