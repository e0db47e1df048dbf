"""A sweep: the same load run at several rates, one after the other, and its summary and plot.

    sweep = nito_nb.sweep(prompts, model="sim/chat", rates=[1, 5, 10, 20], duration=30, store="runs/sweep")
    sweep.wait()      # in a kernel the sweep runs in the background; elsewhere it has ended already
    sweep.summary()   # one row per rate (per rate and model with several models)
    sweep.plot()      # latency percentiles against the achieved rate, errors marked

Each rate is one :class:`~nito_nb._runs.Run` (its own ``run_id``, sharing the store); the rates
run in the order given, each after the previous one ended, so that they do not load each other.
In a kernel the rates run on a thread of their own and ``sweep(...)`` returns at once with a live
view (``sweep_view.py``): a blocked cell could not receive the view's Stop button.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._core.errors import ConfigurationError
from .._core.waiting import wait_or_stop
from .api import remember, run
from .runner import Run, runs_frame
from .schedule import check_rate

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from .sweep_view import SweepView

__all__ = ["Sweep"]

#: While a rate runs in the background, the live view is updated this often (seconds; it renders
#: at most ``progress.MAX_UPDATES_PER_S`` times a second).
VIEW_REFRESH_S = 0.25


class Sweep:
    """The runs of a sweep, one per rate, in order. ``wait()`` (in a kernel) waits for the last
    rate; ``stop()`` stops the current rate (what arrived is kept) and starts no other."""

    def __init__(self, rates: list[float]) -> None:
        #: The rates asked for, in order; ``rates`` are those that started.
        self.asked = rates
        self.runs: list[Run] = []
        self.stopped = False
        #: An unexpected failure of the background thread (a rate's options are checked before
        #: ``sweep`` returns), or None.
        self.error: BaseException | None = None
        self.view: SweepView | None = None
        #: True once no rate runs any more (set before the view's last refresh and ``wait``'s return).
        self.ended = False
        self._lock = threading.Lock()
        # None: see Run's
        self._finished: concurrent.futures.Future[None] = concurrent.futures.Future()

    @property
    def done(self) -> bool:
        return self._finished.done()

    def wait(self, timeout: float | None = None) -> Sweep:
        """Wait for the last rate, or ``timeout`` seconds at most (then it goes on: check ``done``);
        a KeyboardInterrupt stops the sweep, then waits for its end."""
        wait_or_stop(self._finished, self.stop, timeout)
        return self

    def stop(self) -> None:
        """Stop the current rate (in-flight requests recorded as stopped) and start no other."""
        with self._lock:
            self.stopped = True
            current = self.runs[-1] if self.runs else None
        if current is not None:
            current.stop()

    def _next(self, make: Callable[[float], Run], rate: float) -> Run | None:
        with self._lock:
            if self.stopped:
                return None
            the_run = make(rate)
            self.runs.append(the_run)
            return the_run

    def _run_rates(self, make: Callable[[float], Run], first: Run | None, live: bool) -> None:
        """Each rate in turn (``first`` is already running); ``live``: refresh the view meanwhile."""
        try:
            for i, rate in enumerate(self.asked):
                the_run = first if i == 0 and first is not None else self._next(make, rate)
                if the_run is None:
                    break
                try:
                    while True:
                        if self.view is not None:
                            self.view.update()
                        # returns when its time is up
                        the_run.wait(VIEW_REFRESH_S if live else None)
                        if the_run.done:
                            break
                except KeyboardInterrupt:
                    self.stopped = True
                    break
                if the_run.error is not None or the_run.stopped:  # a 401, a broken store, Stop
                    break
        except BaseException as exc:
            self.error = exc
            # in the caller's thread (a bad option at a later rate): raised, as run() does
            if not live:
                raise
            # on the sweep's thread: kept in .error and shown in the view, never lost
        finally:
            if self.runs:  # nito_nb.last() is the last rate's Run
                remember(self.runs[-1])
            self.ended = True
            try:
                if self.view is not None:
                    self.view.finish()
            finally:
                self._finished.set_result(None)

    @property
    def rates(self) -> list[float]:
        """The rates that started (all of ``asked`` unless the sweep was stopped or failed)."""
        return [run.schedule.rate for run in list(self.runs) if run.schedule is not None]

    def results(self) -> pd.DataFrame:
        """Every request of every rate (``Run.results()`` with a ``rate`` column)."""
        import pandas as pd

        frames = [
            run.results().assign(rate=run.schedule.rate)
            for run in list(self.runs)
            if run.schedule is not None
        ]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def frame(self) -> pd.DataFrame:
        """Every chunk of every request of every rate, in one frame (``Run.frame()``'s columns,
        ``stream`` = the request key, and ``rate``: the rate asked); ``df.nito`` works on it. With
        a store it is read from the store."""
        runs = [run for run in list(self.runs) if run.schedule is not None]
        df = runs_frame(runs)
        rates = {
            key: run.schedule.rate
            for run in runs
            if run.schedule is not None
            for key in run.results()["key"]
        }
        df.insert(1, "rate", df["stream"].astype(object).map(rates).astype("float64"))
        return df

    def summary(self) -> pd.DataFrame:
        """One row per rate (per rate and model with several models): ``Run.summary()``'s columns,
        i.e. achieved rate, throughput, goodput, p50/p90/p99 of ttft, itl, tpot, e2e, errors."""
        import pandas as pd

        frames = [run.summary().reset_index() for run in list(self.runs)]
        frames = [f for f in frames if len(f)]
        if not frames:
            return pd.DataFrame()
        df = pd.concat(frames, ignore_index=True)
        if df["model"].nunique() > 1:
            return df.set_index(["rate", "model"])
        return df.set_index("rate")

    def plot(self, metrics: str | Sequence[str] = ("ttft", "itl", "e2e")) -> Figure:
        """p50 and p99 of each metric (one name or several) against the achieved rate (log
        scale when the values span a decade or more, all positive); every rate with errors is
        marked with a red x on the p99 line."""
        import matplotlib.pyplot as plt

        if isinstance(metrics, str):  # plot("ttft") was read letter by letter (a KeyError 't_p50')
            metrics = [metrics]
        metrics = list(metrics)
        df = self.summary().reset_index()
        if df.empty:
            raise ConfigurationError("nothing to plot yet: no rate of this sweep has ended")
        known = [
            c.removesuffix("_p50")
            for c in df.columns
            if c.endswith("_p50") and c.replace("_p50", "_p99") in df.columns
        ]
        unknown = [m for m in metrics if m not in known]
        if not metrics or unknown:
            raise ConfigurationError(
                f"plot takes metrics among {', '.join(known)}, not {', '.join(map(repr, unknown)) or 'none'}"
            )
        fig, axes = plt.subplots(1, len(metrics), figsize=(4.5 * len(metrics), 3.5), squeeze=False)
        for ax, metric in zip(axes[0], metrics, strict=True):
            for model, group in df.groupby("model", sort=True):
                group = group.sort_values("rate")
                x = group["achieved_rate"]
                ax.plot(x, group[f"{metric}_p50"], "o--", label=f"{model} p50")
                ax.plot(x, group[f"{metric}_p99"], "o-", label=f"{model} p99")
                bad = group["error_rate"] > 0
                if bad.any():
                    ax.plot(
                        x[bad],
                        group.loc[bad, f"{metric}_p99"],
                        "x",
                        color="red",
                        markersize=10,
                        label=f"{model} errors",
                    )
            ax.set_xlabel("achieved rate (requests/s)")
            ax.set_ylabel(f"{metric} (s)")
            _latency_axis(ax, df[[f"{metric}_p50", f"{metric}_p99"]].to_numpy(dtype=float))
            ax.set_title(metric)
            ax.grid(True, alpha=0.3)
        axes[0][0].legend(fontsize="small")
        fig.tight_layout()
        return fig

    def __repr__(self) -> str:
        state = "done" if self.done else ("stopping" if self.stopped else "running")
        return (
            f"<nito_nb.Sweep {state} rates={self.rates}: {len(self.runs)}/{len(self.asked)} runs>"
        )


def _latency_axis(ax: Any, values: Any) -> None:
    """A log scale where the latencies span a decade or more (as they do once a gateway
    saturates), else a linear one; plain numbers of seconds either way. A log scale over a
    narrower span labelled its ticks "4.075 × 10^-1", and a linear one "+4.02e-1" offsets."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plain = FuncFormatter(lambda value, _: f"{value:.4g}")
    finite = values[values == values]
    # log needs them all > 0
    if finite.size and (finite > 0).all() and finite.max() >= 10 * finite.min():
        ax.set_yscale("log")
        # 0.02, 0.05, 0.1...: labels in every decade
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(plain)


