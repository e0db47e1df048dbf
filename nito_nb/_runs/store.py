"""The run store: a folder holding one DuckDB database (``runs.duckdb``) and an ``events`` folder.

``requests`` (a table): one row per request (the result columns of ``Run.results()``, plus what
rebuilds its Stream: the request, the response's status and headers, how it ended, and the batch
whose events file holds its events). ``events`` (a view over ``events/*.parquet``, see
``_events.py``): the frame rows of every stream (``stream`` = the request key), plus each event's
arrival time and the end of its bytes in the request's ``body``, so that ``Store.streams(key)``
gives back the Stream itself.

One process writes a store at a time: DuckDB locks the file, and a second process (writing or
reading) gets a clear error instead of a corrupt file. A batch of finished requests is written
as one events file, then its rows in one transaction, with the rows of a re-run key replaced
(resume re-runs what was not done).
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._core.errors import ConfigurationError
from .._core.file_kinds import RUN_STORE_DB
from .._core.log import HTTP_ERROR, KINDS, ChunkLog
from .._core.status import Status
from .._core.units import to_ns
from .events import (
    SQL_TYPES,
    EventsHelper,
    compact,
    events_of,
    events_view,
    legacy_events,
    new_batch,
    prepare,
)
from .plan import Request, request_key
from .results import RESULT_COLUMNS, Finished, result_rows, results_frame, summary
from .score_store import prepare_scores, read_scores, write_scores
from .store_errors import StoreBusy, StoreError, at_open, cannot_open, cannot_write, cause_of

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from .._stream import Stream
    from .._stream_results import StreamResults

__all__ = [
    "DB_NAME",
    "Store",
    "StoreBusy",
    "StoreError",
    "StoreWriter",
    "open_store",
    "stream_key",
    "write_streams",
]

DB_NAME = RUN_STORE_DB
WRITER_MEMORY_LIMIT = "256MB"
#: Every connection of the project: DuckDB otherwise downloads an extension it needs from
#: extensions.duckdb.org (a SQLite file named runs.duckdb fetched the sqlite scanner), a host the
#: user never chose. The store needs none (Parquet is built in). One config for every connection:
#: DuckDB refuses a second connection to an open file with other settings.
DUCKDB_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}

#: What the requests table keeps beyond the result columns, to rebuild each Stream.
_REBUILD_COLUMNS = {
    "request": "VARCHAR",  # JSON: model, messages, params, base_url (never a key: see _client)
    "http_status": "INTEGER",
    "headers": "VARCHAR",  # JSON, without credential headers (ChunkLog.clean_headers)
    "headers_dt_ns": "BIGINT",
    "end_state": "VARCHAR",  # JSON: the log's end (status, exception, message)
    "timed": "BOOLEAN",
    "body": "BLOB",  # the body's bytes as they arrived (every event's raw bytes, in order)
    "batch": "VARCHAR",  # its events file (_events.py); NULL in a store written before them
}


def _store_path(value: Any) -> Path:
    """The folder ``store=`` names, or one clear error: not a path, or an empty one (which
    was the current folder), or one that DuckDB cannot open: it takes what follows a ``?`` as
    options (the write-ahead log went to ``a.wal?b/...``), and a backslash as a separator on
    every system. (Glob characters are fine: ``_events.py`` reads them literally.)"""
    if not isinstance(value, str | os.PathLike) or not str(value).strip():
        raise ConfigurationError(
            f"store= is the path of a folder, like store='runs/today', not {value!r}"
        )
    path = Path(value).expanduser()
    for char, name in (("?", "a question mark"), ("\\", "a backslash")):
        # DuckDB makes a relative path absolute first: the folder it is in counts too.
        if char in str(path.absolute()) and not (char == "\\" and os.sep == "\\"):
            raise ConfigurationError(
                f"store={str(path)!r}: DuckDB cannot open a database whose path holds {name}; "
                "choose a folder without one"
            )
    return path


def _connect(path: Path, read_only: bool, either: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection to the store's database; ``either``: in the other mode if this process already
    has it open in that one (DuckDB refuses two modes in one process)."""
    db = path / DB_NAME
    new = not db.exists()
    try:
        return _open(path, db, read_only, either)
    except BaseException:
        # A database begun by this attempt and left empty (a full disk: DuckDB made the file, then
        # could not write its header) is no database: left there, every later run on the store
        # was refused as "not a DuckDB file", space or not.
        if new and db.is_file() and db.stat().st_size == 0:
            db.unlink(missing_ok=True)
        raise


