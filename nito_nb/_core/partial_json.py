"""Where a JSON document cut anywhere is still being written: :func:`open_path`.

A structured answer streams as JSON text. A partial parser (``jiter``'s partial mode, in
``nito_nb/_structured.py``) gives the object so far, but not which of its values is still growing:
``{"n": 12`` parses to ``{"n": 12}`` whether the model will write ``3`` next or ``,``. The live view
marks the field being written, so it needs that one fact, read here from the text itself: a scan
of the brackets, strings and scalars, with no value built (pure, standard library only).
"""

from __future__ import annotations

import json

__all__ = ["Path", "open_path", "path_text"]

Path = tuple[str | int, ...]

_SPACE = " \t\r\n"
_SCALAR_END = _SPACE + ",}]"


class _Frame:
    """One open container: ``{`` or ``[``, the key (or index) of the member being written, and
    what comes next in it (``key``, ``colon``, ``value``, ``after``)."""

    __slots__ = ("key", "kind", "phase")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.key: str | int | None = None if kind == "{" else 0
        self.phase = "key" if kind == "{" else "value"


def _key(raw: str) -> str:
    try:
        value = json.loads(f'"{raw}"')
    except ValueError:
        return raw
    return value if isinstance(value, str) else raw


def open_path(text: str) -> Path | None:
    """The path of the value still being written at the end of ``text``, or None when the
    document is complete (or nothing of it came yet).

    A field whose value is a string, a number or a literal not yet ended, or a container still
    open, is being written: ``{"a": 1, "b": "he`` -> ``("b",)``, ``{"r": ["x", "y`` -> ``("r", 1)``,
    ``{"a": 1`` -> ``("a",)`` (the number may go on). Between members (``{"a": 1,``, or a key still
    being typed) it is the container's own path: ``()`` at the top. A key whose value has not
    started (``{"a": ``) counts as written: ``("a",)``.
    """
    stack: list[_Frame] = []
    in_string: str | None = None  # "key" or "value"
    escaped = False
    key_chars: list[str] = []
    in_scalar = False
    started = complete = False

    def ended() -> None:
        nonlocal complete
        if stack:
            stack[-1].phase = "after"
        else:
            complete = True

    for ch in text:
        if in_string is not None:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                if in_string == "key":
                    stack[-1].key, stack[-1].phase = _key("".join(key_chars)), "colon"
                else:
                    ended()
                in_string = None
                continue
            if in_string == "key":
                key_chars.append(ch)
            continue
        if in_scalar:
            if ch not in _SCALAR_END:
                continue
            in_scalar = False
            ended()
        if ch in _SPACE:
            continue
        if ch == '"':
            if stack and stack[-1].kind == "{" and stack[-1].phase == "key":
                in_string, key_chars = "key", []
            else:
                in_string, started = "value", True
        elif ch in "{[":
            started = True
            stack.append(_Frame(ch))
        elif ch in "}]":
            if stack:
                stack.pop()
                ended()
        elif ch == ":":
            if stack:
                stack[-1].phase = "value"
        elif ch == ",":
            if stack:
                top = stack[-1]
                if top.kind == "{":
                    top.phase = "key"
                else:
                    top.key = int(top.key or 0) + 1
                    top.phase = "value"
        else:
            in_scalar = started = True
    if not started or (complete and not in_scalar and in_string is None):
        return None
    if not stack:
        return ()
    path: list[str | int] = [frame.key for frame in stack[:-1] if frame.key is not None]
    top = stack[-1]
    writing = in_string == "value" or in_scalar or (top.kind == "{" and top.phase == "value")
    if writing and top.key is not None:
        path.append(top.key)
    return tuple(path)


def path_text(path: Path) -> str:
    """A path as a user reads it: ``reasons[1]``, ``address.city``; ``(root)`` for the whole."""
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out or "(root)"
