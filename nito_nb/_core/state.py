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
from .metrics import n_output_tokens, output_chunks_per_s, output_tps
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
    #: K: the chunks that carried answer text (docs/METRICS.md's token-bearing chunks).
    n_token_chunks: int = 0
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
    def n_output_tokens(self) -> int | float | None:
        """docs/METRICS.md's N: the usage's ``completion_tokens``; None without usage."""
        return n_output_tokens(self.usage)

    @property
    def output_tps(self) -> float | None:
        """docs/METRICS.md's ``output_tps`` so far: N / (elapsed − ttft); None without usage."""
        return output_tps(self.n_output_tokens, self.ttft, self.elapsed)

    @property
    def output_chunks_per_s(self) -> float | None:
        """docs/METRICS.md's ``output_chunks_per_s`` so far: K / (elapsed − ttft)."""
        return output_chunks_per_s(self.n_token_chunks, self.ttft, self.elapsed)


def frozen_tool_call(call: ToolCall) -> ToolCall:
    """A copy of a tool call that later fragments do not reach."""
    copy = dataclasses.replace(call, _parts=[call.arguments] if call.arguments else [])
    return copy
