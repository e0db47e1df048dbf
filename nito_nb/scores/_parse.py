"""The magic's form of a built-in score, ``NAME=KIND[:ARG...]``: parsed, never evaluated.

    exact=equals:truth            the answer equals the input column truth
    label=equals:out.label:truth  the field out.label equals the input column truth
    paris=contains:Paris          the answer contains Paris (the rest of the text, as it is)
    src=regex:https?://           the pattern is the rest of the text, colons included
    fast=under:ttft:1.0           ttft at most 1.0 s
    cheap=cost_under:0.01         cost at most 0.01
    ok=json_valid                 the answer is one JSON document

docs/MAGIC.md and docs/SCORES.md list the same forms. A form that does not parse is one line
that says which forms there are.
"""

from __future__ import annotations

from typing import Any

from .._core.errors import ConfigurationError
from ._builtin import Score, contains, cost_under, equals, json_valid, regex, under

__all__ = ["FORMS", "parse_score"]

#: Each kind and its form, as the error line lists them.
FORMS = {
    "equals": "equals:COLUMN or equals:FIELD:COLUMN",
    "contains": "contains:TEXT",
    "regex": "regex:PATTERN",
    "under": "under:METRIC:LIMIT",
    "cost_under": "cost_under:LIMIT",
    "json_valid": "json_valid",
}


def _bad(expr: str, why: str) -> ConfigurationError:
    forms = ", ".join(FORMS.values())
    return ConfigurationError(
        f"--score {expr!r}: {why}; write NAME=KIND[:ARG...], KIND one of {forms}"
    )


def _limit(expr: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise _bad(expr, f"{text!r} is not a number") from None


def parse_score(expr: str) -> tuple[str, Score]:
    """``(name, score)`` of ``NAME=KIND[:ARG...]``."""
    name, eq, spec = expr.partition("=")
    name = name.strip()
    if not eq or not name:
        raise _bad(expr, "no NAME= before the score")
    if not name.replace("_", "a").replace("-", "a").isalnum():
        raise _bad(expr, f"the name {name!r} takes letters, digits, _ and -")
    kind, _, rest = spec.partition(":")
    kind = kind.strip()
    score: Any
    try:
        if kind == "json_valid" and not rest:
            score = json_valid()
        elif kind == "equals" and rest:
            field, sep, column = rest.rpartition(":")
            score = equals(field if sep else "content", column=column)
        elif kind == "contains" and rest:
            score = contains(rest)
        elif kind == "regex" and rest:
            score = regex(rest)
        elif kind == "under" and rest.count(":") == 1:
            metric, limit = rest.split(":")
            score = under(metric, _limit(expr, limit))
        elif kind == "cost_under" and rest:
            score = cost_under(_limit(expr, rest))
        elif kind in FORMS:
            raise _bad(expr, f"{kind} is written {FORMS[kind]}")
        else:
            raise _bad(expr, f"no built-in score {kind!r}")
    except ConfigurationError as exc:
        if str(exc).startswith("--score"):
            raise
        raise _bad(expr, str(exc)) from None
    return name, score
