"""The one rule for a count given by the caller: a whole number, at least some bound.

Workers, streams per worker, concurrency, repeats, ``max_requests``, ``max_retries``,
``max_event_size`` and a request's counts (``max_tokens``, ``n``...) all take it, so each refuses
the same values with the same sentence. A numpy integer is taken, as an ``int``: a count computed
from a frame (``df["n"].max()``) is one, and JSON, ``range()`` and the process pool want an ``int``.
``True`` is refused though Python counts it as 1: ``workers=True`` is a slip, not a count.
"""

from __future__ import annotations

import numbers
from typing import Any

from .errors import ConfigurationError

__all__ = ["whole"]

#: The most characters of a refused value a message shows: a DataFrame given by mistake would
#: otherwise fill the notebook, on many lines.
_SHOWN = 60


def whole(name: str, value: Any, *, at_least: int = 1, hint: str = "") -> int:
    """``value`` as an ``int`` if it is a whole number >= ``at_least`` (an int or a numpy integer,
    not a bool), else a one-line ConfigurationError naming ``name``; ``hint`` follows its sentence."""
    # numbers.Integral: numpy registers its integers (not np.bool_) with it, and _core imports no numpy.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < at_least:
        message = f"{name} must be a whole number >= {at_least}, not {_shown(value)}"
        raise ConfigurationError(f"{message}; {hint}" if hint else message)
    return int(value)


def _shown(value: Any) -> str:
    """``repr(value)`` on one line (a frame's repr has many), cut short."""
    text = repr(value)
    if "\n" in text:
        text = " ".join(text.split())
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"
