"""The status line and the progress footer of a stream's state (plain text; pure).

The status line quotes the server (the model's name, the finish reason, a ``free_tier`` object):
it is printable (``_core/printable.py``) wherever it goes, the terminal, text/plain or HTML.
"""

from __future__ import annotations

import json
from typing import Any

from .._core import metrics
from .._core.accumulate import USAGE_WITHOUT_TEXT
from .._core.printable import printable
from .._core.status import RUNNING, SYMBOLS, Status

#: The status line shows a ``free_tier`` object in at most this many characters.
_FREE_TIER_CHARS = 160

_RUNNING = RUNNING


def _status(state: Any) -> str:
    status = getattr(state, "status", None)
    if isinstance(status, str) and status:
        return status
    return Status.DONE if getattr(state, "done", False) else Status.STREAMING


def _number(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.6g}" if abs(value) < 1e6 else f"{value:,.0f}"


def _real(value: Any) -> float | None:
    return float(value) if _number(value) is not None else None


def _usage_value(usage: dict[str, Any], *path: str) -> Any:
    value: Any = usage
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def status_text(state: Any) -> str:
    """The one-line summary: state, model, TTFT, speed, chunks, finish reason, usage, cost."""
    status = _status(state)
    items = [f"{SYMBOLS.get(status, '?')} {status}"]
    model = getattr(state, "model", None)
    if model:
        items.append(str(model)[:200])
    ttft = _real(getattr(state, "ttft", None))
    elapsed = _real(getattr(state, "elapsed", None))
    if ttft is not None:
        items.append(f"TTFT {ttft:.2f} s")
    if elapsed is not None:
        items.append(f"{elapsed:.2f} s {'so far' if status in _RUNNING else 'total'}")
    usage = getattr(state, "usage", None)
    usage = usage if isinstance(usage, dict) else {}
    n_chunks = getattr(state, "n_chunks", None)
    # The speed, from docs/METRICS.md's one definition each: output_tps (tokens/s) when the usage
    # counts tokens, else output_chunks_per_s, labelled as chunks (never chunks called tokens).
    # K is the token-bearing chunks (a duck-typed state without that count: its chunks).
    k = 0
    for value in (getattr(state, "n_token_chunks", None), n_chunks):
        if isinstance(value, int) and not isinstance(value, bool):
            k = int(value)
            break
    tps = metrics.output_tps(metrics.n_output_tokens(usage), ttft, elapsed)
    if tps is not None:
        items.append(f"{tps:,.1f} tok/s (usage)")
    else:
        per_s = metrics.output_chunks_per_s(k, ttft, elapsed) if k else None
        if per_s is not None:
            items.append(f"{per_s:,.1f} chunks/s")
    if _number(n_chunks) is not None:
        items.append(f"{n_chunks:,} chunks")
    finish = getattr(state, "finish_reason", None)
    if finish:
        items.append(f"finish: {str(finish)[:60]}")
    tokens = []
    for label, path, always in (
        ("prompt", ("prompt_tokens",), True),
        ("cached", ("prompt_tokens_details", "cached_tokens"), False),
        ("completion", ("completion_tokens",), True),
        ("reasoning", ("completion_tokens_details", "reasoning_tokens"), False),
    ):
        value = _usage_value(usage, *path)
        shown = _number(value)
        if shown is not None and (always or value):
            tokens.append(f"{shown} {label}")
    if tokens:
        items.append("tokens: " + " / ".join(tokens))
    cost = _real(usage.get("cost"))
    if cost is not None:
        # Fixed notation (never 2.3e-05): costs are small, and the digits that matter are last.
        items.append(
            "cost $" + (f"{cost:.6f}".rstrip("0").rstrip(".") if cost < 100 else f"{cost:,.2f}")
        )
    free_tier = getattr(state, "free_tier", None)
    if free_tier is not None:
        items.append(f"free tier: {_compact(free_tier, _FREE_TIER_CHARS)}")
    # An answer the usage counts but that never came looks like an empty done: said here, where
    # the eye goes (the list of anomalies below the answer says more).
    if any(
        getattr(a, "kind", None) == USAGE_WITHOUT_TEXT
        for a in getattr(state, "anomalies", None) or ()
    ):
        items.append("⚠ no text arrived, though the usage counts completion tokens")
    return printable(" · ".join(items))


def _compact(value: Any, limit: int) -> str:
    """A gateway's object on one short line: ``key=value, ...`` for a flat dict, else JSON (the
    caller escapes it; whitespace, newlines included, is collapsed)."""
    if isinstance(value, dict) and all(not isinstance(v, (dict, list)) for v in value.values()):
        text = ", ".join(f"{k}={v}" for k, v in value.items())
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        except ValueError:  # a circular structure: it cannot come from JSON, show its type only
            text = type(value).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def progress_text(state: Any) -> str:
    """The footer of a long growing answer: how long and how much so far (the status line, at the
    top of the output, has scrolled out of view by then)."""
    elapsed = _real(getattr(state, "elapsed", None))
    n_chunks = getattr(state, "n_chunks", None)
    items = [f"{elapsed:,.0f} s" if elapsed is not None else None]
    if _number(n_chunks) is not None:
        items.append(f"{n_chunks:,} chunks")
    shown = " · ".join(i for i in items if i)
    return (
        f"{SYMBOLS[Status.STREAMING]} streaming… {shown} so far"
        if shown
        else f"{SYMBOLS[Status.STREAMING]} streaming…"
    )
