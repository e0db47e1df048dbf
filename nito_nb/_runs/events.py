"""A run store's ``events``: Parquet files beside its database, written by a helper process.

Each batch of finished requests becomes one file, ``events/<batch>.parquet``: the frame rows of
its streams (``stream`` = the request key) with each event's exact arrival (``dt_ns``) and the
end of its bytes in the request's ``body`` (``raw_end``), ``run_id`` and ``batch``. The file is
written under a temporary name and renamed, so it is whole or absent, and before the batch's
``requests`` rows commit. The ``events`` view (``events_view``) shows a file's rows only for the
requests whose row names that batch: a file written just before its process was killed, and
the old rows of a key that a resumed run sent again, are never seen.

Why not a DuckDB table, as at first: inserting a batch's event rows and DuckDB's checkpoints of them
cost over ten times the CPU of writing the same rows as Parquet files. Why a helper process:
building those frames from the logs held the GIL that the run's sending loop needs, and a run with a
store reached half the floor's rate (bench/bench_runs.py; both in docs/BENCHMARKS.md). The helper
(``events_helper.py``) receives each batch as ``EndedStream`` records and answers when the file
is in place; the writer thread commits the rows only then.
"""

from __future__ import annotations

import os
import time
import uuid
import warnings
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .._core.errors import ConfigurationError

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from .._frame import EndedStream

__all__ = [
    "COMPACT_AT",
    "COMPACT_BELOW",
    "EVENTS_DIR",
    "SQL_TYPES",
    "compact",
    "event_columns",
    "events_of",
    "events_view",
    "legacy_events",
    "new_batch",
    "prepare",
    "unreadable",
    "write_events",
]

EVENTS_DIR = "events"
#: A file with no rows and every column: the view's glob always matches a file, and a column
#: that no batch has yet still has its type.
_SCHEMA_FILE = "_columns.parquet"
#: Per event row beyond the frame's columns (``part`` 0 rows; NA on further parts and on the
#: ``response`` row): its arrival in ns after the request, and where its bytes end in the
#: request's ``body`` (a number per row rather than a blob per row: ten times cheaper to write).
_EVENT_EXTRA = {"dt_ns": "BIGINT", "raw_end": "BIGINT", "run_id": "VARCHAR", "batch": "VARCHAR"}
#: The SQL type of each pandas dtype of the frame and of the result rows: the store's one mapping
#: (``requests``, in ``store_writer.py``, and the events files).
SQL_TYPES = {
    "string": "VARCHAR",
    "object": "VARCHAR",
    "category": "VARCHAR",
    "Int64": "BIGINT",
    "int64": "BIGINT",
    "float64": "DOUBLE",
    "bool": "BOOLEAN",
    "datetime64[us, UTC]": "TIMESTAMPTZ",
}


def event_columns() -> dict[str, str]:
    """The view's columns and their SQL types: the frame's, then ``_EVENT_EXTRA``'s."""
    from .._frame import COLUMNS

    return {**{name: SQL_TYPES[dtype] for name, dtype in COLUMNS.items()}, **_EVENT_EXTRA}


def new_batch() -> str:
    """A batch name no other writer of any store uses (runs may share a store)."""
    return uuid.uuid4().hex


#: The events columns a store's queries filter on (``_events_sql``; a user's by run).
_FILTERED = ("stream", "batch", "run_id")


