"""The tables of streams: ``%nito history``, ``%nito cost``, and the comparison shown after
``-m a,b,c``. The figures come from the pandas adapter (docs/METRICS.md's one definition each)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._core.fields import COMPARISON

__all__ = ["COMPARISON_COLUMNS", "comparison_table", "cost_line", "history_table", "metrics_table"]

#: The columns of the comparison table shown after ``-m a,b,c`` (``%nito history`` has them all).
#: Its metrics are declared in ``_core/fields.py`` (``Metric.comparison``).
COMPARISON_COLUMNS = ("model", "status", *COMPARISON, "finish_reason", "error")


def metrics_table(streams: Sequence[Any]) -> Any:
    """One row per Stream: the pandas adapter's metrics (``nito_nb.frame(...).nito.metrics()``)."""
    import pandas as pd

    if not streams:
        return pd.DataFrame(columns=list(COMPARISON_COLUMNS))
    try:
        from .._frame import frame

        return frame(list(streams)).nito.metrics()
    except Exception:  # the table is secondary to the answers: never lose the cell over it
        return _simple_metrics(streams)


def _simple_metrics(streams: Sequence[Any]) -> Any:
    """The same figures from Stream attributes alone (when the adapter cannot build a frame)."""
    import pandas as pd

    rows = []
    for s in streams:
        snap = s.snapshot()  # docs/METRICS.md's figures, from their one definition (_core/metrics)
        error = snap.error.get("message") if isinstance(snap.error, dict) else snap.error
        rows.append(
            {
                "model": snap.model,
                "status": snap.status,
                "ttft": snap.ttft,
                "e2e": snap.elapsed,
                "output_tps": snap.output_tps,
                "output_chunks_per_s": snap.output_chunks_per_s,
                "n_output_tokens": snap.n_output_tokens,
                "n_token_chunks": snap.n_token_chunks,
                "n_chunks": snap.n_chunks,
                "finish_reason": snap.finish_reason,
                "error": error,
            }
        )
    return pd.DataFrame(rows)


#: ``%nito history``: a prompt is shown up to this many characters.
HISTORY_PROMPT_CHARS = 80


def _cost(stream: Any) -> float | None:
    usage = stream.usage if isinstance(stream.usage, dict) else {}
    cost = usage.get("cost")
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def _prompt(stream: Any) -> str:
    """The last user message of the request, on one line, shortened."""
    text = ""
    for message in reversed(stream.request.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts: their text
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            text = " ".join(str(content or "").split())
            break
    return text if len(text) <= HISTORY_PROMPT_CHARS else text[: HISTORY_PROMPT_CHARS - 1] + "…"


def history_table(streams: Sequence[Any]) -> Any:
    """``%nito history``: one row per Stream of the session, oldest first: when it was sent, the
    prompt, the metrics, its cost and the running cost of the session so far."""
    import pandas as pd

    table = metrics_table(streams)
    costs = pd.Series([_cost(s) for s in streams], index=table.index, dtype="float64")
    front = {
        # The kernel's local clock, to the second: what the user compares with their own.
        "time": pd.Series(
            [pd.Timestamp(s.t0_wall.astimezone()).tz_localize(None).floor("s") for s in streams],
            index=table.index,
            dtype="datetime64[ns]",
        ),
        "prompt": pd.Series([_prompt(s) for s in streams], index=table.index, dtype=object),
        "model": table.pop("model"),
        "status": table.pop("status"),
        "cost": costs,
        "cost_total": costs.fillna(0).cumsum(),  # what the session has spent so far
    }
    for position, (name, column) in enumerate(front.items()):
        table.insert(position, name, column)
    return table


def cost_line(streams: Sequence[Any], where: str = "in this session") -> str:
    """``%nito cost``: the session's running total, and how many streams reported no cost."""
    costs = [_cost(s) for s in streams]
    known = [c for c in costs if c is not None]
    line = f"nito: ${sum(known):.6f} over {len(streams)} stream(s) {where}".replace(".000000", "")
    if len(known) < len(streams):
        line += f" ({len(streams) - len(known)} reported no cost)"
    return line


def comparison_table(streams: Sequence[Any]) -> Any:
    """The metrics that matter when comparing models, one row per model, plus cost when sent."""
    table = metrics_table(streams)
    columns = [c for c in COMPARISON_COLUMNS if c in table.columns]
    table = table[columns].copy()
    costs = [s.usage.get("cost") if isinstance(s.usage, dict) else None for s in streams]
    if any(cost is not None for cost in costs):
        table["cost"] = costs
    return table.reset_index(drop=True)
