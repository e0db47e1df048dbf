"""The frame's two plots (``df.nito.plot_timeline()``, ``df.nito.plot_gaps()``): matplotlib
figures built without pyplot, so they work headless and show in a notebook as the cell's value."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._core.errors import ConfigurationError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .accessor import NitoAccessor

__all__ = ["plot_confidence", "plot_gaps", "plot_timeline"]

#: The most bins plot_gaps cuts: numpy allocates every bin, and 10**9 of them hung the kernel.
MAX_BINS = 10_000


def plot_timeline(nito: NitoAccessor, *, max_legend: int = 16) -> Figure:
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    max_legend = _whole(
        max_legend, "max_legend", 0, None, "the most streams named in the legend, like 16"
    )
    df = nito._df
    codes, labels = nito._streams()
    fig = Figure(figsize=(9, 4.5), layout="constrained")
    ax = fig.add_subplot()
    t = df["t"].to_numpy(dtype=np.float64, na_value=np.nan)
    kind = df["kind"].astype(object).to_numpy()
    part = df["part"].to_numpy()
    token = df["token"].to_numpy(dtype=bool)
    ignored = df["ignored"].to_numpy(dtype=bool)
    content = df["content"].str.len().to_numpy(dtype=np.float64, na_value=0)
    reasoning = df["reasoning"].str.len().to_numpy(dtype=np.float64, na_value=0)
    tool_args = df["tool_args"].str.len().to_numpy(dtype=np.float64, na_value=0)
    error = df["error_message"].notna().to_numpy() & (kind == "chunk")
    # Characters of answer text per event (its parts summed), counted on the event's first row.
    chars = np.where(ignored, 0.0, content + reasoning + tool_args)
    colors = [c["color"] for c in _color_cycle()]
    # The legend: one entry per stream (its colour), one per kind of event (its marker).
    streams: list[Line2D] = []
    markers: dict[str, Line2D] = {}
    for code, label in enumerate(labels):
        every = np.flatnonzero(codes == code)
        if not len(every):
            continue
        # One point per event: its parts' characters summed, shown at the event's time.
        starts = np.flatnonzero(part[every] == 0)
        cumulative = np.cumsum(np.add.reduceat(chars[every], starts))
        has_tool_text = np.logical_or.reduceat(tool_args[every] > 0, starts)
        rows = every[starts]
        color = colors[code % len(colors)]
        tok = token[rows]
        ax.plot(t[rows][tok], cumulative[tok], "-", color=color, alpha=0.5, label=f"{label}")
        streams.append(Line2D([], [], color=color, label=str(label)))
        is_content = tok & (content[rows] > 0)
        is_tool = tok & ~is_content & has_tool_text
        is_reasoning = tok & ~is_content & ~is_tool
        series = (
            ("content", is_content, "o"),
            ("reasoning", is_reasoning, "."),
            ("tool", is_tool, "s"),
            ("comment", kind[rows] == "comment", "x"),
            ("done", kind[rows] == "done", "|"),
            ("error", error[rows], "X"),
            ("response", (kind[rows] == "response") & ~np.isnan(t[rows]), "^"),
        )
        for what, select, marker in series:
            if select.any():
                ax.plot(
                    t[rows][select],
                    cumulative[select],
                    marker,
                    color=color,
                    linestyle="none",
                    label=f"{label} {what}",
                )
                markers.setdefault(
                    what, Line2D([], [], marker=marker, linestyle="none", color="0.35", label=what)
                )
    ax.set_xlabel("seconds since the request was sent")
    ax.set_ylabel("characters received")
    ax.set_title("Timeline: when each delta arrived")
    if not np.isfinite(t).any():
        _say_untimed(ax)
    # Streams by colour, kinds by marker: a stream adds one entry, not one per kind, and past
    # max_legend streams their names would hide the plot.
    handles = (streams if len(streams) <= max_legend else []) + list(markers.values())
    if handles:
        ax.legend(handles=handles, fontsize="small", loc="upper left")
    return _shown_inline(fig)


def plot_gaps(nito: NitoAccessor, *, bins: int = 40) -> Figure:
    from matplotlib.figure import Figure

    bins = _whole(bins, "bins", 1, MAX_BINS, "the number of bars, like 40")
    a = nito._arrays()
    _, labels = nito._streams()
    code, t, token = a["code"], a["t"], a["token"] & (a["code"] >= 0)
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    series = []
    for number, label in enumerate(labels):
        times = t[token & (code == number)]
        # A recording read without times has none (NaN); an infinite time (a hand-edited frame)
        # has no gap to show and would make numpy's bin range infinite: both are left out.
        times = np.sort(times[np.isfinite(times)])
        # Rounded to the nanosecond the times were taken in: equal gaps that differ by float
        # noise (1e-14 ms) would make a range too narrow for numpy to cut into bins.
        series.append((label, np.round(np.diff(times) * 1000, 6)))
    everything = np.concatenate([g for _, g in series]) if series else np.zeros(0)
    edges: Any = np.histogram_bin_edges(everything, bins=bins) if len(everything) else bins
    for label, gaps in series:
        if len(gaps):
            # The label goes on the BarContainer only: hist(label=...) also puts it on the
            # first bar, and the legend then lists every stream twice.
            _, _, bars = ax.hist(gaps, bins=edges, alpha=0.6 if len(series) > 1 else 1.0)
            bars.set_label(str(label))  # type: ignore[union-attr]
    ax.set_xlabel("gap between token-bearing events (ms)")
    ax.set_ylabel("gaps")
    ax.set_title("Inter-token gaps")
    if not np.isfinite(t).any():
        _say_untimed(ax)
    if 1 < len(series) <= 12:
        ax.legend(fontsize="small")
    return _shown_inline(fig)


def plot_confidence(nito: NitoAccessor, *, low: float = 0.5) -> Figure:
    """Each answer token's probability by its position, one line per stream; the tokens under
    ``low`` marked, and the runs of them (a low-confidence span) shaded."""
    from matplotlib.figure import Figure

    if isinstance(low, bool) or not isinstance(low, int | float) or not 0 <= low <= 1:
        raise ConfigurationError(f"low is a probability from 0 to 1, like 0.5, not {low!r}")
    tokens = nito.tokens()
    tokens = tokens[tokens["channel"] == "content"]
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    ax = fig.add_subplot()
    colors = [c["color"] for c in _color_cycle()]
    for code, (label, group) in enumerate(tokens.groupby("stream", observed=True, sort=True)):
        position = group["position"].to_numpy()
        p = group["probability"].to_numpy(dtype=np.float64, na_value=np.nan)
        color = colors[code % len(colors)]
        ax.plot(position, p, "-", color=color, linewidth=1, label=str(label))
        unsure = p < low
        ax.plot(position[unsure], p[unsure], "x", color="tab:red", markersize=5)
        for start, end in _runs(position[unsure]):
            ax.axvspan(start - 0.5, end + 0.5, color="tab:red", alpha=0.12, linewidth=0)
    ax.axhline(low, color="grey", linestyle=":", linewidth=1)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("token position in the answer")
    ax.set_ylabel("probability")
    ax.set_title(f"token confidence (x: below {low:g})")
    if len(tokens):
        ax.legend(loc="lower right", fontsize="small")
    else:
        ax.text(
            0.5,
            0.5,
            "no logprobs: ask with logprobs=True",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
    return fig


def _runs(positions: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive positions as (first, last) runs."""
    runs: list[tuple[int, int]] = []
    for position in positions.tolist():
        if runs and position == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], position)
        else:
            runs.append((position, position))
    return runs


