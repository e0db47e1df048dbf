"""A sweep: the same load run at several rates, one after the other, and its summary and plot.

    sweep = nito_nb.sweep(prompts, model="sim/chat", rates=[1, 5, 10, 20], duration=30, store="runs/sweep")
    sweep.summary()   # one row per rate (per rate and model with several models)
    sweep.plot()      # latency percentiles against the achieved rate, errors marked

Each rate is one :class:`~nito_nb.runs.Run` (its own ``run_id``, sharing the store); the rates
run in the order given, each after the previous one ended, so that they do not load each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._core.errors import ConfigurationError
from ._api import remember, run
from ._runner import Run

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["Sweep"]


class Sweep:
    """The runs of a sweep, one per rate, in order."""

    def __init__(self, runs: list[Run]) -> None:
        self.runs = runs

    @property
    def rates(self) -> list[float]:
        return [run.schedule.rate for run in self.runs if run.schedule is not None]

    def results(self) -> pd.DataFrame:
        """Every request of every rate (``Run.results()`` with a ``rate`` column)."""
        import pandas as pd

        frames = [run.results().assign(rate=rate) for run, rate in zip(self.runs, self.rates, strict=True)]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def summary(self) -> pd.DataFrame:
        """One row per rate (per rate and model with several models): ``Run.summary()``'s columns,
        i.e. achieved rate, throughput, goodput, p50/p90/p99 of ttft, itl, tpot, e2e, errors."""
        import pandas as pd

        frames = [run.summary().reset_index() for run in self.runs]
        frames = [f for f in frames if len(f)]
        if not frames:
            return pd.DataFrame()
        df = pd.concat(frames, ignore_index=True)
        if df["model"].nunique() > 1:
            return df.set_index(["rate", "model"])
        return df.set_index("rate")

    def plot(self, metrics: Sequence[str] = ("ttft", "itl", "e2e")) -> Figure:
        """p50 and p99 of each metric against the achieved rate (log scale when every value is
        positive); the rates where
        errors start are marked with a red x on the p99 line."""
        import matplotlib.pyplot as plt

        df = self.summary().reset_index()
        fig, axes = plt.subplots(1, len(metrics), figsize=(4.5 * len(metrics), 3.5), squeeze=False)
        for ax, metric in zip(axes[0], metrics, strict=True):
            for model, group in df.groupby("model", sort=True):
                group = group.sort_values("rate")
                x = group["achieved_rate"]
                ax.plot(x, group[f"{metric}_p50"], "o--", label=f"{model} p50")
                ax.plot(x, group[f"{metric}_p99"], "o-", label=f"{model} p99")
                bad = group["error_rate"] > 0
                if bad.any():
                    ax.plot(x[bad], group.loc[bad, f"{metric}_p99"], "x", color="red", markersize=10,
                            label=f"{model} errors")
            ax.set_xlabel("achieved rate (requests/s)")
            ax.set_ylabel(f"{metric} (s)")
            values = df[[f"{metric}_p50", f"{metric}_p99"]].to_numpy(dtype=float)
            if (values > 0).all():  # latencies span decades under load; log needs them all > 0
                ax.set_yscale("log")
            ax.set_title(metric)
            ax.grid(True, alpha=0.3)
        axes[0][0].legend(fontsize="small")
        fig.tight_layout()
        return fig

    def __repr__(self) -> str:
        return f"<nito_nb.Sweep rates={self.rates}: {len(self.runs)} runs>"


def sweep(prompts: Any, *, model: str | Sequence[str], rates: Sequence[float], duration: float | None = None,
          run_id: str | None = None, **options: Any) -> Sweep:
    """Run ``nito_nb.run(prompts, model=..., rate=r, duration=...)`` for each rate in turn and
    wait for each (in a kernel each run's panel is shown). Takes every option of a load run
    (``schedule``, ``warmup``, ``slo``, ``store``...). An interrupt stops the current run and
    ends the sweep with the rates done so far."""
    rates = list(rates)
    if not rates:
        raise ConfigurationError("sweep needs rates=[...], e.g. rates=[1, 5, 10]")
    if "rate" in options:
        raise ConfigurationError("sweep takes rates=[...], not rate=")
    from ..display.live import in_kernel

    runs: list[Run] = []
    result = Sweep(runs)
    for rate in rates:
        the_run = run(prompts, model=model, rate=rate, duration=duration,
                      run_id=None if run_id is None else f"{run_id}-rate{rate:g}", **options)
        runs.append(the_run)
        if in_kernel() and options.get("progress") is not False:
            the_run._ipython_display_()
        try:
            the_run.wait()
        except KeyboardInterrupt:
            break
        if the_run.error is not None:  # a 401, a broken store: no point in going on
            break
    if runs:  # nito_nb.last() is the last rate's Run
        remember(runs[-1])
    return result
