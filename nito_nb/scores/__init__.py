"""Scores: what grades each answer of a run (docs/SCORES.md).

    run = nito_nb.run(df, template="Capital of {country}?", model=["sim/chat", "sim/fast"],
                      score={"exact": nito_nb.scores.equals("content", column="capital"),
                             "fast": nito_nb.scores.under("ttft", 1.0)})
    run.results()["score.exact"]; run.summary(); run.compare()

A score is any callable ``(row, stream) -> bool | float | str`` (None: NA); the built-ins here
are small objects whose ``describe()`` says what they check (the store keeps it beside each
value). A score that grades every row at once has a ``score_rows`` method instead
(``nito_nb._runs.score_context``): :func:`judge`, a model that grades each answer. The run
only calls scores: it never imports this package (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from ._builtin import (
    Score,
    contains,
    cost_under,
    equals,
    json_valid,
    regex,
    schema_valid,
    under,
)
from ._parse import parse_score
from .judge import judge

__all__ = [
    "Score",
    "contains",
    "cost_under",
    "equals",
    "json_valid",
    "judge",
    "parse_score",
    "regex",
    "schema_valid",
    "under",
]
