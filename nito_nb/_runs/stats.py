"""A Run's counts, and what ``run.stats()`` makes of them: per model and in total, what the
progress display shows (``progress.py``). No I/O.

``RunStats`` owns what is counted while the run goes (attempts, retries, requests ended and those
that did not end done: the error rate that ``stop_on_error_rate`` judges), the client's health
(its ``ClientMonitor``) and, once a load run has ended, its achieved rates. The sender
(``dispatch.py``) counts; ``report`` is given the rest (the result rows, what is in flight, the
run's state) by the Run.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .._core import metrics
from .._core.status import Status

if TYPE_CHECKING:
    import pandas as pd

    from .backoff import Backoff
    from .client_load import ClientMonitor
    from .plan import Request

__all__ = ["MIN_ENDED_FOR_ERROR_RATE", "RunStats"]

#: The panel judges the client over this many of its latest loop-lag samples (5 s).
CLIENT_RECENT_SAMPLES = 500
#: ``stop_on_error_rate`` is judged once this many requests have ended (not on the first one).
MIN_ENDED_FOR_ERROR_RATE = 10


class RunStats:
    """What one run counts. ``todo``: the requests it sends; ``rate``: its schedule's (a load run)."""

    def __init__(
        self, todo: list[Request], rate: float | None, skipped: list[Request], client: ClientMonitor
    ) -> None:
        # A resumed run's requests done before it count among its totals and its finished ones
        # (its result rows hold them): "done: 0/0" was all a fully done store's run said.
        self.totals = Counter(r.model for r in [*todo, *skipped])
        self.total = len(todo)
        self.rate = rate
        self.skipped = len(skipped)
        self._done_before = {r.key for r in skipped}
        #: The client's own health (loop lag, CPU): sampled on the run's loop, pooled with the workers'.
        self.client = client
        self.n_attempts = 0
        self.n_retries = 0
        self.n_ended = (
            0  # requests ended so far (on the loop thread), and those that did not end done
        )
        self.n_bad = 0
        self._achieved: dict[str, float] | None = None  # a load run's achieved rates, once ended

    def attempted(self) -> None:
        """An attempt is being sent (the first of a request, or a retry)."""
        self.n_attempts += 1

    def retried(self) -> None:
        """A failed attempt will be tried again."""
        self.n_retries += 1

    def ended(self, status: str) -> None:
        """A request ended with ``status`` (a result: done, error, truncated, stopped, failed)."""
        self.n_ended += 1
        if status not in (Status.DONE, Status.STOPPED):
            self.n_bad += 1

    def over_error_rate(self, limit: float) -> str | None:
        """Why sending stops, once the share of ended requests that did not end done (nor
        stopped) reached ``limit`` among at least ``MIN_ENDED_FOR_ERROR_RATE``; else None."""
        if self.n_ended >= MIN_ENDED_FOR_ERROR_RATE and self.n_bad / self.n_ended >= limit:
            return (
                f"error rate {self.n_bad}/{self.n_ended} reached stop_on_error_rate={limit:g}:"
                " no further request was sent"
            )
        return None

    def achieved(self, summary: Callable[[], pd.DataFrame]) -> dict[str, float]:
        """The summary's ``achieved_rate`` of each model of an ended load run, computed once (the
        panel's last refresh needs it, and a summary reads every result)."""
        if self._achieved is None:
            table = summary()
            self._achieved = (
                {str(model): float(rate) for model, rate in table["achieved_rate"].items()}
                if len(table)
                else {}
            )
        return self._achieved

    def report(
        self,
        rows: list[dict[str, Any]],
        *,
        in_flight: Iterable[str | None],
        started: float,
        origin: float,
        ended: float | None,
        state: str,
        error: BaseException | None,
        stop_reason: str | None,
        backoff: Backoff,
        summary: Callable[[], pd.DataFrame],
        refused_models: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Per model: total, finished, ok, stopped, in flight, errors by kind (stopped is none),
        rates, p50/p90 of ttft and
        itl. ``in_flight``: the model of each request in flight; ``started``, ``origin`` (the
        schedule's, once sending started) and ``ended``: monotonic times. A load run's models
        also have the rate their schedule asks (``scheduled_per_s``) and, once it has ended, the
        summary's ``achieved_rate`` (``achieved_per_s``: the one definition,
        ``results.elapsed_time``); while it runs, ``requests_per_s`` counts from the schedule's start."""
        now = ended if ended is not None else time.monotonic()
        elapsed = max(1e-9, now - started)
        # A load run's live rate counts from its schedule's origin, not from the run's start, whose
        # first second or so (the workers, the simulator) would read as a client falling behind.
        sending = max(1e-9, now - origin) if self.rate is not None else elapsed
        achieved = self.achieved(summary) if self.rate is not None and ended is not None else {}
        flying = Counter(in_flight)
        models: dict[str, dict[str, Any]] = {}
        for model, total in self.totals.items():
            models[model] = {
                "model": model,
                "total": total,
                "finished": 0,
                "ok": 0,
                "in_flight": flying.get(model, 0),
                "errors": Counter(),
                "ttft": [],
                "itl": [],
                "tokens": None,
                "cost": 0.0,
                "sent": 0,
                "stopped": 0,
            }
        for row in rows:
            m = models.get(row["model"])
            if m is None:
                continue
            m["finished"] += 1
            sent = row["key"] not in self._done_before  # the rates count what this run sent
            m["sent"] += sent
            if row["status"] == Status.DONE:
                m["ok"] += 1
            # stopped by the user (Stop, an interrupt): not an error
            elif row["status"] == Status.STOPPED:
                m["stopped"] += 1
            else:
                code = row.get("error_code")
                m["errors"][row["status"] + (f" {code}" if code else "")] += 1
            for name in ("ttft", "itl"):
                if row[name] is not None:
                    m[name].append(row[name])
            # a stream without usage has no token count
            if sent and row["completion_tokens"] is not None:
                m["tokens"] = (m["tokens"] or 0) + row["completion_tokens"]
            m["cost"] += row["cost"] or 0.0
        out = []
        for m in models.values():
            for name in ("ttft", "itl"):
                values = m.pop(name)
                m[f"{name}_p50"] = metrics.quantile(values, 0.5)
                m[f"{name}_p90"] = metrics.quantile(values, 0.9)
            m["requests_per_s"] = m["sent"] / sending
            if self.rate is not None:  # the plan's requests are taken in turn: each model its share
                m["scheduled_per_s"] = self.rate * m["total"] / max(1, self.total)
                m["achieved_per_s"] = achieved.get(m["model"])
            # tokens only where usage counted them (docs/METRICS.md: a figure never mixes units)
            m["tokens_per_s"] = None if m["tokens"] is None else m["tokens"] / sending
            m["errors"] = dict(m["errors"])
            out.append(m)
        finished = sum(m["finished"] for m in out)
        total = sum(m["total"] for m in out)
        rate = sum(m.pop("sent") for m in out) / elapsed
        eta = (total - finished) / rate if rate > 0 and ended is None else None
        return {
            "models": out,
            "finished": finished,
            "total": total,
            "skipped": self.skipped,
            "elapsed": elapsed,
            "eta": eta,
            "attempts": self.n_attempts,
            "retries": self.n_retries,
            "rate_limited": backoff.n_rate_limited,
            "limit": backoff.limit,
            "state": state,
            "error": None if error is None else (getattr(error, "message", None) or str(error)),
            # the last 5 s of the client's own health (docs/LOAD.md), and why sending stopped early
            # judged against the median TTFT of what ended: a lag beside answers of a second changes nothing
            "client": self.client.report(
                recent=CLIENT_RECENT_SAMPLES,
                ttft_p50=metrics.quantile([r["ttft"] for r in rows if r["ttft"] is not None], 0.5),
            ),
            "stop_reason": stop_reason,
            # the models sent no more (their first answers were 404s), with the gateway's message
            "refused_models": dict(refused_models or {}),
        }