def _open(path: Path, db: Path, read_only: bool, either: bool) -> duckdb.DuckDBPyConnection:
    import duckdb

    try:
        return duckdb.connect(str(db), read_only=read_only, config=DUCKDB_CONFIG)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise StoreBusy(
                f"the store {str(path)!r} is being written by another process: open it when that "
                "run has ended (one process writes a store at a time)"
            ) from None
        # a full disk leaves a file without a header
        what = None if cause_of(exc) else _not_duckdb(db)
        if what:
            raise ConfigurationError(
                f"{str(db)!r} is not a nito_nb run store's database ({what}): move it away, or give "
                "store= another folder"
            ) from None
        raise cannot_open(exc, path, db) from None  # read-only, no permission, cut short...
    except duckdb.ConnectionException as exc:
        # The same file already open in this process with the other mode.
        if either:
            return _open(path, db, not read_only, False)
        if read_only:  # a run is writing it
            raise StoreBusy(
                f"the store {str(path)!r} is open for writing in this process (a run in progress?): "
                f"wait for the run to end ({exc})"
            ) from None
        raise StoreBusy(
            f"the store {str(path)!r} is open for reading in this process (nito_nb.open_store): "
            f"close that Store first (store.close(), or open it in a with block) ({exc})"
        ) from None
    # a checksum that does not match: DuckDB's raw error was all there was
    except duckdb.Error as exc:
        raise cannot_open(exc, path, db) from None


def _not_duckdb(db: Path) -> str | None:
    """What the file ``db`` is when it is not a DuckDB database (by its header), else None."""
    try:
        with open(db, "rb") as f:
            head = f.read(16)
    except OSError:
        return None
    if head.startswith(b"SQLite format 3\x00"):
        return "it is a SQLite database"
    return None if head[8:12] == b"DUCK" else "it is not a DuckDB file"  # DuckDB's magic bytes


def _text_arg(value: Any, what: str, example: str) -> str:
    """``value`` when it is a str, else one line: DuckDB's ConversionException said only that
    it could not compare a VARCHAR with an INTEGER."""
    if not isinstance(value, str):
        raise ConfigurationError(f"{what} is a string, as in {example}, not {value!r}")
    return value


