"""Result rows of a run (one per request) and its summary (one per model).

The timings come from ``df.nito.metrics()`` and the tokens from ``df.nito.usage()`` of the
frame of the finished streams: the same code as a user's own frame, computed for a batch of
streams at once (see docs/METRICS.md for every definition).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._core import metrics
from .._stream_base import StreamBase
from ._plan import Request

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RESULT_COLUMNS", "Finished", "result_rows", "results_frame", "summary"]

#: The columns of ``Run.results()`` and of the store's ``requests`` table, with their dtypes.
RESULT_COLUMNS: dict[str, str] = {
    "key": "string",
    "row": "object",
    "model": "string",
    "repeat": "Int64",
    "status": "string",
    "content": "string",
    "reasoning": "string",
    "n_tool_calls": "Int64",
    "finish_reason": "string",
    "prompt_tokens": "Int64",
    "completion_tokens": "Int64",
    "cost": "float64",
    "ttfb": "float64",
    "ttft": "float64",
    "e2e": "float64",
    "itl": "float64",
    "tpot": "float64",
    "output_tps": "float64",
    "error_code": "string",
    "error_message": "string",
    "attempts": "Int64",
    "started_at": "datetime64[us, UTC]",
    "run_id": "string",
}
_METRICS = ("ttfb", "ttft", "e2e", "itl", "tpot", "output_tps")


@dataclass(frozen=True, slots=True)
class Finished:
    """A request that ended: its last attempt's Stream and how many attempts it took."""

    request: Request
    stream: StreamBase
    attempts: int
    started_at: datetime  # wall time of the first attempt


def _value(value: Any) -> Any:
    """None for every flavour of missing (NaN, pd.NA, None)."""
    if value is None:
        return None
    try:
        if value != value:  # NaN
            return None
    except TypeError:  # pd.NA compares to NA
        return None
    return value


def result_rows(items: list[Finished], run_id: str) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """(one result row per item, the frame of their streams with ``stream`` = the request key)."""
    from .._frame import frame

    df = frame({item.request.key: item.stream for item in items})
    # pandas deep-copies attrs on every column access: with a batch of streams, the per-stream
    # attrs cost a third of metrics() (profiled). Nothing here reads them (the store keeps the
    # request in its own columns).
    df.attrs.clear()
    metrics = df.nito.metrics().to_dict("index")
    usage = df.nito.usage().to_dict("index")
    rows = []
    for item in items:
        request, stream = item.request, item.stream
        m, u = metrics[request.key], usage[request.key]
        error = stream.error or {}
        code = error.get("code")
        message = error.get("message")
        if message is None and stream.exception is not None:
            message = stream.exception.message
        row = {
            "key": request.key,
            "row": request.row,
            "model": request.model,
            "repeat": request.repeat,
            "status": stream.status,
            "content": stream.content,
            "reasoning": stream.reasoning,
            "n_tool_calls": len(stream.tool_calls),
            "finish_reason": _value(m["finish_reason"]),
            "prompt_tokens": _value(u["prompt_tokens"]),
            "completion_tokens": _value(u["completion_tokens"]),
            "cost": _value(u["cost"]),
            **{name: _value(m[name]) for name in _METRICS},
            "error_code": None if code is None else str(code),
            "error_message": None if message is None else str(message),
            "attempts": item.attempts,
            "started_at": item.started_at,
            "run_id": run_id,
        }
        rows.append(row)
    return rows, df


def results_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows as a DataFrame with the columns and dtypes of ``RESULT_COLUMNS``."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    for name, dtype in RESULT_COLUMNS.items():
        if name == "started_at":
            df[name] = pd.to_datetime(df[name], utc=True)
        elif dtype != "object":
            df[name] = df[name].astype(dtype)
    return df


def summary(results: pd.DataFrame) -> pd.DataFrame:
    """One row per model: ``n``, ``ok`` (status done), one ``n_<status>`` column per other
    status, p50/p90/p99 of ``ttft``, ``itl`` and ``e2e``, mean ``output_tps``, total tokens and
    cost. Percentiles over the requests that have the metric (linear interpolation)."""
    import pandas as pd

    rows = []
    for model, group in results.groupby("model", sort=True, observed=True):
        status = group["status"].astype(object)
        row: dict[str, Any] = {"model": model, "n": len(group), "ok": int((status == "done").sum())}
        for name in ("error", "truncated", "failed", "stopped"):
            row[f"n_{name}"] = int((status == name).sum())
        for metric in ("ttft", "itl", "e2e"):
            values = group[metric].astype("float64").tolist()
            for q in (50, 90, 99):
                value = metrics.quantile(values, q / 100)
                row[f"{metric}_p{q}"] = math.nan if value is None else value
        tps = group["output_tps"].astype("float64").dropna()
        row["output_tps_mean"] = float(tps.mean()) if len(tps) else math.nan
        row["prompt_tokens"] = int(group["prompt_tokens"].fillna(0).sum())
        row["completion_tokens"] = int(group["completion_tokens"].fillna(0).sum())
        row["cost"] = float(group["cost"].astype("float64").fillna(0).sum())
        rows.append(row)
    return pd.DataFrame(rows).set_index("model") if rows else pd.DataFrame()
