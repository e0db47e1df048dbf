"""The built-in scores: small objects called with ``(row, stream)``, each saying what it checks.

A score is any callable ``(row, stream) -> bool | float | str`` (None: NA); these are the common
ones, written so that a run's store and the magic can say what they are: ``describe()`` is the
call that makes the score again (``equals('content', column='truth')``), the text the store
keeps beside each value and ``repr`` shows.

``row`` is a mapping of the request's results row (``content``, ``ttft``, ``cost``...; a run with
``schema=`` adds ``parsed``, ``valid`` and ``out.<field>``) and of the input row's columns, each
under ``input.<column>`` and, when no results column has that name, under its own name too
(docs/SCORES.md). A score asks for a field by the user's name for it: ``content``, a results
column, ``out.<field>``, or a schema field's bare name.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from .._core.errors import ConfigurationError

__all__ = [
    "INPUT_PREFIX",
    "Score",
    "contains",
    "cost_under",
    "equals",
    "field_of",
    "input_of",
    "json_valid",
    "regex",
    "schema_valid",
    "under",
]

#: An input column ``c`` is always in a row as ``input.c`` (a results column may share its name).
INPUT_PREFIX = "input."
#: A run with ``schema=`` puts each declared field in ``out.<field>``: a score may name it bare.
_OUT = "out."


def _missing(value: Any) -> bool:
    """None, NaN and pandas' NA (which is neither, and whose truth value raises)."""
    if value is None:
        return True
    if type(value).__name__ in ("NAType", "NaTType"):
        return True
    return isinstance(value, float) and math.isnan(value)


def field_of(row: Mapping[str, Any], field: str) -> Any:
    """The row's ``field``: a results column, ``out.<field>`` by its bare name, or an input column."""
    if field in row:
        return row[field]
    if _OUT + field in row:
        return row[_OUT + field]
    if INPUT_PREFIX + field in row:
        return row[INPUT_PREFIX + field]
    raise KeyError(
        f"the row has no field {field!r} (a results column such as 'content' or 'ttft', "
        "'out.<field>' of a schema= run, or an input column)"
    )


def input_of(row: Mapping[str, Any], column: str) -> Any:
    """The input row's ``column`` (a DataFrame's column; ``value`` for a list or a Series)."""
    if INPUT_PREFIX + column in row:
        return row[INPUT_PREFIX + column]
    raise KeyError(
        f"the input row has no column {column!r}"
        + (
            f" (it has {', '.join(k[len(INPUT_PREFIX) :] for k in row if k.startswith(INPUT_PREFIX))})"
            if any(k.startswith(INPUT_PREFIX) for k in row)
            else ""
        )
    )


def _text(value: Any) -> str | None:
    """The text of an answer field (None: the field is missing, as a failed request's)."""
    if _missing(value):
        return None
    return value if isinstance(value, str) else str(value)


def _check_field(field: Any, what: str) -> str:
    if not isinstance(field, str) or not field:
        raise ConfigurationError(
            f"{what}: field is a column name like 'content' or 'out.label', not {field!r}"
        )
    return field


def _number(limit: Any, what: str) -> float:
    if isinstance(limit, bool) or not isinstance(limit, int | float) or not limit >= 0:
        raise ConfigurationError(f"{what}: the limit is a number >= 0, not {limit!r}")
    return float(limit)


class Score:
    """A built-in score. ``describe()`` is the call that makes it again."""

    def __call__(self, row: Mapping[str, Any], stream: Any) -> bool | float | str | None:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"nito_nb.scores.{self.describe()}"


def _args(*positional: Any, **keywords: Any) -> str:
    shown = [repr(p) for p in positional]
    shown += [f"{name}={value!r}" for name, value in keywords.items()]
    return ", ".join(shown)


class _Equals(Score):
    def __init__(
        self, field: str, column: str | None, value: Any, has_value: bool, strip: bool, case: bool
    ) -> None:
        self.field, self.column, self.value = field, column, value
        self.has_value, self.strip, self.case = has_value, strip, case

    def _norm(self, text: str) -> str:
        if self.strip:
            text = text.strip()
        return text if self.case else text.casefold()

    def __call__(self, row: Mapping[str, Any], stream: Any) -> bool | None:
        expected = input_of(row, self.column) if self.column is not None else self.value
        if _missing(expected):
            return None  # nothing to compare with: NA, not a miss
        answer = field_of(row, self.field)
        if _missing(answer):
            return False  # no answer (a failed request, an invalid object) is not the truth
        if isinstance(answer, str) or isinstance(expected, str):
            # as text when either side is: "3" answers the truth 3 of a number column
            return self._norm(str(answer)) == self._norm(str(expected))
        return bool(answer == expected)

    def describe(self) -> str:
        extra: dict[str, Any] = {}
        if self.column is not None:
            extra["column"] = self.column
        else:
            extra["value"] = self.value
        if not self.strip:
            extra["strip"] = False
        if not self.case:
            extra["case"] = False
        return f"equals({_args(self.field, **extra)})"


def equals(
    field: str = "content",
    column: str | None = None,
    value: Any = None,
    *,
    strip: bool = True,
    case: bool = True,
) -> Score:
    """True when the answer's ``field`` equals the input row's ``column``, or ``value``.

    Text is compared exactly after stripping leading and trailing whitespace (``strip=False``:
    as it is; ``case=False``: case-insensitive, by ``str.casefold``); when either side is text,
    both are (``"3"`` equals the number ``3``). NA when the expected value is missing; False
    when the answer is (a failed request, an answer that did not validate)."""
    field = _check_field(field, "equals")
    if (column is None) == (value is None):
        raise ConfigurationError(
            "equals needs column='truth' (an input column) or value=... (one value for every row), one of them"
        )
    if column is not None and (not isinstance(column, str) or not column):
        raise ConfigurationError(f"equals: column is an input column's name, not {column!r}")
    return _Equals(field, column, value, value is not None, bool(strip), bool(case))


