"""A frame's columns and their dtypes: the one list, and how a frame read back from Parquet or CSV
gets them back (``nito_nb.frame(df)``)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd

from .._core.errors import ConfigurationError
from .._core.fields import FRAME_COLUMNS
from .._core.log import KINDS
from .._core.status import STATUSES

__all__ = ["COLUMNS", "restore"]

#: The ``kind`` categories: the response row, then the chunk log's event kinds in code order.
KIND_CATEGORIES = ("response", *KINDS)
REASONING_TYPES = (
    "reasoning.text",
    "reasoning.summary",
    "reasoning.encrypted",
    "reasoning",
    "reasoning_content",
    "thinking",
)
FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter", "error")
_READABLE = ("reasoning.text", "reasoning.summary")

_STRING = "string"  # the nullable string dtype ("str" in pandas 3 turns None into NaN)


def _text_dtype() -> pd.StringDtype:
    """The dtype of every text column, chosen here and only here: ``string`` kept in pyarrow.

    Chosen rather than left to pandas, whose ``string`` follows ``pd.options.mode.string_storage``
    (Python objects by default in pandas 2): Python strings make frame() slower
    (bench/bench_frame.py --without-pyarrow; docs/BENCHMARKS.md). pyarrow is a dependency; an
    install made without it (``pip install --no-deps``) still works, on Python strings.
    """
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return pd.StringDtype("python")
    return pd.StringDtype("pyarrow")


_TEXT = _text_dtype()
_FIXED_CATEGORIES: dict[str, tuple[str, ...]] = {
    "kind": KIND_CATEGORIES,
    "reasoning_type": REASONING_TYPES,
    "status": tuple(s.value for s in STATUSES),
}

#: Every column of a frame, in order, with its dtype: declared with the fields (``_core/fields.py``).
COLUMNS: dict[str, str] = dict(FRAME_COLUMNS)
#: Columns added after frames were first saved: a frame read back without them gets them as NA.
_ADDED_LATER = ("attempts", "tool_type", "connect", "audio", "choice")

# Columns that every row has; the others are mostly empty and are filled by row index.
_DENSE = ("stream", "seq", "part", "choice", "t", "gap", "kind", "bytes", "token", "ignored")
_SPARSE = tuple(name for name in COLUMNS if name not in _DENSE)


def _column(
    n: int, rows: np.ndarray, values: list[Any], dtype: str, name: str, nulls: Any = None
) -> Any:
    """A column of ``n`` rows holding ``values`` at ``rows`` and nothing elsewhere.

    Text goes through pyarrow when pandas keeps its strings there: ``pa.array`` then ``take``
    spreads them far faster than ``pd.array(..., dtype="string")`` of a mostly-None list, and a
    frame has 13 text columns (bench/bench_frame.py; docs/BENCHMARKS.md). ``nulls``: an all-null
    text array of ``n`` rows (:func:`_nulls`) for a text column without values to share."""
    if dtype in ("Int64", "float64"):
        numbers = np.zeros(n, dtype=np.int64) if dtype == "Int64" else np.full(n, np.nan)
        if values:
            try:
                numbers[rows] = values
            except OverflowError:  # a count or index past 64 bits: see _ints
                placed: list[Any] = [None] * n
                for row, value in zip(rows.tolist(), values, strict=True):
                    placed[row] = value
                return _ints(placed, name)
        if dtype == "float64":
            return numbers
        mask = np.ones(n, dtype=bool)
        mask[rows] = False
        return pd.arrays.IntegerArray(numbers, mask)
    if dtype == "category":
        fixed = _FIXED_CATEGORIES.get(name)
        if name == "finish_reason":
            fixed = FINISH_REASONS
        found_codes, found = pd.factorize(np.asarray(values, dtype=object))
        known = list(fixed or ())
        every = known + [v for v in found if v not in known]
        position = {v: i for i, v in enumerate(every)}
        recode = np.array([position[v] for v in found], dtype=np.int64)
        codes = np.full(n, -1, dtype=np.int64)
        if values:
            codes[rows] = recode[found_codes]
        return pd.Categorical.from_codes(codes, categories=pd.Index(every, dtype="str"))
    arrow = _arrow()
    if arrow is not None:
        # large_string: what pandas keeps its strings in (a plain string array would be cast).
        if not values:
            return pd.arrays.ArrowStringArray(_nulls(n) if nulls is None else nulls)
        texts = arrow.array(values, type=arrow.large_string())
        if len(values) == n and (rows == np.arange(n)).all():
            return pd.arrays.ArrowStringArray(texts)  # a value on every row, in order
        texts = arrow.array([*values, None], type=arrow.large_string())
        spread = np.full(n, len(values), dtype=np.int64)
        spread[rows] = np.arange(len(values), dtype=np.int64)
        return pd.arrays.ArrowStringArray(texts.take(arrow.array(spread)))
    full: list[Any] = [None] * n
    for row, value in zip(rows.tolist(), values, strict=True):
        full[row] = value
    return pd.array(full, dtype=_TEXT)


def _nulls(n: int) -> Any:
    """An all-null text array of ``n`` rows (None without pyarrow). Most text columns of a frame
    are missing on every row (a plain answer has no tool, reasoning or error text), and each such
    array costs 8 bytes a row (its offsets, all zero): the columns of one frame share one
    (pyarrow arrays are never changed in place; pandas replaces a column's array when a value is
    set)."""
    arrow = _arrow()
    return None if arrow is None else arrow.nulls(n, type=arrow.large_string())


def _column_of(
    n: int,
    rows: np.ndarray,
    values: list[Any],
    bulk: list[tuple[np.ndarray, np.ndarray, Any]],
    dtype: str,
    name: str,
    keys: np.ndarray | None = None,
    nulls: Any = None,
) -> Any:
    """:func:`_column`, with more values given in bulk: ``(rows, each row's value as a position
    in values or -1 for none, values)``, values a list or a pyarrow array (``plan.py``). Text
    stays in pyarrow: one ``take`` spreads every piece. ``keys``: the order the rows were
    placed in (the rows of ``rows`` and of the bulk, concatenated), when not the rows;
    ``nulls``: :func:`_nulls` of ``n`` rows, to share.

    ``bulk`` is emptied: a text column is copied once from its pieces (:func:`_spread`), and
    each piece is let go of once copied (a frame's ``extras`` can be as large as its log's text:
    OpenAI's ``obfuscation``)."""
    arrow = _arrow()
    if dtype not in ("Int64", "float64", "category") and arrow is not None:
        text = arrow.large_string()
        parts = [arrow.array([*values, None], type=text)]
        spread = np.full(n, len(values), dtype=np.int64)
        spread[rows] = np.arange(len(values), dtype=np.int64)
        size = len(values) + 1
        # where each values array is among the parts: one shared by many pieces (the distinct
        # texts of many short logs planned together, plan.py) is joined once, not once each
        offset_of: dict[int, int] = {}
        for where, codes, more in bulk:
            at = offset_of.get(id(more))
            if at is None:
                at = offset_of[id(more)] = size  # the bulk holds it meanwhile: its id stays its own
                if not isinstance(more, arrow.Array):
                    more = arrow.array(more, type=text)
                elif more.type != text:
                    more = more.cast(text)
                parts.append(more)
                size += len(more)
            has = codes >= 0
            spread[where[has]] = at + codes[has]
        bulk.clear()
        more = None
        return pd.arrays.ArrowStringArray(_spread(arrow, parts, spread, len(values), nulls))
    # Each row's value as a position in one table of values (the bulk's are a few values each,
    # shared by many rows: a skeleton's model, role, reasoning type), not a list of every row's.
    table = list(values)
    every_row, every_code = [rows], [np.arange(len(values), dtype=np.int64)]
    for where, codes, more in bulk:
        listed = more.to_pylist() if arrow is not None and isinstance(more, arrow.Array) else more
        has = codes >= 0
        every_row.append(where[has])
        every_code.append(len(table) + codes[has])
        table += listed
    # In row order, as when each row is placed in turn: a category's categories come in the order
    # its values first appear, and a row placed twice keeps its last value.
    placed, code = np.concatenate(every_row), np.concatenate(every_code)
    order = np.argsort(placed if keys is None else keys, kind="stable")
    placed, code = placed[order], code[order]
    coded = _coded(n, placed, code, table, dtype, name)
    if coded is not None:
        return coded
    return _column(n, placed, [table[k] for k in code.tolist()], dtype, name)


def _coded(
    n: int, rows: np.ndarray, code: np.ndarray, table: list[Any], dtype: str, name: str
) -> Any:
    """:func:`_column` of the values ``table[code[i]]`` at ``rows[i]``, without a list of every
    row's value: numbers and categories (the frame's ``model``, ``role``, ``reasoning_type``...
    on every chunk row, 5% of a frame of 100,000 events when listed). None where the table holds
    values that _column reads one by one (numbers past 64 bits, a missing value)."""
    if dtype == "category":
        table_codes, found = pd.factorize(np.asarray(table, dtype=object))
        if (table_codes < 0).any():
            return None
        each = table_codes[code]
        # the values in the order they first appear on the rows: pd.factorize's order of them
        _, first = np.unique(each, return_index=True)
        seen = each[np.sort(first)]
        fixed = FINISH_REASONS if name == "finish_reason" else _FIXED_CATEGORIES.get(name)
        known = list(fixed or ())
        every = known + [v for v in found[seen] if v not in known]
        position = {v: i for i, v in enumerate(every)}
        recode = np.full(len(found), -1, dtype=np.int64)
        recode[seen] = [position[v] for v in found[seen]]
        codes = np.full(n, -1, dtype=np.int64)
        codes[rows] = recode[each]
        return pd.Categorical.from_codes(codes, categories=pd.Index(every, dtype="str"))
    if dtype == "Int64" and all(type(v) is int for v in table):
        try:
            numbers = np.array(table, dtype=np.int64)
        except OverflowError:  # a count or index past 64 bits: see _ints
            return None
        placed = np.zeros(n, dtype=np.int64)
        placed[rows] = numbers[code]
        mask = np.ones(n, dtype=bool)
        mask[rows] = False
        return pd.arrays.IntegerArray(placed, mask)
    if dtype == "float64" and all(type(v) in (int, float) for v in table):
        try:
            numbers = np.array(table, dtype=np.float64)
        except OverflowError:
            return None
        placed = np.full(n, np.nan)
        placed[rows] = numbers[code]
        return placed
    return None


#: At most this many runs of rows (_spread) make a column as they are, in chunks, without a copy.
_SHARED_SLICES = 16
# Runs of rows (_spread) from which a column is copied slice by slice, per row: past this, one
# concatenation and one take.
_RUNS_PER_ROW = 1 / 64


def _spread(
    arrow: Any, parts: list[Any], spread: np.ndarray, missing: int, nulls: Any = None
) -> Any:
    """The text array whose row i is row ``spread[i]`` of the ``parts`` placed end to end
    (``missing``: the position of parts[0]'s null; ``nulls``: :func:`_nulls` of as many rows,
    if there is one already). ``parts`` is emptied.

    A piece placed in order on most rows (a padded chunk's ``extras``: one per chunk) is copied
    once, run by run of rows that follow one another in it, rather than concatenated with the
    others and then taken (two copies of it at once). Pieces taken out of order (each chunk's
    text, as codes into the distinct texts) are small: they are concatenated and taken."""
    n = len(spread)
    starts = np.cumsum([0] + [len(part) for part in parts])
    if n > 1:
        gone = spread == missing
        # a run goes on where the next row is missing as this one is, or is the next row of
        # the same piece
        step = (spread[1:] - spread[:-1] == 1) & ~np.isin(spread[1:], starts[1:-1])
        goes_on = np.where(gone[1:], gone[:-1], step & ~gone[:-1])
        begins = np.flatnonzero(~goes_on) + 1
        if len(begins) <= n * _RUNS_PER_ROW:
            bounds = [0, *begins.tolist(), n]
            slices = []
            for begin, end in itertools.pairwise(bounds):
                at = int(spread[begin])
                if at == missing:
                    if nulls is None:
                        nulls = _nulls(n)
                    slices.append(nulls.slice(0, end - begin))
                else:
                    part = int(np.searchsorted(starts, at, side="right")) - 1
                    slices.append(parts[part].slice(at - int(starts[part]), end - begin))
            parts.clear()
            if len(slices) <= _SHARED_SLICES:
                # a few runs: the column is made of them as they are, not copied (pandas keeps
                # a text column's pyarrow array in chunks anyway); copied, a padded chunk's
                # ``extras`` was held twice at once, and that moment was the peak of framing
                # 100,000 tool-call chunks (bench/bench_frame.py: 1.90-2.01x the log, target 2x)
                return arrow.chunked_array(slices, type=slices[0].type)
            return arrow.concat_arrays(slices)
    joined = arrow.concat_arrays(parts)
    parts.clear()
    return joined.take(arrow.array(spread))


def _ints(values: Any, name: str) -> Any:
    """Whole numbers (None or NA: missing) of column ``name`` as an ``Int64`` array.

    When one does not fit in 64 bits (a body whose ``prompt_tokens`` or tool index is 2**70), an
    ``object`` array of the exact Python ints instead: the value stays visible as it was sent,
    where OverflowError lost the whole frame and NA would have hidden it. Digit strings (a
    hand-edited frame) are read as numbers; anything else is one line naming the column."""
    try:
        return pd.array(values, dtype="Int64")
    except (OverflowError, TypeError, ValueError):
        pass
    out: list[int | None] = []
    for value in values:
        if value is None or value is pd.NA or (isinstance(value, float) and value != value):
            out.append(None)
        elif isinstance(value, int | np.integer) and not isinstance(value, bool):
            out.append(int(value))
        elif isinstance(value, float) and value.is_integer():
            out.append(int(value))
        elif isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            out.append(int(value))
        else:
            raise ConfigurationError(
                f"the {name!r} column holds {value!r}, where a frame made by nito_nb.frame has whole "
                "numbers: fix that value (or build the frame again with nito_nb.frame)"
            )
    try:
        return pd.array(out, dtype="Int64")  # digit strings that all fit
    except OverflowError:
        return pd.array(out, dtype=object)


def _arrow() -> Any:
    """pyarrow when the text columns are kept in it (``_TEXT``)."""
    if _TEXT.storage != "pyarrow":
        return None
    import pyarrow
    import pyarrow.compute  # the frame builder's kernels (pyarrow.compute)

    return pyarrow


def _missing_columns(df: pd.DataFrame) -> list[str]:
    return [name for name in COLUMNS if name not in df.columns and name not in _ADDED_LATER]


def restore(df: pd.DataFrame) -> pd.DataFrame:
    """A frame of ours with its dtypes (CSV keeps none; Parquet keeps them all)."""
    missing = _missing_columns(df)
    if missing:
        raise ValueError(_not_ours(missing))
    out = df.copy()
    for name in _ADDED_LATER:
        if name not in out.columns:
            # A frame saved before the choice column held choice 0's rows only.
            out[name] = pd.array([0 if name == "choice" else None] * len(out), dtype=COLUMNS[name])
    for name, dtype in COLUMNS.items():
        column = out[name]
        if str(column.dtype) == dtype and not (dtype == "category" and name in _FIXED_CATEGORIES):
            continue
        if dtype == "category":
            fixed = _FIXED_CATEGORIES.get(name)
            if name == "stream" and isinstance(column.dtype, pd.CategoricalDtype):
                continue
            values = column.astype(object).where(column.notna(), None)
            if fixed is not None:
                out[name] = pd.Categorical(values, categories=list(fixed))
            elif name == "stream":
                out[name] = pd.Categorical(values, categories=pd.unique(values.dropna()))
            else:
                listed = values.tolist()
                rows = np.array([i for i, v in enumerate(listed) if v is not None], dtype=np.int64)
                out[name] = _column(len(listed), rows, [listed[i] for i in rows], dtype, name)
        elif dtype == "Int64":
            try:
                out[name] = column.astype("Int64")
            except (OverflowError, TypeError, ValueError):  # past 64 bits (CSV reads it as text)
                out[name] = _ints(column.astype(object).where(column.notna(), None).tolist(), name)
        elif dtype == _STRING:
            values = column.astype(object).where(column.notna(), None)
            out[name] = pd.array([None if v is None else str(v) for v in values], dtype=_TEXT)
        else:
            out[name] = column.astype(dtype)
    return out


def _not_ours(missing: list[str]) -> str:
    shown = ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else "")
    return (
        f"this DataFrame is not a nito_nb frame: it lacks the column(s) {shown}. Build one with "
        "s.frame() or nito_nb.frame(streams_or_paths); a frame read back from Parquet or CSV "
        "keeps them (pass it through nito_nb.frame(df) to restore the dtypes)."
    )