def write_events(
    folder: str | os.PathLike[str], batch: str, run_id: str | None, ended: Mapping[str, EndedStream]
) -> None:
    """Write ``events/<batch>.parquet`` in the store at ``folder``: whole, or not at all."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .._frame import COLUMNS, events_rows

    events = _event_rows(events_rows(ended), ended)
    for name, dtype in COLUMNS.items():
        if dtype == "Int64" and events[name].dtype == object:
            # A value past 64 bits, kept exact by the frame as a Python int (_frame/dtypes._ints):
            # Parquet has no such integer, so it is stored as a float (the nearest double) rather
            # than stopping the run; the ``usage`` text keeps the exact counts.
            events[name] = events[name].astype("float64")
    events["run_id"] = run_id
    events["batch"] = batch
    final = Path(folder) / EVENTS_DIR / f"{batch}.parquet"
    partial = final.with_suffix(".partial")
    # Min/max statistics only where a query of the store filters (each key's rows, a batch's,
    # a run's): for every column they were a fifth of the file's writing, in the helper's CPU
    # on the cores the run needs (bench/bench_runs_floor.py); the merged files (compact) have all.
    pq.write_table(
        # one thread: pyarrow's pool of threads started and joined for each batch cost a
        # quarter of the conversion (bench/bench_frame.py's many short streams: a batch)
        pa.Table.from_pandas(events, preserve_index=False, nthreads=1),
        partial,
        write_statistics=list(_FILTERED),
    )
    os.replace(partial, final)


def _event_rows(out: pd.DataFrame, ended: Mapping[str, EndedStream]) -> pd.DataFrame:
    """The frame ``out``, extended with each event's ``dt_ns`` and ``raw_end`` (the running sum
    of the ``bytes`` column within its stream)."""
    import numpy as np
    import pandas as pd

    seq = out["seq"].to_numpy()
    event = (seq >= 0) & (out["part"].to_numpy() == 0)  # one row per logged event
    sizes = np.where(event, out["bytes"].to_numpy(dtype=np.int64, na_value=0), 0)
    codes = out["stream"].cat.codes.to_numpy()
    labels = out["stream"].cat.categories
    raw_end = np.zeros(len(out), dtype=np.int64)
    dt_ns = np.zeros(len(out), dtype=np.int64)
    # frame() lays the streams out one after another, in the order they were given.
    starts = (
        np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        if len(out)
        else np.array([], dtype=np.int64)
    )
    ends = np.r_[starts[1:], len(out)]
    for start, end in zip(starts, ends, strict=True):
        log = ended[labels[codes[start]]].log
        raw_end[start:end] = np.cumsum(sizes[start:end])
        rows = start + np.flatnonzero(event[start:end])
        dt_ns[rows] = np.frombuffer(log.times_ns(), dtype=np.int64)[seq[rows]] - log.t0_ns
    out["dt_ns"] = pd.arrays.IntegerArray(dt_ns, ~event)
    out["raw_end"] = pd.arrays.IntegerArray(raw_end, ~event)
    return out


#: A writer that closes with at least this many small events files merges them into one
#: (``compact``): a store gets one file per batch (a second of a run) and one per magic cell, and
#: DuckDB opens every file of the glob for each query of the ``events`` view, which a store of a
#: thousand files makes slow. Waiting for many keeps the merge off short runs' ends, where the
#: user waits for it (docs/BENCHMARKS.md).
COMPACT_AT = 64
#: Files at least this large are left as they are: a merge rewrites only small files, so its
#: cost is bounded however large the store grows.
COMPACT_BELOW = 32 << 20


#: A file no row names is deleted only once it is this old (seconds since it was written). A run
#: and the magic's cells in one process write the same store through one DuckDB instance, so
#: one of them may be between writing a batch's file and the rows that name it while the other
#: closes its writer and tidies up: deleting that file then broke the write (a `.partial` renamed
#: after it was gone). What a killed process left is deleted by a later close.
STALE_AFTER = 600.0


def compact(
    folder: Path, con: duckdb.DuckDBPyConnection, skip: Collection[str] = ()
) -> tuple[int, int]:
    """Merge the store's small events files into one, and delete the files no request row names
    (the batch of a process killed before its rows committed, a merge's sources, a stale
    ``.partial``) once they are ``STALE_AFTER`` old. Returns (files merged, files deleted).
    Crash-safe at every step, as the view shows a file's rows only for the requests whose row
    names its batch: the merged file is written whole (renamed into place), then the rows name it
    in one transaction, then the sources go; a crash in between leaves a file no row names,
    deleted when a writer closes once it is stale.
    The caller holds the store's write lock (a ``StoreWriter``), with no batch under way.
    ``skip``: batches whose files cannot be read (``events_view``): left as they are, for the
    user to see, rather than failing every merge."""
    events = folder / EVENTS_DIR
    named = {
        batch
        for (batch,) in con.execute(
            "SELECT DISTINCT batch FROM requests WHERE batch IS NOT NULL"
        ).fetchall()
    }
    small: list[Path] = []
    deleted = 0
    now = time.time()
    for path in sorted(events.iterdir()):
        if path.name == _SCHEMA_FILE:
            continue
        if path.suffix == ".partial" or (path.suffix == ".parquet" and path.stem not in named):
            try:
                stale = now - path.stat().st_mtime >= STALE_AFTER
            except FileNotFoundError:  # its writer renamed or removed it meanwhile
                continue
            if stale:
                path.unlink(missing_ok=True)
                deleted += 1
        elif (
            path.suffix == ".parquet"
            and path.stat().st_size < COMPACT_BELOW
            and path.stem not in skip
        ):
            small.append(path)
    if len(small) < COMPACT_AT:
        return 0, deleted
    batch = new_batch()
    final = events / f"{batch}.parquet"
    partial = final.with_suffix(".partial")
    files = "[" + ", ".join(_quoted(str(path)) for path in small) + "]"
    # Only the rows the view shows: a key sent again by a resumed run has its old rows in an
    # older batch, which its request row no longer names.
    con.execute(
        f"COPY (SELECT e.* REPLACE ({_quoted(batch)} AS batch) FROM read_parquet({files}, union_by_name = true) AS e "
        "SEMI JOIN requests AS r ON e.stream = r.key AND e.batch = r.batch) TO "
        f"{_quoted(str(partial))} (FORMAT parquet)"
    )
    os.replace(partial, final)
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(
            "UPDATE requests SET batch = ? WHERE list_contains(?, batch)",
            [batch, [p.stem for p in small]],
        )
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")  # a commit that fails ends the transaction itself (StoreWriter.write)
    for path in small:
        path.unlink(missing_ok=True)
    return len(small), deleted + len(small)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _glob_literal(path: str) -> str:
    """``path`` with DuckDB's glob characters matched literally (each as a one-character class):
    a store in a folder such as ``runs/exp[1]`` was read as a pattern, matched no file, and the
    store could not be opened."""
    return "".join(f"[{c}]" if c in "[*?" else c for c in path)


def prepare(folder: Path, con: duckdb.DuckDBPyConnection) -> None:
    """Make the store's events folder and its columns file (a writer, once per store)."""
    # was a FileExistsError
    if (folder / EVENTS_DIR).exists() and not (folder / EVENTS_DIR).is_dir():
        raise ConfigurationError(_events_not_a_folder(folder))
    (folder / EVENTS_DIR).mkdir(exist_ok=True)
    schema = folder / EVENTS_DIR / _SCHEMA_FILE
    if schema.exists() and set(event_columns()) <= (_columns_of(con, schema) or set()):
        return  # else written by a version with fewer columns (or damaged): written again, whole
    columns = ", ".join(f'CAST(NULL AS {sql}) AS "{name}"' for name, sql in event_columns().items())
    partial = schema.with_suffix(".partial")
    con.execute(f"COPY (SELECT {columns} LIMIT 0) TO {_quoted(str(partial))} (FORMAT parquet)")
    os.replace(partial, schema)


