"""The deadlines of a call, as moments in time, and the error that says which one passed.

Pure: the shells read the clock (``time.perf_counter_ns``, the clock of every arrival time) and
ask :meth:`Deadlines.due`; the state they read is the Stream's (its log's times).

- ``first_byte``: from an attempt's send (its connection included, as ``ttfb``) to its response's
  headers, all of them. A deadline, not a socket read's timeout: headers trickled a byte at a
  time used to hold a call for as long as the server liked (issue 28).
- ``between_chunks``: from the headers, then from each complete event (a chunk, or a comment: a
  thinking model's keep-alives keep it alive), to the next one. Bytes that never make an event, a
  trickle or a line that never ends, do not move it.
- ``total``: from the first attempt's send to the body's end, retries and their waits included;
  None (the default): no limit.

Retries: only failures before the body are retried, and never a deadline's (``_client/retry.py``):
a server that held one attempt until ``first_byte`` would hold the next as long. A retry is not
started when its wait would end past ``total``. So a call waits ``first_byte`` at most for its
headers, whatever ``max_retries`` says, unless the earlier attempts failed otherwise (a refused
connection, a 503), each of which may take up to ``first_byte`` before its retry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import FirstByteTimeout, NitoError, StreamTimeoutError, TotalTimeoutError
from .units import to_ns, to_seconds

if TYPE_CHECKING:
    from .state import StreamState

__all__ = ["BETWEEN_CHUNKS", "FIRST_BYTE", "TOTAL", "Deadlines"]

FIRST_BYTE, BETWEEN_CHUNKS, TOTAL = "first_byte", "between_chunks", "total"


class Deadlines:
    """The deadlines of one call (one Stream, all its attempts), read off its state."""

    __slots__ = (
        "_between_ns",
        "_first_ns",
        "_sent_ns",
        "_state",
        "_total_ns",
        "between_chunks",
        "first_byte",
        "total",
    )

    def __init__(
        self, state: StreamState, first_byte: float, between_chunks: float, total: float | None
    ) -> None:
        self._state = state
        self.first_byte, self.between_chunks, self.total = first_byte, between_chunks, total
        self._first_ns = to_ns(first_byte)
        self._between_ns = to_ns(between_chunks)
        self._total_ns = None if total is None else to_ns(total)
        self._sent_ns = state.log.t0_ns

    def sent(self, t_ns: int) -> None:
        """An attempt was sent at ``t_ns``: its first_byte deadline counts from then."""
        self._sent_ns = t_ns

    def due(self) -> tuple[int, str]:
        """When the next deadline passes (perf_counter ns) and which one it is."""
        log = self._state.log
        headers_ns = log.headers_ns
        if headers_ns is None:
            due, which = self._sent_ns + self._first_ns, FIRST_BYTE
        else:
            times = log.times_ns()
            due = (max(times[-1], headers_ns) if times else headers_ns) + self._between_ns
            which = BETWEEN_CHUNKS
        total = self._total_ns
        if total is not None and log.t0_ns + total <= due:
            return log.t0_ns + total, TOTAL
        return due, which

    def left(self, now_ns: int) -> float:
        """Seconds from ``now_ns`` to the next deadline (0 or less: it has passed)."""
        return to_seconds(self.due()[0] - now_ns)

    def room_for(self, seconds: float, now_ns: int) -> bool:
        """Whether a retry that waits ``seconds`` from ``now_ns`` still starts before ``total``."""
        total = self._total_ns
        return total is None or now_ns + to_ns(seconds) < self._state.log.t0_ns + total

    def error(self, which: str) -> NitoError:
        """The error of deadline ``which`` having passed, saying which one and how long it was."""
        state = self._state
        where = state.log.request.get("base_url") or "the server"
        arrived = f"What arrived ({state.acc.n_chunks} chunks) is kept in .stream."
        if which == FIRST_BYTE:
            return FirstByteTimeout(
                f"{where} sent no complete response headers within the first_byte deadline "
                f"({self.first_byte:g} s from sending the request). Retry, or raise timeout={{'first_byte': ...}}.",
                seconds=self.first_byte,
            )
        if which == TOTAL:
            during = (
                "while the body was read"
                if state.log.headers_ns is not None
                else "before the response started"
            )
            return TotalTimeoutError(
                f"The call went past its total deadline ({self.total:g} s from sending the request, retries "
                f"included), {during}. {arrived} Raise timeout={{'total': ...}}, or leave it None for no limit.",
                seconds=self.total,
            )
        cause = (
            ": bytes kept coming, but never the end of an event (a trickle, or a line that never ends)"
            if (state.decoder.pending)
            else ""
        )
        return StreamTimeoutError(
            f"No complete event arrived within the between_chunks deadline ({self.between_chunks:g} s){cause}. "
            f"{arrived} Retry, or raise timeout={{'between_chunks': ...}}.",
            seconds=self.between_chunks,
        )
