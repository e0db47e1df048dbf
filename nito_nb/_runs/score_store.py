"""The store's ``scores`` table (docs/SCORES.md): one row per request key and score name.

``key``, ``run_id``, ``name``; ``value`` as JSON text and its ``type`` (``boolean``, ``float``,
``string``; NULL for NA), so that a value reads back as the type it was; ``error`` (the score's
exception, one line, or NULL) and ``score`` (what the score is, its ``describe()``:
``equals('content', column='truth')``). Written in the transaction of the rows it grades; a key graded again by a
score of the same name replaces its row. A resumed run reads them back for the requests it
skips (no score is computed again unless ``run.rescore`` asks).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .scoring import SCORES

if TYPE_CHECKING:
    import duckdb

__all__ = ["TABLE", "prepare_scores", "read_scores", "store_scores", "write_scores"]

TABLE = "scores"
_COLUMNS = {
    "key": "VARCHAR",
    "run_id": "VARCHAR",
    "name": "VARCHAR",
    "value": "VARCHAR",
    "type": "VARCHAR",
    "error": "VARCHAR",
    "score": "VARCHAR",
}


def prepare_scores(con: duckdb.DuckDBPyConnection) -> None:
    """The table, in a store that has none yet."""
    columns = ", ".join(f'"{n}" {t}' for n, t in _COLUMNS.items())
    con.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} ({columns})")


def _type(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    return "string" if isinstance(value, str) else "float"


def _records(rows: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    out = []
    for row in rows:
        for name, (value, error, what) in (row.get(SCORES) or {}).items():
            text = None if value is None else json.dumps(value, ensure_ascii=False)
            out.append((row["key"], row.get("run_id"), name, text, _type(value), error, what))
    return out


def write_scores(con: duckdb.DuckDBPyConnection, rows: Iterable[Mapping[str, Any]]) -> None:
    """The scores the result ``rows`` hold (``SCORES``), replacing those of the same key and
    name. Inside the caller's transaction: the caller commits (or rolls back) with its rows."""
    records = _records(rows)
    if not records:
        return
    import pandas as pd

    batch = pd.DataFrame(records, columns=list(_COLUMNS), dtype="object")
    con.register("batch_scores", batch)
    try:
        con.execute(
            f"DELETE FROM {TABLE} USING batch_scores b "
            f"WHERE {TABLE}.key = b.key AND {TABLE}.name = b.name"
        )
        con.execute(f"INSERT INTO {TABLE} BY NAME SELECT * FROM batch_scores")
    finally:
        con.unregister("batch_scores")


def _read(text: str | None, kind: str | None) -> Any:
    if text is None or kind is None:
        return None
    value = json.loads(text)
    if kind == "boolean":
        return bool(value)
    return float(value) if kind == "float" else str(value)


def read_scores(
    con: duckdb.DuckDBPyConnection, keys: list[str] | None = None
) -> dict[str, dict[str, tuple[Any, str | None, str]]]:
    """``{key: {name: (value, error, describe)}}`` of ``keys`` (all when None); none in a store
    written before scores."""
    (present,) = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [TABLE]
    ).fetchone() or (0,)
    if not present:
        return {}
    where, params = ("", []) if keys is None else (" WHERE list_contains(?, key)", [keys])
    out: dict[str, dict[str, tuple[Any, str | None, str]]] = {}
    for key, name, text, kind, error, what in con.execute(
        f"SELECT key, name, value, type, error, score FROM {TABLE}{where} ORDER BY name",
        params,
    ).fetchall():
        out.setdefault(key, {})[name] = (_read(text, kind), error, what or "")
    return out


def store_scores(con: duckdb.DuckDBPyConnection, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write the scores of ``rows`` on ``con`` (a store whose run has ended: a batch score's, a
    rescore's), in one transaction of their own."""
    import duckdb

    prepare_scores(con)
    con.execute("BEGIN TRANSACTION")
    try:
        write_scores(con, rows)
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:  # the transaction had ended: the first error says why
            pass
        raise
    con.execute("COMMIT")
