"""The one slot behind ``nito_nb.last()``: what the magic or a run kept last.

Below the magic and runs/ (both write it) and the capture registry (which reads it to order its
own streams against it), so that none of them imports another to reach it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["last", "remember"]

_last: Any = None


def remember(value: Any) -> None:
    """Keep ``value`` as the last result (None forgets it: ``%nito reset``)."""
    global _last
    _last = value


def last() -> Any:
    """The last Stream, list of Streams or Run kept by the magic or a run; None before any."""
    return _last
