"""A stream's status: the one list, used by the Stream, the frame's ``status`` column and every view."""

from __future__ import annotations

from enum import Enum

__all__ = ["FINAL", "RUNNING", "STATUSES", "Status"]


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
