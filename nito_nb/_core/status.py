"""A stream's status: the one list, used by the Stream, the frame's ``status`` column and every view."""

from __future__ import annotations

from enum import Enum

__all__ = ["BANNERS", "FINAL", "NOTES", "RUNNING", "STATUSES", "SYMBOLS", "Status", "note"]


class Status(str, Enum):
    """How far a stream got. A ``str`` subclass, so ``s.status == "done"`` keeps working, a saved
    log holds the bare word, and a pandas column of statuses is a column of strings."""

    WAITING = "waiting"  # the request is sent, no body yet
    STREAMING = "streaming"  # the body is arriving
    DONE = "done"  # [DONE] arrived
    ERROR = "error"  # the gateway reported an error mid-stream
    TRUNCATED = "truncated"  # the body ended (or was cut) without [DONE]
    STOPPED = "stopped"  # the caller stopped reading
    FAILED = "failed"  # the request failed before any body

    # The bare word wherever it is shown (f-strings, str(), logs), on every Python version.
    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    # ...and in a list or a set printed in a notebook, as the plain strings statuses always were.
    def __repr__(self) -> str:
        return repr(self.value)

    @property
    def running(self) -> bool:
        return self in RUNNING


#: Every status, in the order a stream goes through them: the first two are running, the rest final.
STATUSES: tuple[Status, ...] = tuple(Status)
RUNNING = frozenset({Status.WAITING, Status.STREAMING})
FINAL = frozenset(STATUSES) - RUNNING

#: The symbol shown before a status: the status line, the chat widget's note, a view's banner.
SYMBOLS: dict[str, str] = {
    Status.WAITING: "⏳",
    Status.STREAMING: "●",
    Status.DONE: "✓",
    Status.ERROR: "✗",
    Status.TRUNCATED: "⚠",
    Status.STOPPED: "■",
    Status.FAILED: "✗",
}
#: What a final status means for the answer, in a few words (the chat widget's note).
NOTES: dict[str, str] = {
    Status.DONE: "done",
    Status.STOPPED: "stopped: the partial answer is kept",
    Status.ERROR: "the gateway reported an error: the partial answer is kept",
    Status.TRUNCATED: "the stream ended early: the partial answer is kept",
    Status.FAILED: "the request failed",
}
#: The banner a view shows under an answer that ended so, without an error object to quote.
BANNERS: dict[str, str] = {
    Status.TRUNCATED: "The stream ended without [DONE]: the answer may be incomplete.",
    Status.FAILED: "The request failed before the answer started.",
}


def note(status: str) -> str:
    """A final status with its symbol and what it means (``✓ done``); another, as it is."""
    return f"{SYMBOLS[status]} {NOTES[status]}" if status in NOTES else str(status)
