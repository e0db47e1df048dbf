"""A run's scores (docs/SCORES.md): each finished row graded as it is written, a batch score once
the graded requests have ended, and the columns ``run.results()`` makes of them.

The run only calls scores, duck-typed: a score is a callable ``(row, stream)``, or an object with
``score_rows`` (``score_context.BatchScore``); this package never imports ``nito_nb.scores``.
Each result row holds its scores under ``SCORES`` as ``{name: (value, error, describe)}``:
``value`` a bool, float, str or None (NA), ``error`` the one line of the score's exception (or
None), ``describe`` what the score is (its ``describe()``, else its ``repr``), which the store
keeps beside the value. A score's exception is its row's error: it never stops the run.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._core.errors import ConfigurationError, one_line
from .results import FIELD_PREFIX, SCORE_ERRORS, SCORE_PREFIX, STRUCTURED_COLUMNS, structured_of
from .score_context import ScoreContext

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ERRORS_COLUMN",
    "INPUT_PREFIX",
    "PREFIX",
    "SCORES",
    "ScoreRow",
    "Scorer",
    "StoredStream",
    "check_scores",
    "error_text",
    "score_values",
    "streams_of",
    "with_scores",
]

#: Each score's column in ``results()``: ``score.<name>``.
PREFIX = SCORE_PREFIX
#: The column that says why a row's scores failed: ``name: ExcType: message``, joined by ``; ``.
ERRORS_COLUMN = SCORE_ERRORS
#: The key of a result row's scores (not a column: ``with_scores`` makes the columns).
SCORES = "scores"
#: An input column ``c`` is always in a score's row as ``input.c`` (``nito_nb.scores`` reads it so).
INPUT_PREFIX = "input."

Triple = tuple[Any, "str | None", str]


def check_scores(score: Any) -> dict[str, Any]:
    """``score=`` of a run: a dict of name -> score, checked now (one line each)."""
    if score is None:
        return {}
    if not isinstance(score, Mapping):
        raise ConfigurationError(
            "score= is a dict of name -> score, like score={'exact': nito_nb.scores.equals('content', "
            f"column='truth')}}, not {type(score).__name__}"
        )
    out = {}
    for name, one in score.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"score= names each score with a string, not {name!r}")
        if not (callable(one) or callable(getattr(one, "score_rows", None))):
            raise ConfigurationError(
                f"score {name!r} is a callable (row, stream) -> bool | float | str, or a built-in of "
                f"nito_nb.scores, not {type(one).__name__}"
            )
        out[name] = one
    return out


def describe(score: Any) -> str:
    """What the store keeps of a score: its ``describe()``, else its name or repr."""
    told = getattr(score, "describe", None)
    if callable(told):
        try:
            return str(told())
        except Exception:
            pass
    return getattr(score, "__qualname__", None) or repr(score)


def error_text(error: BaseException) -> str:
    """``ExcType: message`` on one line (a KeyError's message without its quotes)."""
    if isinstance(error, KeyError) and len(error.args) == 1 and isinstance(error.args[0], str):
        return f"KeyError: {one_line(Exception(error.args[0]), with_type=False)}"
    return one_line(error)


def _value(value: Any) -> Any:
    """A score's value as the column keeps it: bool, float, str or None; else a TypeError."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if type(value).__name__ in ("NAType", "NaTType", "bool_"):  # pandas' NA, numpy's bool
        return None if type(value).__name__ != "bool_" else bool(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return None if math.isnan(number) else number
    raise TypeError(f"a score returns bool, float, str or None, not {type(value).__name__}")


class ScoreRow(Mapping[str, Any]):
    """What a score reads of one request: its results row, the input row's columns (as
    ``input.<column>``, and by their own names where no results column has them) and, for a run
    with ``schema=``, ``parsed``, ``valid``, ``parse_error`` and ``out.<field>`` (checked on first
    read only)."""

    __slots__ = ("_checked", "_input", "_row", "_schema")

    def __init__(self, row: Mapping[str, Any], inputs: Mapping[str, Any], schema: Any) -> None:
        self._row = row
        self._input = inputs
        self._schema = schema
        self._checked: dict[str, Any] | None = None

    def _structured(self) -> dict[str, Any]:
        if self._checked is None:
            parsed, ok, error, fields = structured_of(
                self._row.get("status"), self._row.get("content"), self._schema
            )
            self._checked = {"parsed": parsed, "valid": ok, "parse_error": error}
            for name in self._schema.fields:
                value = None if fields is None else fields.get(name)
                self._checked[FIELD_PREFIX + name] = value
        return self._checked

    def __getitem__(self, name: str) -> Any:
        row = self._row
        if name in row and name != SCORES:
            return row[name]
        if name.startswith(INPUT_PREFIX) and name[len(INPUT_PREFIX) :] in self._input:
            return self._input[name[len(INPUT_PREFIX) :]]
        if self._schema is not None and (
            name in STRUCTURED_COLUMNS or name.startswith(FIELD_PREFIX)
        ):
            checked = self._structured()
            if name in checked:
                return checked[name]
        if name in self._input:
            return self._input[name]
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        seen = set()
        for name in self._row:
            if name != SCORES:
                seen.add(name)
                yield name
        if self._schema is not None:
            yield from STRUCTURED_COLUMNS
            for name in self._schema.fields:
                yield FIELD_PREFIX + name
        for name in self._input:
            yield INPUT_PREFIX + name
        for name in self._input:
            if name not in seen:
                yield name

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"ScoreRow({dict(self)!r})"


class Scorer:
    """The scores of one run: ``plain`` ones graded row by row on the writer's thread, ``batch``
    ones (``score_rows``) once at the end. ``inputs``: each request's input row, by key."""

    def __init__(
        self, scores: Mapping[str, Any], inputs: Mapping[str, Mapping[str, Any]], schema: Any
    ) -> None:
        self.names = list(scores)
        self.plain = {
            n: s for n, s in scores.items() if not callable(getattr(s, "score_rows", None))
        }
        self.batch = {n: s for n, s in scores.items() if n not in self.plain}
        self.described = {n: describe(s) for n, s in scores.items()}
        self.inputs = inputs
        self.schema = schema

    def row(self, result: Mapping[str, Any]) -> ScoreRow:
        return ScoreRow(result, self.inputs.get(result["key"], {}), self.schema)

    def grade(
        self, rows: list[dict[str, Any]], streams: Sequence[Any], scores: Mapping[str, Any]
    ) -> None:
        """Each row's plain ``scores``, put in the row (``SCORES``); never raises for a score."""
        if not scores:
            return
        described = self.described
        for result, stream in zip(rows, streams, strict=True):
            row = self.row(result)
            graded: dict[str, Triple] = dict(result.get(SCORES) or {})
            for name, score in scores.items():
                try:
                    graded[name] = (_value(score(row, stream)), None, described.get(name, ""))
                except Exception as exc:  # the score's: its row's error, never the run's
                    graded[name] = (None, error_text(exc), described.get(name, ""))
            result[SCORES] = graded

    def grade_batch(
        self,
        name: str,
        score: Any,
        rows: list[dict[str, Any]],
        streams: Sequence[Any],
        context: ScoreContext,
    ) -> dict[str, Triple]:
        """One batch score's triple for each row's key; a failure of the whole call is every
        row's error."""
        what = self.described.get(name) or describe(score)
        try:
            values = list(score.score_rows([self.row(r) for r in rows], streams, context))
            if len(values) != len(rows):
                raise ValueError(f"score_rows returned {len(values)} values for {len(rows)} rows")
        except Exception as exc:
            error = error_text(exc)
            return {r["key"]: (None, error, what) for r in rows}
        out: dict[str, Triple] = {}
        for r, value in zip(rows, values, strict=True):
            if isinstance(value, BaseException):
                out[r["key"]] = (None, error_text(value), what)
                continue
            try:
                out[r["key"]] = (_value(value), None, what)
            except TypeError as exc:
                out[r["key"]] = (None, error_text(exc), what)
        return out


