"""Several answers side by side: the layout of the multi-model grid (``%%nito -m a,b``) and of
the choices of one stream (``n > 1``), one rule for both.

A choice is shown as the stream would be if it were its only answer: its content, reasoning,
refusal and tool calls in the stream's state (``render_parts`` on a copy of the snapshot with the
choice's fields), under the stream's one status line, error and anomalies, which are the
stream's, not a choice's. Pure: no I/O; every text of the model is escaped by the parts.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from .._core.status import RUNNING
from .confidence import shaded_part
from .parts import Part, RenderCache, final_bundle, join_parts, render_parts
from .status_line import _status

__all__ = ["choices_bundle", "grid_bundle", "windowed"]

#: The parts that are the stream's, shown once above the choices.
_OF_THE_STREAM = ("status", "error", "anomalies")


def grid_bundle(
    titles: Sequence[str] | None, columns: Sequence[tuple[str, str]], above: Part | None = None
) -> dict[str, str]:
    """One mime bundle of columns side by side (``(html, text)`` each, under its title, which is
    escaped here), with ``above`` (a part spanning the grid) first. No titles: one column, no grid."""
    if titles is None:
        body = "".join(h for h, _ in columns)
        plain = "\n\n".join(t for _, t in columns if t)
        if above is None:
            return {"text/html": body, "text/plain": plain}
        return {
            "text/html": above.html + body,
            "text/plain": f"{above.text}\n\n{plain}" if above.text else plain,
        }
    cells = "".join(
        f'<div style="min-width: 0;"><div><strong>{html.escape(title)}</strong></div>{body}</div>'
        for title, (body, _) in zip(titles, columns, strict=True)
    )
    grid = (
        '<div class="nito-grid" style="display: grid; gap: 12px; '
        f'grid-template-columns: repeat({len(columns)}, minmax(0, 1fr));">{cells}</div>'
    )
    text = "\n\n".join(
        f"== {title} ==\n{body}" for title, (_, body) in zip(titles, columns, strict=True)
    )
    if above is None:
        return {"text/html": grid, "text/plain": text}
    return {
        "text/html": above.html + grid,
        "text/plain": f"{above.text}\n\n{text}" if above.text else text,
    }


def windowed(parts: Sequence[Part], chars: int) -> tuple[str, str]:
    """``(html, text)`` of a live column's parts with its answer cut to its last ``chars`` or so
    (finished blocks dropped from the front, a note saying how much): each refresh re-sends every
    column, so the window keeps traffic proportional to time, not to the square of the answers."""
    answers = [p for p in parts if p.key.startswith("answer-")]
    kept: list[Any] = []
    size = 0
    for part in reversed(answers):
        if kept and size + len(part.text) > chars:
            break
        kept.append(part)
        size += len(part.text)
    hidden = sum(len(p.text) for p in answers) - size
    kept_keys = {p.key for p in kept}
    shown = []
    for part in parts:
        if part.key.startswith("answer-"):
            if part.key == answers[0].key and hidden:
                note = f"… {hidden:,} earlier characters (all shown when the stream ends)"
                shown.append((f"<div><em>{html.escape(note)}</em></div>", note))
            if part.key not in kept_keys:
                continue
        shown.append((part.html, part.text))
    return "".join(h for h, _ in shown), "\n\n".join(t for _, t in shown if t)


def as_choice(state: Any, choice: Any) -> Any:
    """``state`` (a snapshot) with the answer of ``choice`` (a ``_core/choices.py`` ``Choice``)."""
    changes = {
        "content": choice.content,
        "reasoning": choice.reasoning,
        "refusal": choice.refusal,
        "tool_calls": tuple(choice.tool_calls),
        "finish_reason": choice.finish_reason,
    }
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return dataclasses.replace(state, **changes)
    return SimpleNamespace(**{**vars(state), **changes})


def choices_bundle(
    state: Any,
    choices: Sequence[Any],
    *,
    format: str = "markdown",
    live: bool = True,
    caches: Sequence[RenderCache] | None = None,
    structured: Any = None,
    window: int | None = None,
    shade: bool = False,
) -> dict[str, str]:
    """The choices of ``state`` (a snapshot) side by side under the stream's status line, error
    and anomalies. ``live`` while the stream grows: each column's answer in blocks, with its own
    ``caches[i]``, cut to about ``window`` characters (``windowed``); else (or once it ended)
    each whole, as a saved output keeps it. ``shade``: each answer as its tokens shaded by their
    probability (``confidence.py``; a choice whose logprobs did not come shows its text). One
    choice is shown without a grid."""
    growing = live and _status(state) in RUNNING
    above = [p for p in render_parts(state, format=format, live=growing) if p.key in _OF_THE_STREAM]
    columns = []
    for position, choice in enumerate(choices):
        one = as_choice(state, choice)
        cache = caches[position] if caches is not None and position < len(caches) else None
        if shade and choice.logprobs and structured is None:
            tokens = choice.logprobs
            if growing and window is not None:
                tokens = _tail(tokens, window)
            parts = _with_answer(
                render_parts(one, format=format, live=growing, cache=cache), shaded_part(tokens)
            )
            column = join_parts(parts)
            columns.append((column["text/html"], column["text/plain"]))
            continue
        if growing:
            parts = render_parts(one, format=format, live=True, cache=cache, structured=structured)
            parts = [p for p in parts if p.key not in _OF_THE_STREAM]
            if window is not None:
                columns.append(windowed(parts, window))
                continue
            column = join_parts(parts)
        else:
            column = final_bundle(one, format=format, structured=structured, without=_OF_THE_STREAM)
        columns.append((column["text/html"], column["text/plain"]))
    shown = join_parts(above)
    titles = None if len(choices) == 1 else [f"choice {choice.index}" for choice in choices]
    return grid_bundle(titles, columns, Part("stream", shown["text/html"], shown["text/plain"]))


def _tail(tokens: Sequence[dict[str, Any]], chars: int) -> list[dict[str, Any]]:
    """The last tokens, about ``chars`` characters of them (a live column re-sent at each refresh)."""
    size, start = 0, len(tokens)
    while start > 0 and size < chars:
        start -= 1
        token = tokens[start].get("token")
        size += len(token) if isinstance(token, str) else 0
    return list(tokens[start:])


def _with_answer(parts: Sequence[Part], answer: Part) -> list[Part]:
    """``parts`` of a column (the stream's own left out) with ``answer`` in place of its answer's."""
    out: list[Part] = []
    for part in parts:
        if part.key in _OF_THE_STREAM:
            continue
        if part.key.startswith("answer-"):
            if answer not in out:
                out.append(answer)
            continue
        out.append(part)
    if answer not in out:  # no answer part yet (tool calls only): the tokens after the reasoning
        out.insert(1 if out and out[0].key == "reasoning" else 0, answer)
    return out
