"""What a renderer reads: a consistent copy of a stream's state, taken under the stream's lock.

A live view renders in its refresh thread while another thread feeds the stream; reading the
Stream's attributes one by one there could see a tool call half-updated or a usage dict changing
size. ``snapshot(state)`` returns ``state.snapshot()`` when the state has one (a Stream: the engine's
immutable StreamSnapshot, taken under its lock, never waiting), else copies the attributes the
renderer reads (under ``state._lock`` if it has one): any duck-typed state the renderer accepts.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from .._core.fields import RENDERED

__all__ = ["FIELDS", "optional", "snapshot"]

#: The attributes ``render_parts`` and ``status_text`` read (docs/ENGINE_API.md): those of the
#: fields and metrics a view shows (``_core/fields.py``); tool calls and anomalies are copied apart.
FIELDS = tuple(name for name in RENDERED if name not in ("tool_calls", "anomalies"))
_CALL_FIELDS = ("index", "id", "name", "arguments", "valid_json", "parsed", "json_error")


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def optional(state: Any, name: str, default: Any = None) -> Any:
    """``getattr(state, name, default)`` for duck-typed states whose ``__getattr__`` raises a
    ``LookupError`` for what they lack (the renderer's states need only its own attributes)."""
    try:
        return getattr(state, name, default)
    except LookupError:
        return default


def snapshot(state: Any) -> Any:
    """A copy of ``state`` that no writer changes while it is rendered."""
    taker = optional(state, "snapshot")
    if callable(taker):
        return taker()
    lock = optional(state, "_lock")
    if lock is None:
        return _take(state)
    with lock:
        return _take(state)


def _take(state: Any) -> SimpleNamespace:
    values = {name: _copy(optional(state, name)) for name in FIELDS}
    values["tool_calls"] = [
        SimpleNamespace(
            **{name: _copy(getattr(call, name)) for name in _CALL_FIELDS if hasattr(call, name)}
        )
        for call in list(getattr(state, "tool_calls", None) or [])
    ]
    values["anomalies"] = list(getattr(state, "anomalies", None) or [])
    return SimpleNamespace(**values)