class _Contains(Score):
    def __init__(self, text: Any, column: str | None, field: str, case: bool) -> None:
        self.text, self.column, self.field, self.case = text, column, field, case

    def __call__(self, row: Mapping[str, Any], stream: Any) -> bool | None:
        needle = _text(input_of(row, self.column) if self.column is not None else self.text)
        if needle is None:
            return None
        answer = _text(field_of(row, self.field))
        if answer is None:
            return False
        if not self.case:
            needle, answer = needle.casefold(), answer.casefold()
        return needle in answer

    def describe(self) -> str:
        extra: dict[str, Any] = {}
        if self.column is not None:
            extra["column"] = self.column
        if self.field != "content":
            extra["field"] = self.field
        if not self.case:
            extra["case"] = False
        return f"contains({_args(*([] if self.column is not None else [self.text]), **extra)})"


def contains(
    text: str | None = None, *, column: str | None = None, field: str = "content", case: bool = True
) -> Score:
    """True when the answer's ``field`` contains ``text`` (or the input row's ``column``);
    ``case=False``: case-insensitive."""
    field = _check_field(field, "contains")
    if (text is None) == (column is None):
        raise ConfigurationError(
            "contains needs the text to look for, contains('Paris'), or column='truth', one of them"
        )
    if text is not None and not isinstance(text, str):
        raise ConfigurationError(f"contains looks for text, like contains('Paris'), not {text!r}")
    return _Contains(text, column, field, bool(case))


class _Regex(Score):
    def __init__(self, pattern: re.Pattern[str], field: str) -> None:
        self.pattern, self.field = pattern, field

    def __call__(self, row: Mapping[str, Any], stream: Any) -> bool:
        answer = _text(field_of(row, self.field))
        return answer is not None and self.pattern.search(answer) is not None

    def describe(self) -> str:
        extra: dict[str, Any] = {} if self.field == "content" else {"field": self.field}
        if self.pattern.flags & ~re.UNICODE:
            extra["flags"] = self.pattern.flags & ~re.UNICODE
        return f"regex({_args(self.pattern.pattern, **extra)})"


def regex(pattern: str, field: str = "content", flags: int = 0) -> Score:
    """True when ``pattern`` (Python's ``re``) matches somewhere in the answer's ``field``
    (``re.search``: anchor it with ``^...$`` for the whole answer)."""
    field = _check_field(field, "regex")
    if not isinstance(pattern, str):
        raise ConfigurationError(
            f"regex takes a pattern string, like r'https?://', not {pattern!r}"
        )
    try:
        compiled = re.compile(pattern, flags)
    except re.error as exc:
        raise ConfigurationError(f"regex: {pattern!r} is not a regular expression: {exc}") from None
    return _Regex(compiled, field)


class _JsonValid(Score):
    def __init__(self, field: str) -> None:
        self.field = field

    def __call__(self, row: Mapping[str, Any], stream: Any) -> bool:
        answer = _text(field_of(row, self.field))
        if answer is None or not answer.strip():
            return False
        try:
            json.loads(answer)
        except ValueError:
            return False
        return True

    def describe(self) -> str:
        return f"json_valid({_args() if self.field == 'content' else _args(self.field)})"


def json_valid(field: str = "content") -> Score:
    """True when the answer's ``field`` is one JSON document (whitespace around it allowed)."""
    return _JsonValid(_check_field(field, "json_valid"))


class _SchemaValid(Score):
    def __init__(self, schema: Any, field: str) -> None:
        self.schema, self.field = schema, field

    def __call__(self, row: Mapping[str, Any], stream: Any) -> bool:
        answer = _text(field_of(row, self.field))
        return answer is not None and self.schema.check(answer).error is None

    def describe(self) -> str:
        extra = {} if self.field == "content" else {"field": self.field}
        return f"schema_valid({_args(self.schema.name, **extra)})"


def schema_valid(schema: Any, field: str = "content") -> Score:
    """True when the answer's ``field`` is a JSON document that validates against ``schema`` (a
    pydantic model class or a JSON-schema dict, as ``schema=`` of a run takes)."""
    from .._structured import schema_of

    return _SchemaValid(schema_of(schema), _check_field(field, "schema_valid"))


class _Under(Score):
    def __init__(self, metric: str, limit: float) -> None:
        self.metric, self.limit = metric, limit

    def __call__(self, row: Mapping[str, Any], stream: Any) -> bool | None:
        if self.metric not in row:
            raise KeyError(f"the results have no column {self.metric!r}")
        value = row[self.metric]
        if _missing(value):
            return None  # no ttft (a failed request): NA, not a pass or a miss
        return bool(float(value) <= self.limit)

    def describe(self) -> str:
        return f"under({_args(self.metric, self.limit)})"


def under(metric: str, limit: float) -> Score:
    """True when the results column ``metric`` (``ttft``, ``e2e``, ``itl``, ``cost``... in its
    unit: seconds for times) is at most ``limit``; NA where the request has no such figure."""
    if not isinstance(metric, str) or not metric:
        raise ConfigurationError(f"under: metric is a results column like 'ttft', not {metric!r}")
    return _Under(metric, _number(limit, f"under({metric!r}, ...)"))


class _CostUnder(_Under):
    def describe(self) -> str:
        return f"cost_under({_args(self.limit)})"


def cost_under(limit: float) -> Score:
    """True when the request's ``cost`` (as the gateway reported it in usage) is at most
    ``limit``; NA where the gateway reported none."""
    return _CostUnder("cost", _number(limit, "cost_under"))