def _whole(value: Any, name: str, low: int, high: int | None, meaning: str) -> int:
    """``value`` as an int in [low, high], else one line (numpy's errors, or a hang, before)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | np.integer)
        or value < low
        or (high is not None and value > high)
    ):
        span = f"from {low} to {high:,}" if high is not None else f"{low} or more"
        raise ConfigurationError(f"{name} is a whole number, {span} ({meaning}), not {value!r}")
    return int(value)


def _say_untimed(ax: Any) -> None:
    """An empty plot says why: the frame holds recordings read without arrival times."""
    ax.text(
        0.5,
        0.5,
        "no arrival times: these streams were read from recorded\n"
        "SSE bodies (read_sse), which carry none",
        transform=ax.transAxes,
        ha="center",
        va="center",
        color="0.4",
    )


def _shown_inline(fig: Figure) -> Figure:
    """Let IPython show the Figure as a cell's value.

    A Figure made without pyplot (so that plotting leaves no global state) has no display
    formatter until ``%matplotlib inline`` has run: register IPython's PNG formatter for Figure,
    as the inline backend does, when an IPython shell is running.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return fig
    shell = get_ipython()
    if shell is not None:
        from IPython.core.pylabtools import print_figure
        from matplotlib.figure import Figure

        formatter = shell.display_formatter.formatters["image/png"]
        formatter.for_type(Figure, lambda figure: print_figure(figure, "png", bbox_inches="tight"))
    return fig


def _color_cycle() -> Any:
    from matplotlib import rcParams

    return rcParams["axes.prop_cycle"]
