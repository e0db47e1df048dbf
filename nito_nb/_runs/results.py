"""Result rows of a run (one per request) and its summary (one per model).

The timings and token counts come from each finished Stream's snapshot through the functions of
``_core/metrics.py`` and ``_core/chunk.usage_counts``: docs/METRICS.md's one definition each, the
same functions ``df.nito.metrics()`` and ``df.nito.usage()`` call (tests/test_runs.py checks
that the two agree on every recording). Not through a frame: building the frame of every batch
halved a run's request rate (bench/bench_runs.py; docs/BENCHMARKS.md); a store's events are
built in a helper process (``events.py``).
"""

from __future__ import annotations

import math
import socket
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._core import metrics
from .._core.chunk import usage_counts
from .._core.fields import (
    LOAD_QUANTILES,
    RESULT_ANSWER,
    RESULT_METRICS,
    SUMMARY_MEANS,
    SUMMARY_QUANTILES,
)
from .._core.status import Status
from .._stream_results import StreamResults
from .plan import Request

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ON_TIME_QUANTILE",
    "RESULTS_ADDED",
    "RESULT_COLUMNS",
    "SCORE_ERRORS",
    "SCORE_PREFIX",
    "STRUCTURED_COLUMNS",
    "Finished",
    "LoadInfo",
    "elapsed_time",
    "meets_slo",
    "result_rows",
    "results_frame",
    "stream_metrics",
    "structured_of",
    "summary",
    "with_structured",
]

#: The columns of ``Run.results()`` and of the store's ``requests`` table, with their dtypes.
RESULT_COLUMNS: dict[str, str] = {
    "key": "string",
    "row": "object",
    "model": "string",
    "repeat": "Int64",
    "status": "string",
    # The answer (content, reasoning, n_tool_calls, finish_reason, prompt_tokens...) and the
    # metrics (connect, ttfb, ttft...), as declared in _core/fields.py. One unit per column
    # (docs/METRICS.md): K chunks always, N tokens from usage (else NA).
    **RESULT_ANSWER,
    **RESULT_METRICS,
    "error_code": "string",
    "error_message": "string",
    "attempts": "Int64",
    "started_at": "datetime64[us, UTC]",
    "run_id": "string",
    # Load runs (docs/LOAD.md); seconds after the run's start, on the sending loop's clock.
    "scheduled_at": "float64",  # the intended send (open loop only)
    "sent_at": "float64",  # the first attempt's actual send
    "send_delay": "float64",  # sent_at - scheduled_at
    "ttft_from_schedule": "float64",  # last attempt's send - scheduled_at + ttft: what a user arriving on time waited
    "e2e_from_schedule": "float64",  # last attempt's send - scheduled_at + e2e
    "phase": "string",  # warmup, measure or cooldown (open loop); only measure is summarised
    # Where the request was sent from: "local" (the asyncio engine) or the Ray actor and its node.
    "worker": "string",
    "node": "string",
}
# The columns a run with schema= adds to results() (docs/STRUCTURED.md). Not stored: made from
# each row's content and the run's schema when results() is read, so they are a run's alone and
# not fields of a stream (_core/fields.py).
#: The answer checked against the schema: the object (the pydantic model's instance, or the dict),
#: whether it validated, and why not (each failure by field path, on one line).
STRUCTURED_COLUMNS: dict[str, str] = {
    "parsed": "object",
    "valid": "boolean",
    "parse_error": "string",
}
#: Then one column per top-level field the schema declares, ``out.<field>``: its value in the valid
#: answers (NA elsewhere), typed by pandas' ``convert_dtypes`` (a list or an object stays object).
FIELD_PREFIX = "out."
#: A run with ``score=`` (docs/SCORES.md): one column per score, ``score.<name>``, and the column
#: that says why a row's scores failed. Stored in the store's ``scores`` table, not in ``requests``.
SCORE_PREFIX = "score."
SCORE_ERRORS = "score_errors"
#: What ``run.results()`` adds to ``RESULT_COLUMNS`` without storing it in ``requests``, in order
#: (docs/RUNS.md lists them): whether a resume found the request done, a schema run's columns,
#: then a scored run's.
RESULTS_ADDED: tuple[str, ...] = (
    "done_before",
    *STRUCTURED_COLUMNS,
    FIELD_PREFIX + "<field>",
    SCORE_PREFIX + "<name>",
    SCORE_ERRORS,
)