class StoreWriter:
    """The writing side, owned by one run's writer thread; ``helper``: the events files are
    written by a helper process (``_events.py``), else by the caller."""

    def __init__(self, path: str | os.PathLike[str], *, helper: bool = False) -> None:
        import duckdb

        self.path = _store_path(path)
        if self.path.exists() and not self.path.is_dir():
            raise ConfigurationError(f"store= names a folder; {str(self.path)!r} is a file")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a read-only file system, a folder of someone else's
            raise cannot_write(exc, self.path, at_open(exc, False)) or exc from None
        self.con = _connect(self.path, read_only=False)
        try:
            self._prepare()
        except (duckdb.Error, OSError) as exc:  # a full disk as the tables are made: one line
            self.con.close()
            refused = cannot_write(exc, self.path, at_open(exc, True))
            if refused is None:
                raise
            raise refused from None
        self._events = EventsHelper(process=helper)
        #: Keys in the store that did not end ``done``: a resumed run sends them again, and their
        #: old rows are replaced. Only a batch holding one of them pays for a DELETE.
        self._stale: set[str] = set()

    def _prepare(self) -> None:
        """The tables, the columns file and the ``events`` view (``_events.py``)."""
        # DuckDB caches table blocks up to 80% of the RAM by default, so a long run's memory grew
        # with its store. A cap alone made the checkpoint fail ("failed to pin block"); without
        # keeping insertion order (every read here says ORDER BY) it fits (bench/bench_runs.py;
        # docs/BENCHMARKS.md).
        self.con.execute(f"SET memory_limit = '{WRITER_MEMORY_LIMIT}'")
        self.con.execute("SET preserve_insertion_order = false")
        result_sql = ", ".join(
            f'"{name}" {SQL_TYPES[dtype]}' for name, dtype in RESULT_COLUMNS.items()
        )
        rebuild_sql = ", ".join(f'"{n}" {t}' for n, t in _REBUILD_COLUMNS.items())
        self.con.execute(f"CREATE TABLE IF NOT EXISTS requests ({result_sql}, {rebuild_sql})")
        # A store written before a column existed (the load columns, docs/LOAD.md) gains it.
        for name, sql_type in {
            **{n: SQL_TYPES[d] for n, d in RESULT_COLUMNS.items()},
            **_REBUILD_COLUMNS,
        }.items():
            self.con.execute(f'ALTER TABLE requests ADD COLUMN IF NOT EXISTS "{name}" {sql_type}')
        prepare_scores(self.con)
        prepare(self.path, self.con)
        #: A store written before the events left the database keeps its table (read by the view).
        self._legacy = legacy_events(self.con)
        #: Batches whose files cannot be read: left out of the view and of the merge, with a warning.
        self._unreadable = events_view(self.path, self.con, self._legacy)

    def done_keys(self) -> set[str]:
        """Keys whose request ended with status ``done``: a resumed run skips them."""
        done = set()
        for key, status in self.con.execute("SELECT key, status FROM requests").fetchall():
            if status == Status.DONE:
                done.add(key)
            else:
                self._stale.add(key)
        return done

    def rows_of(self, keys: list[str]) -> list[dict[str, Any]]:
        """The result rows of ``keys`` (a resumed run's requests done before it: ``Run.results()``
        covers every key of its plan), as a run's writer makes them: missing values None, ``row``
        as the store keeps it (text)."""
        if not keys:
            return []
        columns = ", ".join(f'"{name}"' for name in RESULT_COLUMNS)  # _prepare added any missing
        df = results_frame(
            self.con.execute(f"SELECT {columns} FROM requests WHERE list_contains(?, key)", [keys])
            .df()
            .to_dict("records")
        )
        return df.astype(object).where(df.notna(), None).to_dict("records")

    def scores_of(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The stored scores of ``keys`` (``score_store.read_scores``): a resume keeps them."""
        return read_scores(self.con, keys)

    def write(self, items: list[Finished], rows: list[dict[str, Any]]) -> None:
        """The batch's events file, then its request rows in one transaction, replacing a re-run
        key's (its old events are in another batch's file, which the view no longer shows)."""
        from .._frame import EndedStream

        batch = new_batch()
        ended = {item.request.key: EndedStream.of(item.stream) for item in items}
        self._events.submit(self.path, batch, rows[0]["run_id"] if rows else None, ended)
        try:  # meanwhile (the helper writes the events)
            requests = results_frame(rows)
            requests["row"] = requests["row"].map(str)
            _fit_bigint(requests)
            for name, values in _rebuild_values(items).items():
                requests[name] = values
            requests["batch"] = batch
        finally:
            self._events.wait()  # the rows never commit before their events are in place; and
            # the helper's answer is always taken, so the next batch never reads this one's
        con = self.con
        con.register("batch_requests", requests)
        try:
            con.execute("BEGIN TRANSACTION")
            stale = [item.request.key for item in items if item.request.key in self._stale]
            try:
                if stale:
                    if self._legacy:
                        con.execute(
                            f"DELETE FROM {self._legacy} WHERE list_contains(?, stream)", [stale]
                        )
                    con.execute("DELETE FROM requests WHERE list_contains(?, key)", [stale])
                con.execute("INSERT INTO requests BY NAME SELECT * FROM batch_requests")
                write_scores(con, rows)  # the rows' scores, with them (docs/SCORES.md)
            except BaseException:
                rollback(con)
                raise
            # Not under the ROLLBACK: a commit that fails (a full disk, as its log is written)
            # ends the transaction itself, and a ROLLBACK after it failed with "no transaction is
            # active", which was all the run said of the full disk.
            con.execute("COMMIT")
            self._stale.difference_update(stale)
        finally:
            con.unregister("batch_requests")

    def close(self) -> None:
        """Let the helper go, merge the store's small events files when there are many
        (``_events.compact``), and let the database go."""
        import duckdb

        self._events.close()
        try:
            compact(self.path, self.con, self._unreadable)
        except (duckdb.Error, OSError) as exc:  # what is written stays readable as it is
            warnings.warn(
                f"nito_nb: the store's events files were not merged ({exc}); they read as they are",
                stacklevel=2,
            )
        finally:
            self.con.close()


def rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back the transaction under way after a statement of it failed. A ROLLBACK that fails
    in turn (DuckDB had ended the transaction, or the database is unusable now) must not take the
    place of the error that says why: that one is raised."""
    import duckdb

    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass


