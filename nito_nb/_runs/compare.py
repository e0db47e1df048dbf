"""``run.compare()``: the models of a scored run side by side (docs/SCORES.md).

Per model: each score's mean with its 95% interval (a boolean score's share: Wilson's interval,
which stays inside [0, 1] and means something for a few requests; a number's mean: 1.96 standard
errors either side, nothing for one request), the p50 and p90 of ttft and e2e, the cost per
request (and a judge's apart). Higher is better for a score, lower for a time or a cost: the
best value of each column is marked. Model names, score names and values come from users and
models: the HTML escapes every one of them, and the plot shows them as plain text.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

from .._core import metrics
from .._core.errors import ConfigurationError
from .results import SCORE_PREFIX

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Comparison", "compare", "interval"]

#: z of a two-sided 95% interval.
Z95 = 1.959963984540054
#: The latency columns, lower is better.
LATENCY = (("ttft", 50), ("ttft", 90), ("e2e", 50), ("e2e", 90))
#: What ``plot(x=...)`` takes, and the column it reads.
X_AXES = {"cost": "cost_per_request", "e2e": "e2e_p50", "ttft": "ttft_p50"}


def interval(values: list[float], share: bool) -> tuple[float, float, float]:
    """(mean, low, high) of ``values``: Wilson's 95% interval for a share of 0/1 values, else
    the mean ± 1.96 standard errors (NaN bounds for fewer than two values)."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = sum(values) / n
    if share:
        z2 = Z95 * Z95
        centre = (mean + z2 / (2 * n)) / (1 + z2 / n)
        half = Z95 * math.sqrt(mean * (1 - mean) / n + z2 / (4 * n * n)) / (1 + z2 / n)
        # rounded: a share of 0 or 1 has a bound of 0 or 1, not 5.6e-17
        return mean, max(0.0, round(centre - half, 12)), min(1.0, round(centre + half, 12))
    if n < 2:
        return mean, math.nan, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = Z95 * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def compare(
    results: pd.DataFrame, names: list[str], score_cost: pd.Series | None = None
) -> Comparison:
    """The comparison of ``results`` (a run's), its scores ``names`` first (then any other
    ``score.<name>`` column of numbers or booleans); ``score_cost``: a judge's cost per model."""
    import pandas as pd

    columns = [SCORE_PREFIX + n for n in names]
    columns += [c for c in results.columns if c.startswith(SCORE_PREFIX) and c not in columns]
    columns = [c for c in columns if c in results.columns]
    texts = [c[len(SCORE_PREFIX) :] for c in columns if str(results[c].dtype) == "string"]
    rows = []
    better: dict[str, str] = {}
    for model, group in results.groupby("model", sort=True, observed=True):
        row: dict[str, Any] = {"model": model, "n": len(group)}
        for column in columns:
            name = column[len(SCORE_PREFIX) :]
            if name in texts:  # a text score has no mean: its most frequent value, and its share
                counts = group[column].dropna().astype(object).value_counts()
                row[name] = counts.index[0] if len(counts) else None
                row[f"{name}_share"] = (
                    float(counts.iloc[0]) / len(group) if len(counts) else math.nan
                )
                continue
            values = [float(v) for v in group[column].astype("Float64").dropna()]
            mean, low, high = interval(values, share=str(group[column].dtype) == "boolean")
            row[name], row[f"{name}_low"], row[f"{name}_high"] = mean, low, high
            better[name] = "max"
        for metric, q in LATENCY:
            value = metrics.quantile(group[metric].astype("float64").tolist(), q / 100)
            row[f"{metric}_p{q}"] = math.nan if value is None else value
            better[f"{metric}_p{q}"] = "min"
        costs = group["cost"].astype("float64").dropna()
        row["cost_per_request"] = float(costs.mean()) if len(costs) else math.nan
        better["cost_per_request"] = "min"
        if score_cost is not None:
            total = score_cost.get(model, math.nan)
            row["score_cost_per_request"] = float(total) / len(group) if len(group) else math.nan
            better["score_cost_per_request"] = "min"
        rows.append(row)
    frame = pd.DataFrame(rows)
    if len(frame):
        frame = frame.set_index("model")
    scores = [c[len(SCORE_PREFIX) :] for c in columns]
    return Comparison(frame, scores, better, texts)