_METRICS = tuple(RESULT_METRICS)


@dataclass(frozen=True, slots=True)
class Finished:
    """A request that ended: its last attempt's Stream and how many attempts it took."""

    request: Request
    stream: StreamResults
    attempts: int
    started_at: datetime  # wall time of the first attempt
    scheduled_at: float | None = None  # seconds after the run's start (open loop only)
    sent_at: float | None = None  # seconds after the run's start
    last_sent_at: float | None = None  # the last attempt's send, when it was retried (else sent_at)
    worker: str | None = "local"
    node: str | None = None


@dataclass(frozen=True, slots=True)
class LoadInfo:
    """What the summary of an open-loop run needs beyond its results."""

    rate: float  # the schedule's rate (requests/s)
    start: float  # the measured window, seconds after the run's start (warmup excluded)
    end: float  # (cooldown excluded)
    slo: dict[str, float]
    client: dict[str, Any]

    def phase(self, scheduled_at: float) -> str:
        from .schedule import phase

        return phase(scheduled_at, self.start, 0.0, self.end)


_HOST = socket.gethostname()


def _add(a: Any, b: Any) -> Any:
    return None if a is None or b is None else a + b


def stream_metrics(stream: StreamResults) -> dict[str, Any]:
    """A finished Stream's docs/METRICS.md figures and usage counts, from its snapshot."""
    snap = stream.snapshot()
    counts = usage_counts(snap.usage) if isinstance(snap.usage, dict) else {}
    completion = counts.get("completion_tokens")
    n = metrics.n_output_tokens(None if completion is None else {"completion_tokens": completion})
    # connect, ttfb, ttft and e2e: the snapshot's, computed by the same functions (state.py).
    e2e = snap.last_event
    first, last, k = snap.ttft, snap.last_token, snap.n_token_chunks
    return {
        "connect": snap.connect,
        "ttfb": snap.ttfb,
        "ttft": first,
        "e2e": e2e,
        **metrics.of_stream(first, last, k, n, e2e),
        "n_token_chunks": k,
        "n_output_tokens": n,
        "finish_reason": snap.finish_reason,
        "prompt_tokens": counts.get("prompt_tokens"),
        "completion_tokens": completion,
        "cost": counts.get("cost"),
    }


def result_rows(
    items: list[Finished], run_id: str, load: LoadInfo | None = None
) -> list[dict[str, Any]]:
    """One result row per item, from its Stream's snapshot (no frame)."""
    rows = []
    for item in items:
        request, stream = item.request, item.stream
        m = stream_metrics(stream)
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
            "finish_reason": m["finish_reason"],
            "prompt_tokens": m["prompt_tokens"],
            "completion_tokens": m["completion_tokens"],
            "cost": m["cost"],
            **{name: m[name] for name in _METRICS},
            "error_code": None if code is None else str(code),
            "error_message": None if message is None else str(message),
            "attempts": item.attempts,
            "started_at": item.started_at,
            "run_id": run_id,
        }
        delay = (
            None
            if item.scheduled_at is None or item.sent_at is None
            else item.sent_at - item.scheduled_at
        )
        # ttft and e2e are the last attempt's: from the schedule, they count from its send, so that
        # a retried request's failed attempts and waits are in what its user waited.
        last = item.sent_at if item.last_sent_at is None else item.last_sent_at
        waited = None if item.scheduled_at is None or last is None else last - item.scheduled_at
        row.update(
            {
                "scheduled_at": item.scheduled_at,
                "sent_at": item.sent_at,
                "send_delay": delay,
                "ttft_from_schedule": _add(waited, row["ttft"]),
                "e2e_from_schedule": _add(waited, row["e2e"]),
                "phase": None
                if load is None or item.scheduled_at is None
                else load.phase(item.scheduled_at),
                "worker": item.worker,
                "node": item.node
                if item.node is not None
                else (_HOST if item.worker == "local" else None),
            }
        )
        rows.append(row)
    return rows