def events_view(folder: Path, con: duckdb.DuckDBPyConnection, legacy: str | None) -> frozenset[str]:
    """Give ``con`` the ``events`` view (a temporary one: it names the folder where it is now,
    so a store that was moved still reads). A store written before the events left the
    database keeps its old ``events`` table (``legacy``, from ``legacy_events``): the view shows
    its rows too.

    Returns the batches whose files cannot be read (``unreadable``): the view leaves them out,
    with one warning naming each, so that one damaged file does not make the whole store, and
    every new run on it, fail with DuckDB's error (the view reads every file's columns)."""
    import duckdb

    events = folder / EVENTS_DIR
    if events.exists() and not events.is_dir():
        warnings.warn(
            f"nito_nb: {_events_not_a_folder(folder)}; until then the store shows no events",
            stacklevel=3,
        )
        files = None
    elif (events / _SCHEMA_FILE).exists():  # else a store no writer opened since
        files = _quoted(_glob_literal(str(folder.resolve() / EVENTS_DIR)) + "/*.parquet")
    else:
        files = None
    present = _columns_of(con, events / _SCHEMA_FILE) if files is not None else None
    try:
        con.execute(
            f"CREATE OR REPLACE TEMP VIEW events AS {_events_sql(files, legacy, present, con)}"
        )
        return frozenset()
    except duckdb.Error:
        bad = unreadable(folder, con) if files is not None else {}
        if not bad:
            raise
    if _SCHEMA_FILE in bad:  # the view's columns come from it: nothing reads without it
        raise ConfigurationError(
            f"the run store's columns file {str(events / _SCHEMA_FILE)!r} cannot be read ({bad[_SCHEMA_FILE]}): "
            "move it away; the next run on the store writes it again"
        )
    # Only the files that read, listed: a file a writer adds later is not seen by this
    # connection (open the store again), the price of a view that reads at all.
    good = [str(path) for path in sorted(events.glob("*.parquet")) if path.name not in bad]
    files = "[" + ", ".join(map(_quoted, good)) + "]"
    con.execute(f"CREATE OR REPLACE TEMP VIEW events AS {_events_sql(files, legacy, present, con)}")
    for name, why in bad.items():
        [(n,)] = con.execute(
            "SELECT count(*) FROM requests WHERE batch = ?", [Path(name).stem]
        ).fetchall()
        whose = (
            (
                f"the events of its {n} request(s) are left out of frame() and streams() (results() keeps "
                "their rows)"
            )
            if n
            else "no request names it"
        )
        warnings.warn(
            f"nito_nb: the run store's events file {str(events / name)!r} cannot be read ({why}): {whose}; "
            f"move it out of {str(events)!r} to silence this",
            stacklevel=3,
        )
    return frozenset(Path(name).stem for name in bad)


