"""A structured answer's part (``schema=``, docs/STRUCTURED.md): the object as parsed so far while
the JSON streams, then checked.

While it streams: one row per top-level field that arrived (its value as JSON), the field being
written marked (✎, a rule at its left), the fields the schema declares that have not come yet
listed muted, and the raw JSON's last characters under them. At the end: ✓ and the object, or ✗
and each validation error by field path; the raw text is one click away (a ``<details>``), open
when the answer is invalid. Why the raw text is a visible tail while streaming rather than a
``<details>``: a live output is re-sent whole at each refresh, which would close a ``<details>``
the user opened a moment earlier.

Every key, value, error message and the raw text are the model's: escaped here, always.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from .._core.partial_json import path_text
from .styles import (
    _ERROR_STYLE,
    _FIELD_KEY_STYLE,
    _FIELD_VALUE_STYLE,
    _MUTED_STYLE,
    _PRE_STYLE,
    _WRITING_STYLE,
)

__all__ = ["structured_view"]

#: While streaming, the raw JSON shows only its last characters.
RAW_TAIL_CHARS = 300
_MAX_ERRORS_LISTED = 20


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _json(value: Any, indent: int | None = None) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, indent=indent)
    except (TypeError, ValueError):
        return repr(value)


def _value_html(value: Any) -> tuple[str, str]:
    """(html, text) of one field's value: scalars inline, containers as indented JSON."""
    if isinstance(value, dict | list) and value:
        text = _json(value, 2)
        return f'<pre style="{_PRE_STYLE}">{_esc(text)}</pre>', text
    text = _json(value)
    return f'<code style="{_PRE_STYLE}">{_esc(text)}</code>', text


def _rows(value: Any, writing: Any, pending: list[str], wrong: set[str]) -> tuple[str, list[str]]:
    """The fields table (html) and its plain lines: the field being written marked ✎, a field
    that failed validation ✗."""
    if value is None and not pending:
        return "", []
    fields: list[tuple[str, Any, bool]]
    head = writing[0] if writing else None
    if isinstance(value, dict):
        fields = [(str(key), item, key == head) for key, item in value.items()]
    else:  # a top-level array or scalar: one row for the whole
        fields = [] if value is None else [("(root)", value, writing is not None)]
    rows, lines = [], []
    for key, item, marked in fields:
        inner, text = _value_html(item)
        mark = " ✎" if marked else (" ✗" if key in wrong else "")
        style = f' style="{_WRITING_STYLE}"' if marked else ""
        css = (
            "nito-field nito-writing"
            if marked
            else ("nito-field nito-invalid" if key in wrong else "nito-field")
        )
        rows.append(
            f'<tr class="{css}"><th style="{_FIELD_KEY_STYLE}"{style}>{_esc(key)}{mark}</th>'
            f'<td style="{_FIELD_VALUE_STYLE}">{inner}</td></tr>'
        )
        lines.append(f"{key}{mark}: {text}")
    for key in pending:  # declared, not arrived: the one whose key came is being written
        mark = " ✎" if key == head else ""
        style = f" {_WRITING_STYLE}" if mark else ""
        css = "nito-field nito-pending nito-writing" if mark else "nito-field nito-pending"
        rows.append(
            f'<tr class="{css}" style="{_MUTED_STYLE}">'
            f'<th style="{_FIELD_KEY_STYLE} font-weight: 400;{style}">{_esc(key)}{mark}</th>'
            f'<td style="{_FIELD_VALUE_STYLE}">…</td></tr>'
        )
        lines.append(f"{key}{mark}: …")
    return f'<table class="nito-fields">{"".join(rows)}</table>', lines


def _raw(content: str, growing: bool, opened: bool) -> tuple[str, str]:
    if growing:
        shown = content[-RAW_TAIL_CHARS:]
        more = "…" if len(content) > RAW_TAIL_CHARS else ""
        return (
            f'<pre class="nito-raw" style="{_PRE_STYLE} {_MUTED_STYLE}">{_esc(more + shown)}</pre>',
            "",
        )
    label = f"raw JSON ({len(content):,} characters)"
    open_attr = " open" if opened else ""
    return (
        f'<details class="nito-raw"{open_attr}><summary style="{_MUTED_STYLE}">{_esc(label)}</summary>'
        f'<pre style="{_PRE_STYLE}">{_esc(content)}</pre></details>',
        f"{label}:\n{content}",
    )


def structured_view(
    content: str, schema: Any, growing: bool, refusal: str | None, done: bool
) -> tuple[str, str] | None:
    """(inner html, plain text) of a structured answer's part, or None when there is nothing to show (no text yet, or a
    stream that failed before any: its error part says why)."""
    if not content.strip() and (growing or not done):
        return None
    name = str(getattr(schema, "name", "answer"))
    errors_html, error_lines, wrong = "", [], set()
    if growing:
        partial = schema.partial(content)
        value, writing = partial.value, partial.writing
        arrived = set(value) if isinstance(value, dict) else set()
        pending = (
            [key for key in schema.fields if key not in arrived]
            if isinstance(value, dict | type(None))
            else []
        )
        head_text = f"✎ {name}" + (f": writing {path_text(writing)}" if writing else "")
    else:
        checked = schema.check(content, refusal)
        writing, pending = None, []
        if checked.error is None:
            value = json.loads(content)
            head_text = f"✓ {name}"
        else:
            value = schema.partial(content).value
            listed = checked.error.errors[:_MAX_ERRORS_LISTED]
            count = len(checked.error.errors)
            head_text = f"✗ not a valid {name}: {count} error{'s' if count != 1 else ''}"
            error_lines = [str(error) for error in listed]
            wrong = {
                re.split(r"[.\[]", error.path, maxsplit=1)[0] for error in checked.error.errors
            }
            items = "".join(
                f"<li><code>{_esc(error.path)}</code>: {_esc(error.message)}</li>"
                for error in listed
            )
            errors_html = (
                f'<ul class="nito-errors" style="{_ERROR_STYLE} margin: 2px 0;">{items}</ul>'
            )
    head = f"<div><strong>{_esc(head_text)}</strong></div>"
    table, lines = _rows(value, writing, pending, wrong)
    raw_html, raw_text = _raw(content, growing, opened=not growing and bool(errors_html))
    inner = head + errors_html + table + raw_html
    text = "\n".join(filter(None, [head_text, *error_lines, *lines, raw_text]))
    return inner, text