def results_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows as a DataFrame with the columns and dtypes of ``RESULT_COLUMNS``.

    Each column is made as its dtype at once, and the frame from the columns: a frame of the
    rows, then a cast column by column, cost 5 ms a call whatever the rows (the block manager
    re-laid at each cast), on the writer thread of a run store once per batch, under the GIL
    the sending loop needs (``bench/bench_runs_floor.py``); this costs 1.3 ms for 128 rows."""
    import numpy as np
    import pandas as pd

    from .._frame.dtypes import _ints

    columns: dict[str, Any] = {}
    for name, dtype in RESULT_COLUMNS.items():
        values = [row.get(name) for row in rows]
        if name == "started_at":
            columns[name] = pd.to_datetime(pd.Series(values, dtype=object), utc=True)
        elif dtype == "Int64":  # a count past 64 bits stays exact, as in frames
            columns[name] = _ints(values, name)
        elif dtype == "float64":
            try:  # None is NaN
                columns[name] = np.array(values, dtype=np.float64)
            except (TypeError, ValueError):  # what pandas makes of it (pd.NA: pandas' error)
                columns[name] = pd.Series(values, dtype=object).astype(dtype).to_numpy()
        elif dtype == "object":  # as pandas infers it (a run's row labels: int64, str...)
            columns[name] = pd.Series(values)
        else:
            columns[name] = pd.array(values, dtype=dtype)
    return pd.DataFrame(columns, index=pd.RangeIndex(len(rows)), copy=False)


def with_structured(df: pd.DataFrame, schema: Any) -> pd.DataFrame:
    """``df`` (results) with ``STRUCTURED_COLUMNS`` and one ``out.<field>`` per declared field:
    each row's content checked against ``schema`` (``nito_nb._structured.Schema``). A request
    that did not end ``done`` is not valid (a cut answer is not the model's whole object)."""
    import pandas as pd

    parsed: list[Any] = []
    valid: list[bool] = []
    errors: list[str | None] = []
    objects: list[dict[str, Any] | None] = []
    for status, content in zip(
        df["status"].astype(object), df["content"].astype(object), strict=True
    ):
        one, ok, error, fields = structured_of(status, content, schema)
        parsed.append(one)
        valid.append(ok)
        errors.append(error)
        objects.append(fields)
    df = df.copy()
    df["parsed"] = pd.Series(parsed, index=df.index, dtype="object")
    df["valid"] = pd.Series(valid, index=df.index, dtype="boolean")
    df["parse_error"] = pd.Series(errors, index=df.index, dtype="string")
    for field in schema.fields:
        values = [
            pd.NA if value is None or field not in value else value[field] for value in objects
        ]
        column = pd.Series(values, index=df.index, dtype="object")
        scalar = all(not isinstance(v, (list, dict)) for v in values)
        df[FIELD_PREFIX + field] = column.convert_dtypes() if scalar and len(column) else column
    return df


def structured_of(
    status: Any, content: Any, schema: Any
) -> tuple[Any, bool, str | None, dict[str, Any] | None]:
    """One answer checked against ``schema``: (the object or None, valid, why not, its fields as
    a dict or None). The rule of ``with_structured``, and of the rows a run's scores read."""
    checked = schema.check(content if isinstance(content, str) else "")
    ok = checked.error is None and status == Status.DONE
    error: str | None
    if checked.error is not None:
        error = str(checked.error)
    else:
        error = None if ok else f"(root): the request ended {status}"
    value = checked.value
    # a pydantic model: its fields, as dicts
    if ok and callable(getattr(value, "model_dump", None)):
        value = value.model_dump()
    return (
        (checked.value if ok else None),
        ok,
        error,
        (value if ok and isinstance(value, dict) else None),
    )


def summary(results: pd.DataFrame, load: LoadInfo | None = None) -> pd.DataFrame:
    """One row per model: ``n``, ``ok`` (status done), one ``n_<status>`` column per other
    status, p50/p90/p99 of ``ttft``, ``itl`` and ``e2e``, mean ``output_tps`` (over the requests
    with usage) and ``output_chunks_per_s``, total tokens and cost. Percentiles over the requests
    that have the metric (linear interpolation), each request counting once.

    With ``load`` (an open-loop run), only the requests of the ``measure`` phase count, and
    the row gains the load columns of docs/LOAD.md. Results of a run with ``schema=`` (a
    ``valid`` column) give ``valid_share``: the share of the model's requests whose answer
    validated (docs/STRUCTURED.md). Results with scores (``score.<name>`` columns) give each
    one's mean over the requests that have it (a boolean's: the share of True; a text score has
    none: docs/SCORES.md)."""
    import pandas as pd

    if load is not None:
        results = results[results["phase"].astype(object) == "measure"]
    rows = [
        _summary_row(model, group, load)
        for model, group in results.groupby("model", sort=True, observed=True)
    ]
    # the same columns and dtypes: summary()["ttft_p99"] of an empty run was a KeyError
    if not rows:
        return (
            pd.DataFrame([_summary_row("", results.iloc[0:0], load)]).iloc[0:0].set_index("model")
        )
    return pd.DataFrame(rows).set_index("model")


def _summary_row(model: Any, group: pd.DataFrame, load: LoadInfo | None) -> dict[str, Any]:
    """The summary's row of one model's results (``group``)."""
    status = group["status"].astype(object)
    row: dict[str, Any] = {
        "model": model,
        "n": len(group),
        "ok": int((status == Status.DONE).sum()),
    }
    for name in (Status.ERROR, Status.TRUNCATED, Status.FAILED, Status.STOPPED):
        row[f"n_{name}"] = int((status == name).sum())
    row.update(_quantiles(group, SUMMARY_QUANTILES))
    for speed in SUMMARY_MEANS:
        values = group[speed].astype("float64").dropna()
        row[f"{speed}_mean"] = float(values.mean()) if len(values) else math.nan
    row["prompt_tokens"] = int(group["prompt_tokens"].fillna(0).sum())
    row["completion_tokens"] = int(group["completion_tokens"].fillna(0).sum())
    row["cost"] = float(group["cost"].astype("float64").fillna(0).sum())
    if "valid" in group.columns:  # issue 33: a run with schema=
        row["valid_share"] = (
            float(group["valid"].fillna(False).astype(bool).mean()) if len(group) else math.nan
        )
    for name in group.columns:  # issue 34: each score's mean (a boolean's: the share of True)
        if name.startswith(SCORE_PREFIX) and str(group[name].dtype) in ("boolean", "Float64"):
            values = group[name].astype("Float64").dropna()
            row[name] = float(values.mean()) if len(values) else math.nan
    if load is not None:
        row.update(_load_columns(group, load))
    return row


def _quantiles(
    group: pd.DataFrame, wanted: tuple[tuple[str, tuple[str, ...]], ...]
) -> dict[str, float]:
    """``<metric>_p50``... of each metric: linear interpolation over the requests that have it."""
    out = {}
    for metric, aggregates in wanted:
        values = group[metric].astype("float64").tolist()
        for aggregate in aggregates:
            value = metrics.quantile(values, int(aggregate[1:]) / 100)
            out[f"{metric}_{aggregate}"] = math.nan if value is None else value
    return out


def meets_slo(results: pd.DataFrame, slo: dict[str, float]) -> pd.Series:
    """Per request: ended ``done`` and every bounded metric present and within its bound."""
    ok = results["status"].astype(object) == Status.DONE
    for name, bound in slo.items():
        values = results[name].astype("float64")
        ok &= values.notna() & (values <= bound)
    return ok


#: ``elapsed_time`` takes the latency of an on-time request as this quantile of the window's
#: requests' own latencies (``e2e``: from their last attempt's send, so neither a late send, nor
#: a backoff after a 429, nor a retry's wait is in it): the low end, a request no backlog held
#: up. (Latencies from the schedule were tried first: a client overloaded from its first request,
#: or a run paused by 429s, had seconds of backlog in even the fastest of them, and read a third
#: above what it ended per second.)
ON_TIME_QUANTILE = 0.05


def elapsed_time(
    scheduled_at: list[float], ended_at: list[float], latencies: list[float], window: float
) -> float:
    """The seconds the measured window's requests took, the one denominator of a load run's
    ``achieved_rate``, ``goodput`` and ``output_tokens_per_s``: from the first one's scheduled
    send to the last one's end, less the latency of an on-time request (the ``ON_TIME_QUANTILE``
    of ``latencies``, their ``e2e``, or the wait for the first end if shorter), and never less
    than the window's length. ``scheduled_at``
    and ``ended_at``: one pair per request (its last attempt's send plus its ``e2e``, on the
    driver's timeline; NaN for a request that never ended: left out).

    A client and a gateway that keep up end the last request one latency after it was due: the
    window's length. A client that falls behind, or a gateway slower than the rate, ends it
    later, and the rate is what they really sent and ended: with the window's length alone, a
    client asked for 2,000 requests/s that managed 376/s read 2,000/s. Their sends alone would
    not do: an overloaded loop sent 4,000 requests within 4.9 s and ended them over 18 s."""
    pairs = sorted((s, e) for s, e in zip(scheduled_at, ended_at, strict=True) if s == s and e == e)
    if not pairs:
        return max(window, 1e-9)
    # Two estimates of an on-time latency, each inflated by a backlog of its own kind: the low end
    # of the requests' own e2e (inflated when every request waited for a CPU: a client overloaded
    # from the start read 5th percentiles of 6-13 s out of 20 s, and rates up to 2.7x what it
    # ended), and the wait for the window's first end (inflated when the start was held up, as by
    # a 429 pause). The smaller is the nearer.
    first_end = min(e for _, e in pairs) - pairs[0][0]
    on_time = min(metrics.quantile(latencies, ON_TIME_QUANTILE) or 0.0, max(first_end, 0.0))
    took = max(e for _, e in pairs) - pairs[0][0] - on_time
    return max(window, took, 1e-9)


def _load_columns(group: pd.DataFrame, load: LoadInfo) -> dict[str, Any]:
    """The columns a load run adds to its summary row (docs/LOAD.md)."""
    from .client_load import verdict

    window = max(load.end - load.start, 1e-9)
    scheduled = group["scheduled_at"].astype("float64")
    elapsed = elapsed_time(
        scheduled.tolist(),
        (scheduled + group["e2e_from_schedule"].astype("float64")).tolist(),
        group["e2e"].astype("float64").tolist(),
        window,
    )
    done = group["status"].astype(object) == Status.DONE
    tokens = group["n_output_tokens"].dropna()  # only where usage counted them
    out: dict[str, Any] = {
        "rate": load.rate,
        "window_s": window,
        "elapsed_s": elapsed,
        # Every rate of the window per second of the time its requests took (one rule:
        # elapsed_time), so goodput never exceeds the achieved rate.
        "achieved_rate": float(done.sum()) / elapsed,
        # NaN when no request reported usage: chunks are never counted as tokens, nor as 0.
        "output_tokens_per_s": float(tokens.sum()) / elapsed if len(tokens) else math.nan,
        "goodput": float(meets_slo(group, load.slo).sum()) / elapsed if load.slo else math.nan,
        "error_rate": float((~done).sum()) / len(group) if len(group) else math.nan,
    }
    # connect too: rising with the rate, it is the client's loop taking longer to see its
    # connections open (docs/LOAD.md), inside every ttft.
    out.update(_quantiles(group, LOAD_QUANTILES))
    out.update(
        {
            k: v
            for k, v in load.client.items()
            if k not in ("client_bound", "client_note", "client_runs_simulator")
        }
    )
    ttft = metrics.quantile(group["ttft"].astype("float64").tolist(), 0.5)
    out["client_bound"], out["client_note"] = verdict(load.client, ttft)
    return out
