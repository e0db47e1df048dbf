"""The live view outside a notebook: print the answer as it grows, never resending text.

Everything printed is printable first (``_core/printable.py``): the model's text and the server's
error would otherwise reach the terminal with their escape sequences live (a cleared screen, a
hidden link, a line overwritten by a carriage return). The Stream's own text is not changed.

A ``LiveSink`` (``sink.py``) like every live output: ``start()`` adds the refresh thread, which
prints what the throttle held back when the stream stalls; ``finish()`` prints the rest once.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from .._core.printable import printable
from .._render import status_text
from .sink import LiveSink, stream_mark
from .throttle import MAX_RATE

__all__ = ["TerminalDisplay"]


class TerminalDisplay(LiveSink):
    """The same interface for a terminal: print the answer as it grows, never resending text.

    Reasoning is printed first (under a ``Reasoning:`` heading) while no answer has come; tool
    calls, the error and the status line are printed by ``finish()``.
    """

    refresher_name = "nito_nb-terminal"

    def __init__(
        self,
        stream_or_state: Any,
        *,
        format: str = "markdown",
        max_rate: float = MAX_RATE,
        clock: Callable[[], float] = time.monotonic,
        file: TextIO | None = None,
    ) -> None:
        super().__init__(max_rate, clock)
        self.state = stream_or_state
        self.format = format
        self._file = file
        self._content_at = 0
        self._reasoning_at = 0
        self.n_updates = 0
        self.bytes_sent = 0

    def _write(self, text: str) -> None:
        if not text:
            return
        # Each control character is shown on its own, so a sequence cut between two prints is
        # neutralised all the same (its first character is).
        text = printable(text)
        out = self._file if self._file is not None else sys.stdout
        out.write(text)
        out.flush()
        self.n_updates += 1
        self.bytes_sent += len(text.encode("utf-8"))

    def _mark(self) -> Any:
        return stream_mark(self.state)

    def _draw(self, *, live: bool) -> None:
        """Print what arrived since the last print; the final render adds the tool calls, the
        error and the status line."""
        self._flush()
        if not live:
            self._tail()

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

    def _tail(self) -> None:
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
