"""What a stream has received so far, as one immutable value: :class:`StreamSnapshot`.

A renderer reads a snapshot, never the live Stream: the snapshot is taken under the Stream's one
lock, in one step, so its text, tool calls, status and counts belong to the same moment, and no
fragment the reader thread appends afterwards can change or tear it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .accumulate import Anomaly, ToolCall
from .metrics import n_tokens, output_tps
from .status import Status

__all__ = ["StreamSnapshot", "frozen_tool_call"]


@dataclass(frozen=True)
class StreamSnapshot:
    """A Stream's results at one moment (``Stream.snapshot()``). Times are seconds since the
    request was sent (None for a recording without arrival times, or before they are known)."""

    status: Status
    content: str = ""
    reasoning: str = ""
    refusal: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    model: str | None = None
    id: str | None = None
    role: str | None = None
    finish_reason: str | None = None
    usage: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    anomalies: tuple[Anomaly, ...] = ()
    done: bool = False
    web_search: Any = None
    free_tier: Any = None
    n_chunks: int = 0
    #: K: the chunks that carried answer text (the metrics' token-bearing events).
    n_token_events: int = 0
    ttfb: float | None = None
    ttft: float | None = None
    #: Seconds since the request was sent; once finished, to the last event.
    elapsed: float | None = None
    timed: bool = True
    exception: BaseException | None = None

    @property
    def finished(self) -> bool:
        return not self.status.running

    @property
    def n_tokens(self) -> tuple[int | float, str]:
        """(N, ``"usage"`` or ``"chunks"``): docs/METRICS.md's N."""
        return n_tokens(self.usage, self.n_token_events)

    @property
    def output_tps(self) -> float | None:
        """docs/METRICS.md's ``output_tps`` so far: N / (elapsed − ttft)."""
        return output_tps(self.n_tokens[0], self.ttft, self.elapsed)


def frozen_tool_call(call: ToolCall) -> ToolCall:
    """A copy of a tool call that later fragments do not reach."""
    copy = dataclasses.replace(call, _parts=[call.arguments] if call.arguments else [])
    return copy
