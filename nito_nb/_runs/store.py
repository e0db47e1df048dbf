"""Reading a run store (``nito_nb.open_store``): ``Store``'s results, summary, frame, streams, sql.

The store is a folder holding one DuckDB database (``runs.duckdb``) and an ``events`` folder.
``requests`` (a table): one row per request (the result columns of ``Run.results()``, plus what
rebuilds its Stream: the request, the response's status and headers, how it ended, and the batch
whose events file holds its events). ``events`` (a view over ``events/*.parquet``, see
``_events.py``): the frame rows of every stream (``stream`` = the request key), plus each event's
arrival time and the end of its bytes in the request's ``body``, so that ``Store.streams(key)``
gives back the Stream itself.

Written by ``store_writer.py`` (a run's writes, the magic's), opened by ``store_open.py``; apart
from them because a reader never writes (it opens the store read-only unless ``shared``).
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._core.errors import ConfigurationError
from .._core.log import HTTP_ERROR, KINDS, ChunkLog
from .._core.units import to_ns
from .events import events_of, events_view, legacy_events
from .results import RESULT_COLUMNS, results_frame, summary
from .score_store import read_scores
from .store_open import DB_NAME, connect, store_path

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from .._stream import Stream

__all__ = ["Store", "open_store"]


def _decoded(body: bytes, coding: str | None, key: str, limit: int) -> bytes:
    """A stored body as it arrived, up to its first ``limit`` bytes (where its last event ends):
    ``bodies.decoded``, whose failures are one line naming the request."""
    from .._core.log import LogFormatError
    from .bodies import UnknownCoding, decoded

    try:
        return decoded(body, coding, limit)
    except UnknownCoding:
        raise LogFormatError(
            f"the body of request {key!r} is coded {coding!r}, which this version of nito_nb "
            "does not read: upgrade nito_nb (results() keeps its row)"
        ) from None
    except ValueError as exc:
        raise LogFormatError(
            f"the stored body of request {key!r} cannot be decompressed ({exc}): its Stream "
            "cannot be rebuilt (results() keeps its row)"
        ) from None


def _text_arg(value: Any, what: str, example: str) -> str:
    """``value`` when it is a str, else one line: DuckDB's ConversionException said only that
    it could not compare a VARCHAR with an INTEGER."""
    if not isinstance(value, str):
        raise ConfigurationError(f"{what} is a string, as in {example}, not {value!r}")
    return value


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


class Store:
    """A store opened for reading (``nito_nb.open_store(path)``).

    ``shared=True`` (the magic's reads) opens it with the writer's settings, which is what lets
    it read a store that a run of this same process is writing: DuckDB refuses a read-only
    connection beside a writing one in one process, and shares one with the same settings (and
    read-only, if that is how this process has it open already)."""

    def __init__(self, path: str | os.PathLike[str], *, shared: bool = False) -> None:
        self.path = store_path(path)
        if not (self.path / DB_NAME).is_file():
            raise ConfigurationError(
                f"no run store at {str(self.path)!r}: run nito_nb.run(..., store={str(path)!r}) first"
            )
        self._con: duckdb.DuckDBPyConnection | None = connect(
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
        coding = "body_coding" if "body_coding" in self._present else "NULL"
        found = self.con.execute(
            f"SELECT headers, end_state, timed, body, {coding}, {batch}, {self._head_columns} "
            "FROM requests WHERE key = ?",
            [key],
        ).fetchone()
        if found is None:
            raise KeyError(f"no request with key {key!r} in this store")
        headers, end_state, timed, body, coding, batch, *head = found
        if batch in self._unreadable:  # else a Stream with no event, as if none had arrived
            raise LogFormatError(
                f"the events of request {key!r} are in {str(self.path / 'events' / f'{batch}.parquet')!r}, "
                "which cannot be read: its Stream cannot be rebuilt (results() keeps its row)"
            )
        log = _log_head(*head)
        log.headers = json.loads(headers or "{}")
        log.timed = bool(timed)
        log.end = json.loads(end_state or "{}")
        found_events = self.con.execute(
            f"SELECT dt_ns, kind, raw_end FROM ({events_of(self.path, self.con, [key], self._legacy)}) "
            "WHERE stream = ? AND seq >= 0 AND part = 0 ORDER BY seq",
            [key],
        ).fetchall()
        # no more of the body than its events take: a store from elsewhere is not trusted to
        # decompress to a sane size
        limit = max((int(end) for _, _, end in found_events), default=0)
        body = _decoded(bytes(body or b""), coding, key, limit)
        events = []
        start = 0
        for dt, kind, end in found_events:
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