def _rebuild_values(items: list[Finished]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {name: [] for name in _REBUILD_COLUMNS if name != "batch"}
    for item in items:
        log = item.stream.log
        out["request"].append(json.dumps(log.request, ensure_ascii=False, default=str))
        out["http_status"].append(log.status_code)
        out["headers"].append(json.dumps(log.headers, ensure_ascii=False))
        out["headers_dt_ns"].append(None if log.headers_ns is None else log.headers_ns - log.t0_ns)
        out["end_state"].append(json.dumps(log.end, ensure_ascii=False, default=str))
        out["timed"].append(log.timed)
        out["body"].append(log.body)
    return out


def stream_key(stream: StreamResults) -> str:
    """The key of a Stream that no run planned (the magic's): a hash of its request and of the
    wall time it was sent, so that the same prompt sent twice is two rows."""
    request = stream.request
    sent = {
        "params": request.get("params"),
        "base_url": request.get("base_url"),
        "sent": stream.t0_wall.isoformat(),
    }
    return request_key(str(request.get("model")), list(request.get("messages") or []), sent, 0)


def _read_column(name: str, present: set[str]) -> str:
    """The SQL that reads result column ``name``, also from rows written before the units were
    told apart (CHANGELOG.md): such a store has ``n_chunks`` (K) and no
    ``n_token_chunks``, and its ``tpot``/``output_tps`` held chunk figures for a stream without
    usage. N is usage's ``completion_tokens`` in both; a column missing altogether reads as NULL."""
    quoted = f'"{name}"'
    if name == "n_output_tokens":
        sql = (
            'COALESCE("n_output_tokens", "completion_tokens")'
            if name in present
            else '"completion_tokens"'
        )
    elif name == "n_token_chunks" and "n_chunks" in present:
        sql = 'COALESCE("n_token_chunks", "n_chunks")' if name in present else '"n_chunks"'
    elif name in ("tpot", "output_tps"):  # per token: undefined without usage (N unknown)
        sql = f'CASE WHEN "completion_tokens" IS NULL THEN NULL ELSE {quoted} END'
    elif name in present:
        return quoted
    else:
        sql = "NULL"
    return f"{sql} AS {quoted}"


def _fit_bigint(requests: pd.DataFrame) -> None:
    """A count past 64 bits (``results_frame`` keeps it exact, as a Python int) has no place in
    the table's BIGINT column: it is stored as missing, with one warning, rather than failing the
    batch; the request's events keep the exact usage that carried it."""
    import pandas as pd

    for name, dtype in RESULT_COLUMNS.items():
        if dtype != "Int64" or requests[name].dtype != object:
            continue
        big = [v is not None and not -(2**63) <= v < 2**63 for v in requests[name]]
        if any(big):
            warnings.warn(
                f"nito_nb: {sum(big)} value(s) of {name!r} do not fit in 64 bits; the store's requests"
                " table keeps them as missing (the requests' events keep the exact usage)",
                stacklevel=2,
            )
        requests[name] = pd.array(
            [None if b else v for b, v in zip(big, requests[name], strict=True)], dtype="Int64"
        )


def write_streams(
    path: str | os.PathLike[str], streams: list[StreamResults], run_id: str, row: Any = None
) -> list[str]:
    """Write ended Streams that no run planned (the ``%%nito`` magic's) to the store at ``path``,
    in one transaction, with the run's own writer and result rows; return their keys.

    The store is opened for this write and closed after it, so that between two cells nothing
    holds its lock: another process (another kernel, ``open_store``) can read or write it. That
    costs a few times a write on a kept connection (bench/bench_magic_store.py; docs/RUNS.md),
    once per cell, which is the price of not locking everyone else out of the store. A run
    of this process writing the same store meanwhile is no obstacle: DuckDB gives a second
    connection with the same settings to the same open database (the run's writer keeps going)."""
    items = [
        Finished(
            Request(
                stream_key(stream),
                row,
                str(stream.request.get("model")),
                0,
                list(stream.request.get("messages") or []),
                dict(stream.request.get("params") or {}),
            ),
            stream,
            attempts=stream.attempts,
            started_at=stream.t0_wall,
        )
        for stream in streams
    ]
    if not items:
        return []
    import duckdb

    rows = result_rows(items, run_id)
    writer = StoreWriter(path)
    try:
        writer.write(items, rows)
    except (duckdb.Error, OSError) as exc:  # a full disk: one line (the magic keeps the answer)
        refused = cannot_write(exc, writer.path, at_open(exc, True))
        if refused is None:
            raise
        raise refused from None
    finally:
        writer.close()
    return [item.request.key for item in items]


class Store:
    """A store opened for reading (``nito_nb.open_store(path)``).

    ``shared=True`` (the magic's reads) opens it with the writer's settings, which is what lets
    it read a store that a run of this same process is writing: DuckDB refuses a read-only
    connection beside a writing one in one process, and shares one with the same settings (and
    read-only, if that is how this process has it open already)."""

    def __init__(self, path: str | os.PathLike[str], *, shared: bool = False) -> None:
        self.path = _store_path(path)
        if not (self.path / DB_NAME).is_file():
            raise ConfigurationError(
                f"no run store at {str(self.path)!r}: run nito_nb.run(..., store={str(path)!r}) first"
            )
        self._con: duckdb.DuckDBPyConnection | None = _connect(
            self.path, read_only=not shared, either=shared
        )
        self._legacy = legacy_events(self.con)  # no store gains that old table: asked once
        #: Batches whose files cannot be read (``_events.events_view`` warned of each).
        self._unreadable = events_view(self.path, self.con, self._legacy)

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The store's connection; after ``close()`` one line (DuckDB said only "Connection
        already closed")."""
        if self._con is None:
            raise ConfigurationError(
                f"this Store of {str(self.path)!r} was closed: open it again with nito_nb.open_store(path)"
            )
        return self._con

    def __repr__(self) -> str:
        if self._con is None:
            return f"<nito_nb.Store {str(self.path)!r} closed>"
        (n,) = self.con.execute("SELECT count(*) FROM requests").fetchone() or (0,)
        return f"<nito_nb.Store {str(self.path)!r} {n} requests>"

    def sql(self, query: str, params: Any = None) -> pd.DataFrame:
        """Any DuckDB query over the ``requests`` and ``events`` tables, as a DataFrame."""
        query = _text_arg(query, "the query", "store.sql('select * from requests')")
        return self.con.execute(query, params).df()

    @functools.cached_property
    def _present(self) -> set[str]:
        """The columns of this store's requests table (an older store lacks the newer ones).
        Read once per opened store: the query is a noticeable part of rebuilding one stream
        (``streams``), and the magic rebuilds a cell's streams one by one."""
        return {
            name
            for (name,) in self.con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'requests'"
            ).fetchall()
        }

    @property
    def _head_columns(self) -> str:
        """The columns of the requests table that ``_log_head`` takes, in its order."""
        return f"request, http_status, headers_dt_ns, started_at, {_read_column('connect', self._present)}"

    def results(self, run_id: str | None = None) -> pd.DataFrame:
        """One row per request (``Run.results()``'s columns; ``row`` as text), in key order; a
        ``score.<name>`` column per stored score and ``score_errors`` (docs/SCORES.md)."""
        if run_id is not None:
            run_id = _text_arg(run_id, "run_id", "results()['run_id'] (or run.run_id)")
        present = self._present
        columns = ", ".join(_read_column(c, present) for c in RESULT_COLUMNS)
        where = " WHERE run_id = ?" if run_id else ""
        df = self.con.execute(
            f"SELECT {columns} FROM requests{where} ORDER BY started_at, key",
            [run_id] if run_id else [],
        ).df()
        from .scoring import with_scores

        graded = read_scores(self.con)
        out = results_frame(df.to_dict("records"))
        return with_scores(out, [graded.get(key) for key in out["key"].astype(object)], [])

    def summary(self, run_id: str | None = None) -> pd.DataFrame:
        """One row per model: see ``Run.summary()``."""
        return summary(self.results(run_id))

    def frame(self, keys: list[str] | str | None = None) -> pd.DataFrame:
        """The frame of the streams of ``keys`` (all when None), read from the events table only
        for those keys; ``df.nito`` works on it as on any frame (its ``df.attrs["nito"]`` from
        the requests table: each stream's request, start, status and ``connect``)."""
        from .._frame import COLUMNS

        columns = ", ".join(f'"{c}"' for c in COLUMNS)
        if keys is None:
            df = self.con.execute(f"SELECT {columns} FROM events ORDER BY stream, seq, part").df()
        else:
            keys = (
                [keys]
                if isinstance(keys, str)
                else list(keys)
                if isinstance(keys, Iterable)
                else [keys]
            )
            if not all(isinstance(key, str) for key in keys):  # was a TypeError, or DuckDB's own
                raise ConfigurationError(
                    f"frame takes request keys (strings, as in results()['key']), not {keys!r}"
                )
            skip = self._unreadable
            df = self.con.execute(
                f"SELECT {columns} FROM ({events_of(self.path, self.con, keys, self._legacy, skip)}) "
                "WHERE list_contains(?, stream) ORDER BY stream, seq, part",
                [keys],
            ).df()
        return self._described(df)

    def _described(self, df: pd.DataFrame) -> pd.DataFrame:
        """``frame(df)`` with ``df.attrs["nito"]`` for its streams, as a frame of the Streams
        themselves has (``_frame.inputs.log_attrs``; ``connect`` is only there)."""
        from .._frame import frame
        from .._frame.inputs import freeze, log_attrs

        out = frame(df)
        keys = out["stream"].astype(object).unique().tolist()
        attrs = {}
        for key, ended, *head in self.con.execute(
            f"SELECT key, status, {self._head_columns} FROM requests WHERE list_contains(?, key)",
            [keys],
        ).fetchall():
            attrs[key] = log_attrs(_log_head(*head), str(ended), str(self.path))
        out.attrs["nito"] = freeze(attrs)
        return out

    def streams(self, key: str) -> Stream:
        """The Stream of one request, rebuilt from its events (the same content, times, status)."""
        from .._core.log import LogFormatError
        from .._recordings import from_events

        key = _text_arg(key, "a request key", "results()['key']")
        batch = "batch" if "batch" in self._present else "NULL"
        found = self.con.execute(
            f"SELECT headers, end_state, timed, body, {batch}, {self._head_columns} FROM requests WHERE key = ?",
            [key],
        ).fetchone()
        if found is None:
            raise KeyError(f"no request with key {key!r} in this store")
        headers, end_state, timed, body, batch, *head = found
        if batch in self._unreadable:  # else a Stream with no event, as if none had arrived
            raise LogFormatError(
                f"the events of request {key!r} are in {str(self.path / 'events' / f'{batch}.parquet')!r}, "
                "which cannot be read: its Stream cannot be rebuilt (results() keeps its row)"
            )
        log = _log_head(*head)
        log.headers = json.loads(headers or "{}")
        log.timed = bool(timed)
        log.end = json.loads(end_state or "{}")
        body = bytes(body or b"")
        events = []
        start = 0
        for dt, kind, end in self.con.execute(
            f"SELECT dt_ns, kind, raw_end FROM ({events_of(self.path, self.con, [key], self._legacy)}) "
            "WHERE stream = ? AND seq >= 0 AND part = 0 ORDER BY seq",
            [key],
        ).fetchall():
            events.append(
                (int(dt), HTTP_ERROR if kind == KINDS[HTTP_ERROR] else None, body[start:end])
            )
            start = end
        return from_events(log, events)

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def _log_head(
    request: str, status: int | None, headers_dt: int | None, started: Any, connect: float | None
) -> ChunkLog:
    """A log without events, from a row of the requests table (``Store._head_columns``; its
    clock's origin 0: the send)."""
    log = ChunkLog(json.loads(request), t0_ns=0, t0_wall=_as_utc(started))
    log.status_code, log.headers_ns = status, headers_dt
    if connect is not None and connect == connect:  # the result column, in seconds (NaN: none)
        log.connect_ns = to_ns(connect)
    return log


def _as_utc(value: Any) -> _dt.datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=_dt.timezone.utc)
    return value.astimezone(_dt.timezone.utc)


def open_store(path: str | os.PathLike[str]) -> Store:
    """Open a run store for reading: ``.results()``, ``.summary()``, ``.frame(keys)``, ``.sql(q)``,
    ``.streams(key)``."""
    return Store(path)
