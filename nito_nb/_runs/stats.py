"""A Run's counts so far, per model and in total: what ``run.stats()`` returns and the progress
display shows (``_progress.py``). Read from the Run and its result rows; no I/O."""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from .._core import metrics

if TYPE_CHECKING:
    from .runner import Run

__all__ = ["run_stats"]

#: The panel judges the client over this many of its latest loop-lag samples (5 s).
CLIENT_RECENT_SAMPLES = 500


def run_stats(run: Run, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per model: total, finished, ok, in flight, errors by kind, rates, p50/p90 of ttft and itl.
    A load run's models also have the rate their schedule asks (``scheduled_per_s``) and, once
    it has ended, the summary's ``achieved_rate`` (``achieved_per_s``: the one definition,
    ``_results.elapsed_time``); while it runs, ``requests_per_s`` counts from the schedule's start."""
    now = run.ended if run.ended is not None else time.monotonic()
    elapsed = max(1e-9, now - run.started)
    # A load run's live rate counts from its schedule's origin, not from the run's start, whose
    # first second or so (the workers, the simulator) would read as a client falling behind.
    sending = max(1e-9, now - run._origin) if run.schedule is not None else elapsed
    achieved = _achieved(run) if run.schedule is not None and run.ended is not None else {}
    totals = Counter(r.model for r in run._todo)
    flying = Counter(s.request.get("model") for s in list(run._in_flight.values()))
    models: dict[str, dict[str, Any]] = {}
    for model, total in totals.items():
        models[model] = {"model": model, "total": total, "finished": 0, "ok": 0, "in_flight": flying.get(model, 0),
                         "errors": Counter(), "ttft": [], "itl": [], "tokens": None, "cost": 0.0}
    for row in rows:
        m = models.get(row["model"])
        if m is None:
            continue
        m["finished"] += 1
        if row["status"] == "done":
            m["ok"] += 1
        else:
            code = row.get("error_code")
            m["errors"][row["status"] + (f" {code}" if code else "")] += 1
        for name in ("ttft", "itl"):
            if row[name] is not None:
                m[name].append(row[name])
        if row["completion_tokens"] is not None:  # a stream without usage has no token count
            m["tokens"] = (m["tokens"] or 0) + row["completion_tokens"]
        m["cost"] += row["cost"] or 0.0
    out = []
    for m in models.values():
        for name in ("ttft", "itl"):
            values = m.pop(name)
            m[f"{name}_p50"] = metrics.quantile(values, 0.5)
            m[f"{name}_p90"] = metrics.quantile(values, 0.9)
        m["requests_per_s"] = m["finished"] / sending
        if run.schedule is not None:  # the plan's requests are taken in turn: each model its share
            m["scheduled_per_s"] = run.schedule.rate * m["total"] / max(1, len(run._todo))
            m["achieved_per_s"] = achieved.get(m["model"])
        # tokens only where usage counted them (docs/METRICS.md: a figure never mixes units)
        m["tokens_per_s"] = None if m["tokens"] is None else m["tokens"] / sending
        m["errors"] = dict(m["errors"])
        out.append(m)
    finished = sum(m["finished"] for m in out)
    total = sum(m["total"] for m in out)
    rate = finished / elapsed
    ended = run.ended is not None
    eta = (total - finished) / rate if rate > 0 and not ended else None
    return {
        "models": out,
        "finished": finished,
        "total": total,
        "skipped": len(run.skipped),
        "elapsed": elapsed,
        "eta": eta,
        "attempts": run.n_attempts,
        "retries": run.n_retries,
        "rate_limited": run.backoff.n_rate_limited,
        "limit": run.backoff.limit,
        "state": ("stopped" if run.stopped or run.error else "done") if ended
        else ("stopping" if run.stopped else "running"),
        "error": None if run.error is None else (getattr(run.error, "message", None) or str(run.error)),
        # the last 5 s of the client's own health (docs/LOAD.md), and why sending stopped early
        "client": run.client.report(recent=CLIENT_RECENT_SAMPLES),
        "stop_reason": run.stop_reason,
    }


def _achieved(run: Run) -> dict[str, float]:
    """The summary's ``achieved_rate`` of each model of an ended load run, computed once (the
    panel's last refresh needs it, and a summary reads every result)."""
    if run._achieved is None:
        table = run.summary()
        run._achieved = {str(model): float(rate) for model, rate in table["achieved_rate"].items()} \
            if len(table) else {}
    return run._achieved
