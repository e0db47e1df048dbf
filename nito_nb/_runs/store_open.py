"""Opening a run store's database: the folder ``store=`` names, one connection to
``runs.duckdb`` with the project's settings, and one clear line when it cannot be had.

One process writes a store at a time: DuckDB locks the file, and a second process (writing or
reading) gets a clear error instead of a corrupt file. Apart from ``store_writer.py`` (a run's
writes) and ``store.py`` (reading), which both open the store through it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._core.errors import ConfigurationError
from .._core.file_kinds import RUN_STORE_DB
from .store_errors import StoreBusy, cannot_open, cause_of

if TYPE_CHECKING:
    import duckdb

__all__ = ["DB_NAME", "DUCKDB_CONFIG", "connect", "store_path"]

DB_NAME = RUN_STORE_DB
#: Every connection of the project: DuckDB otherwise downloads an extension it needs from
#: extensions.duckdb.org (a SQLite file named runs.duckdb fetched the sqlite scanner), a host the
#: user never chose. The store needs none (Parquet is built in). One config for every connection:
#: DuckDB refuses a second connection to an open file with other settings.
DUCKDB_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}


def store_path(value: Any) -> Path:
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


def connect(path: Path, read_only: bool, either: bool = False) -> duckdb.DuckDBPyConnection:
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