def sweep(
    prompts: Any,
    *,
    model: str | Sequence[str],
    rates: Sequence[float],
    duration: float | None = None,
    run_id: str | None = None,
    **options: Any,
) -> Sweep:
    """Run ``nito_nb.run(prompts, model=..., rate=r, duration=...)`` for each rate in turn. Takes
    every option of a load run (``schedule``, ``warmup``, ``slo``, ``store``...).

    In a kernel it returns at once: the rates run in the background, shown live (each rate's
    step, the current rate's panel, a Stop button, then the summary); ``sweep.wait()`` waits.
    Elsewhere it returns when the last rate ended. An interrupt, or ``stop()``, stops the
    current rate (what arrived is kept) and ends the sweep with the rates done so far."""
    if isinstance(rates, str | bytes) or not isinstance(rates, Iterable):
        raise ConfigurationError(
            f"sweep takes rates=[...], requests per second, like rates=[1, 5, 10], not {rates!r}"
        )
    rates = list(rates)
    if not rates:
        raise ConfigurationError("sweep needs rates=[...], e.g. rates=[1, 5, 10]")
    if "rate" in options:
        raise ConfigurationError("sweep takes rates=[...], not rate=")
    # all now: a bad one found at its turn ended the sweep and lost the rates before it
    for rate in rates:
        check_rate(rate)
    from .._display.notebook import in_kernel

    live = in_kernel() and options.get("progress") is not False
    if live:  # the sweep's view shows each rate's progress; a panel per rate would repeat it
        options = {**options, "progress": False}

    def make(rate: float) -> Run:
        return run(
            prompts,
            model=model,
            rate=rate,
            duration=duration,
            run_id=None if run_id is None else f"{run_id}-rate{rate:g}",
            **options,
        )

    result = Sweep(rates)
    if not live:
        result._run_rates(make, None, live=False)
        return result
    from .sweep_view import SweepView

    first = result._next(make, rates[0])  # in this thread: a bad option is one clear error, now
    result.view = SweepView(result)
    result.view.display()
    threading.Thread(
        target=result._run_rates, args=(make, first, True), name="nito_nb-sweep", daemon=True
    ).start()
    return result
