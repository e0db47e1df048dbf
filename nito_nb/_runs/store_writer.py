"""Writing a run store: ``StoreWriter`` (a run's writes, owned by its writer thread) and
``write_streams`` (the ``%%nito`` magic's Streams, which no run planned).

It makes the ``requests`` table (the result columns, plus what rebuilds each Stream:
``_REBUILD_COLUMNS``) and, through ``events.py``, the events files and their view; the store's
layout is described in ``store.py``, which reads it. A batch of finished requests is written
as one events file, then its rows in one transaction, with the rows of a re-run key replaced
(resume re-runs what was not done). Apart from the reader: only a run and the magic write.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._core.errors import ConfigurationError
from .._core.status import Status
from .bodies import CODING, coded
from .events import (
    SQL_TYPES,
    compact,
    events_view,
    legacy_events,
    new_batch,
    prepare,
)
from .events_helper import EventsHelper
from .plan import Request, request_key
from .results import RESULT_COLUMNS, Finished, result_rows, results_frame
from .score_store import prepare_scores, read_scores, write_scores
from .store_errors import at_open, cannot_write
from .store_open import connect, store_path

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from .._stream_results import StreamResults

__all__ = ["StoreWriter", "stream_key", "write_streams"]

WRITER_MEMORY_LIMIT = "256MB"

#: What the requests table keeps beyond the result columns, to rebuild each Stream.
_REBUILD_COLUMNS = {
    "request": "VARCHAR",  # JSON: model, messages, params, base_url (never a key: see _client)
    "http_status": "INTEGER",
    "headers": "VARCHAR",  # JSON, without credential headers (ChunkLog.clean_headers)
    "headers_dt_ns": "BIGINT",
    "end_state": "VARCHAR",  # JSON: the log's end (status, exception, message)
    "timed": "BOOLEAN",
    "body": "BLOB",  # the body's bytes as they arrived (every event's raw bytes, in order)
    "body_coding": "VARCHAR",  # how ``body`` is compressed (bodies.py); NULL: as it arrived
    "batch": "VARCHAR",  # its events file (_events.py); NULL in a store written before them
}


class StoreWriter:
    """The writing side, owned by one run's writer thread; ``helper``: the events files are
    written by a helper process (``_events.py``), else by the caller."""

    def __init__(self, path: str | os.PathLike[str], *, helper: bool = False) -> None:
        import duckdb

        self.path = store_path(path)
        if self.path.exists() and not self.path.is_dir():
            raise ConfigurationError(f"store= names a folder; {str(self.path)!r} is a file")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a read-only file system, a folder of someone else's
            raise cannot_write(exc, self.path, at_open(exc, False)) or exc from None
        self.con = connect(self.path, read_only=False)
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
        #: The next batch and its name, when its events were submitted ahead (``write``).
        self._ahead: tuple[list[Finished], str] | None = None

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

    def write(
        self,
        items: list[Finished],
        rows: list[dict[str, Any]],
        ahead: Callable[[], list[Finished] | None] | None = None,
    ) -> None:
        """The batch's events file, then its request rows in one transaction, replacing a re-run
        key's (its old events are in another batch's file, which the view no longer shows).

        ``ahead``: once this batch's events file is in place, the next batch (or None), whose
        events the helper then writes while this batch's rows are committed: the helper waited
        idle for each commit, and the commit for the helper (``bench/bench_runs_floor.py``).
        Its own ``write`` follows; its rows never commit before its file is in place."""
        run_id = rows[0]["run_id"] if rows else None
        if self._ahead is not None and self._ahead[0] is items:
            batch = self._ahead[1]  # submitted while the batch before was committed
        else:
            if self._ahead is not None:  # another batch was submitted: its answer first
                self._events.wait()
            batch = self._submit(items, run_id)
        self._ahead = None
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
        following = ahead() if ahead is not None else None
        if following:
            try:
                self._ahead = (following, self._submit(following, run_id))
            except Exception:  # written in its own write, which says what failed, if it does again
                self._ahead = None
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

    def _submit(self, items: list[Finished], run_id: str | None) -> str:
        """Hand the batch's events to the helper (or write them here); return the batch's name."""
        from .._frame import EndedStream

        batch = new_batch()
        ended = {item.request.key: EndedStream.of(item.stream) for item in items}
        self._events.submit(self.path, batch, run_id, ended)
        return batch

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
        out["body"].append(coded(log.body))
        out["body_coding"].append(CODING)
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