def score_values(values: list[Any]) -> tuple[list[Any], str]:
    """A score's column values and dtype: ``boolean`` when every value is a bool, ``Float64``
    when they are numbers (bools as 1.0 and 0.0 among them), else ``string`` (each as text)."""
    present = [v for v in values if v is not None]
    if all(isinstance(v, bool) for v in present):
        return values, "boolean"
    if all(isinstance(v, bool | int | float) for v in present):
        return [None if v is None else float(v) for v in values], "Float64"
    return [None if v is None else str(v) for v in values], "string"


def with_scores(
    df: pd.DataFrame, graded: Sequence[Mapping[str, Triple] | None], names: Sequence[str]
) -> pd.DataFrame:
    """``df`` with a ``score.<name>`` column per score (``names`` first, then any other name a
    row holds: a store's) and ``score_errors``; ``graded``: each row's scores, in ``df``'s order.
    A run without scores gets no column."""
    import pandas as pd

    every = list(names)
    for one in graded:
        for name in one or ():
            if name not in every:
                every.append(name)
    if not every:
        return df
    errors: list[list[str]] = [[] for _ in graded]
    for name in every:
        values = []
        for i, one in enumerate(graded):
            value, error, _ = (one or {}).get(name, (None, None, ""))
            values.append(value)
            if error is not None:
                errors[i].append(f"{name}: {error}")
        column, dtype = score_values(values)
        df[PREFIX + name] = pd.Series(column, index=df.index, dtype=dtype)
    df[ERRORS_COLUMN] = pd.Series(
        ["; ".join(e) if e else None for e in errors], index=df.index, dtype="string"
    )
    return df


class StoredStream:
    """A stored request's Stream, rebuilt from the store on its first use: a score that reads
    only its row never pays for the rebuild (``rescore`` of a stored run)."""

    __slots__ = ("_key", "_rebuild", "_stream")

    def __init__(self, key: str, rebuild: Callable[[str], Any]) -> None:
        self._key = key
        self._rebuild = rebuild
        self._stream: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._stream is None:
            self._stream = self._rebuild(self._key)
        return getattr(self._stream, name)

    def __repr__(self) -> str:
        return f"<stored stream {self._key}>"


@contextlib.contextmanager
def streams_of(
    keys: Sequence[str], kept: Mapping[str, Any], open_store: Callable[[], Any] | None
) -> Iterator[list[Any]]:
    """The Stream of each key: the one the run kept in memory, else rebuilt from the store
    (``open_store()``: opened on first use, closed after), else None."""
    opened: list[Any] = []

    def rebuild(key: str) -> Any:
        if not opened:
            assert open_store is not None
            opened.append(open_store())
        return opened[0].streams(key)

    try:
        yield [
            kept[key] if key in kept else (StoredStream(key, rebuild) if open_store else None)
            for key in keys
        ]
    finally:
        for one in opened:
            one.close()