def _shown(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


class Comparison:
    """``run.compare()``'s answer: ``frame`` (one row per model), its table in a notebook (HTML:
    the best value of each column in bold, marked ★) or as text (marked *), and ``plot``."""

    def __init__(
        self, frame: pd.DataFrame, scores: list[str], better: dict[str, str], texts: list[str]
    ) -> None:
        #: One row per model: each score's mean and ``<score>_low``/``<score>_high`` (its 95%
        #: interval; a text score: its most frequent value and ``<score>_share``), ``ttft_p50``...
        #: ``cost_per_request``.
        self.frame = frame
        self.scores = [s for s in scores if s not in texts]
        self.texts = texts
        self._better = better

    def _columns(self) -> list[str]:
        """The shown columns: ``n``, each score (with its interval), the latencies, the costs."""
        first = [c for c in self._better if c in self.scores]
        rest = [c for c in self._better if c not in self.scores]
        return ["n", *first, *self.texts, *(c for c in rest if c in self.frame.columns)]

    def _best(self, column: str) -> float | None:
        how = self._better.get(column)
        if how is None or column not in self.frame:
            return None
        values = self.frame[column].astype("float64").dropna()
        if len(values) < 2 or values.nunique() < 2:
            return None  # one model, or all equal: nothing stands out
        return float(values.max() if how == "max" else values.min())

    def _cell(self, model: Any, column: str) -> str:
        value = self.frame.at[model, column]
        text = _shown(value)
        if column in self.texts:
            share = self.frame.at[model, f"{column}_share"]
            return "–" if value is None else f"{value} ({share:.0%})"
        if column in self.scores:
            low, high = (
                self.frame.at[model, f"{column}_low"],
                self.frame.at[model, f"{column}_high"],
            )
            if not (math.isnan(low) or math.isnan(high)):
                text += f" [{_shown(low)}, {_shown(high)}]"
        return text

    def rows(self) -> list[tuple[str, list[tuple[str, bool]]]]:
        """Each model's shown cells, with whether each is its column's best."""
        columns = self._columns()
        best = {c: self._best(c) for c in columns}
        out = []
        for model in self.frame.index:
            cells = []
            for column in columns:
                mark = (
                    best[column] is not None and float(self.frame.at[model, column]) == best[column]
                )
                cells.append((self._cell(model, column), mark))
            out.append((str(model), cells))
        return out

    def _header(self, column: str) -> str:
        if column in self.texts:
            return f"{column} (most frequent)"
        return f"{column} (95% interval)" if column in self.scores else column

    def _repr_html_(self) -> str:
        e = html.escape
        head = "".join(f"<th>{e(self._header(c))}</th>" for c in self._columns())
        body = []
        for model, cells in self.rows():
            tds = "".join(
                f'<td class="nito-best"><strong>{e(text)} ★</strong></td>'
                if best
                else f"<td>{e(text)}</td>"
                for text, best in cells
            )
            body.append(f"<tr><th>{e(model)}</th>{tds}</tr>")
        note = (
            "higher is better for a score, lower for a time or a cost; ★ the best of each column; "
            "a score's interval: Wilson's for a share, ±1.96 standard errors for a mean"
        )
        return (
            '<div class="nito-compare"><table><thead><tr><th>model</th>'
            f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
            f"<small>{e(note)}</small></div>"
        )

    def __repr__(self) -> str:
        columns = ["model", *(self._header(c) for c in self._columns())]
        lines = [[str(c) for c in columns]]
        for model, cells in self.rows():
            lines.append([model, *(text + (" *" if best else "") for text, best in cells)])
        widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
        text = "\n".join(
            "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)) for line in lines
        )
        return (
            text + "\n(* the best of each column: a score's highest, a time's or a cost's lowest)"
        )

    def plot(self, x: str = "cost", y: str | None = None, ax: Any = None) -> Any:
        """Each model as a point: ``y`` (a score's mean, with its 95% interval as error bars)
        against ``x``: ``"cost"`` (per request), ``"e2e"`` or ``"ttft"`` (their p50). Returns the
        matplotlib Axes."""
        if x not in X_AXES:
            raise ConfigurationError(f"plot(x=...) is one of {', '.join(X_AXES)}, not {x!r}")
        if y is None and self.scores:
            y = self.scores[0]
        if isinstance(y, str) and y.startswith(SCORE_PREFIX):
            y = y[len(SCORE_PREFIX) :]
        if y not in self.scores:
            have = ", ".join(repr(s) for s in self.scores) or "none (a run with score=...)"
            raise ConfigurationError(f"plot(y=...) is a score of the run: {have}; not {y!r}")
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        frame = self.frame
        xs = frame[X_AXES[x]].astype("float64")
        ys = frame[y].astype("float64")
        low = (ys - frame[f"{y}_low"].astype("float64")).clip(lower=0).fillna(0)
        high = (frame[f"{y}_high"].astype("float64") - ys).clip(lower=0).fillna(0)
        ax.errorbar(xs, ys, yerr=[low, high], fmt="o", capsize=4)
        for model, px, py in zip(frame.index, xs, ys, strict=True):
            # a model's name is text, never mathtext: "$...$" in a name stays as it is
            ax.annotate(
                str(model), (px, py), textcoords="offset points", xytext=(5, 5), parse_math=False
            )
        xlabel = {"cost": "cost per request", "e2e": "e2e p50 (s)", "ttft": "ttft p50 (s)"}[x]
        ax.set_xlabel(xlabel)
        ax.set_ylabel(y)
        ax.yaxis.label.set_parse_math(False)
        return ax