def unreadable(folder: Path, con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The store's events files that DuckDB cannot read as Parquet (file name -> why, on one
    line). Each file's footer is read: asked only once the view over all of them has failed."""
    import duckdb

    from .._core.errors import one_line

    bad = {}
    for path in sorted((folder / EVENTS_DIR).glob("*.parquet")):
        try:
            con.execute(f"SELECT count(*) FROM parquet_metadata({_quoted(str(path))})").fetchall()
        except duckdb.Error as exc:
            # DuckDB's message names the file again, then a caret under the query: the first line.
            why = (
                one_line(exc, with_type=False)
                .split(" LINE 1:")[0]
                .replace(f" {_quoted(str(path))}", "")
            )
            bad[path.name] = why.strip()
    return bad


def _events_not_a_folder(folder: Path) -> str:
    return (
        f"{str(folder / EVENTS_DIR)!r} is a file, where a run store keeps the folder of its events "
        "files: move that file away"
    )


def events_of(
    folder: Path,
    con: duckdb.DuckDBPyConnection,
    keys: list[str],
    legacy: str | None,
    skip: Collection[str] = (),
) -> str:
    """The SQL of the events of ``keys`` (and maybe of others: filter them), reading only the
    files of their batches (``legacy``: the store's old table, ``legacy_events``). The view's
    glob opens every file of the store, one per batch (one per cell for the magic's), and its
    cost grows with every cell (bench/bench_magic_store.py; docs/BENCHMARKS.md)."""
    batches = con.execute(
        "SELECT DISTINCT batch FROM requests WHERE list_contains(?, key) AND batch IS NOT NULL",
        [keys],
    ).fetchall()
    files = present = None
    batches = [(batch,) for (batch,) in batches if batch not in skip]  # unreadable (events_view)
    if batches:
        paths = [str(folder.resolve() / EVENTS_DIR / f"{batch}.parquet") for (batch,) in batches]
        schema = folder / EVENTS_DIR / _SCHEMA_FILE
        present = _columns_of(con, schema)
        if present is not None:  # every column the store's files may have, even if these lack some
            paths.append(str(schema.resolve()))
        files = "[" + ", ".join(_quoted(path) for path in paths) + "]"
    return _events_sql(files, legacy, present, con)


def _events_sql(
    files: str | None,
    legacy: str | None,
    present: set[str] | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> str:
    """The events rows of the Parquet ``files`` (a glob or a list, SQL) whose request row names
    their batch, and the rows of the old ``legacy`` table.

    ``present``: the columns the files have (their columns file's), None for all. A column this
    version has and a store written by an older one lacks (such as ``tool_type``) reads as NULL:
    named in the query, it failed to bind, and the store could not be opened at all."""
    columns = {name: sql for name, sql in event_columns().items() if name != "batch"}

    def select(have: set[str] | None, prefix: str) -> str:
        return ", ".join(
            f'{prefix}"{name}"'
            if have is None or name in have
            else f'CAST(NULL AS {sql}) AS "{name}"'
            for name, sql in columns.items()
        )

    parts = (
        [
            f"SELECT {select(_table_columns(con, legacy) if con is not None else None, '')} FROM {legacy}"
        ]
        if legacy
        else []
    )
    if files is not None:
        parts.insert(
            0,
            f"SELECT {select(present, 'e.')} FROM read_parquet({files}, union_by_name = true) AS e "
            "SEMI JOIN requests AS r ON e.stream = r.key AND e.batch = r.batch",
        )
    return " UNION ALL BY NAME ".join(parts) or f"SELECT {select(set(), '')} LIMIT 0"


def _columns_of(con: duckdb.DuckDBPyConnection, path: Path) -> set[str] | None:
    """The column names of one Parquet file (its footer only), None if it cannot be read."""
    import duckdb

    if not path.exists():
        return None
    try:
        return {
            name
            for (name,) in con.execute(
                f"SELECT name FROM parquet_schema({_quoted(str(path))}) WHERE num_children IS NULL OR num_children = 0"
            ).fetchall()
        }
    except duckdb.Error:
        return None


def _table_columns(con: duckdb.DuckDBPyConnection, table: str) -> set[str]:
    """The column names of the store's old events table (``legacy_events``' qualified name)."""
    database = table.split(".")[0].strip('"')
    return {
        name
        for (name,) in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_catalog = ? AND table_name = 'events'",
            [database],
        ).fetchall()
    }


def legacy_events(con: duckdb.DuckDBPyConnection) -> str | None:
    """The qualified name of a store's old ``events`` table, or None."""
    (database,) = con.execute("SELECT current_database()").fetchone() or ("",)
    found = con.execute(
        "SELECT 1 FROM information_schema.tables WHERE table_catalog = ? AND table_name = 'events' "
        "AND table_type = 'BASE TABLE'",
        [database],
    ).fetchone()
    return f'"{database}".main.events' if found else None
