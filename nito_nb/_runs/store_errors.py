"""What a run store says when the file system or its database fails: one line, typed.

DuckDB and the Parquet writer report a full disk, a read-only file system or a damaged file in
their own words, and sometimes under another error: on a full disk a run stopped with
``TransactionContext Error: cannot rollback - no transaction is active``, the "No space left on
device" only in that error's ``__context__``. ``cause_of`` looks through the whole chain (the
error, its cause and its context) for what the operating system said; the messages here say
what happened, where (the store's folder) and what to do.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from .._core.errors import NitoError, one_line

__all__ = ["StoreBusy", "StoreError", "at_open", "cannot_open", "cannot_write", "cause_of"]


class StoreError(NitoError):
    """A run store cannot be written or read: its disk is full, its file system is read-only or
    its folder not writable, or its database is damaged. ``path``: the store's folder."""

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class StoreBusy(StoreError):
    """Another process is writing the store (or this one already is)."""


#: What the operating system says (errno), by the cause each stands for.
_CAUSES = {
    "full": (errno.ENOSPC, *((errno.EDQUOT,) if hasattr(errno, "EDQUOT") else ())),
    "read-only": (errno.EROFS,),
    "denied": (errno.EACCES, errno.EPERM),
    "under-a-file": (errno.ENOTDIR,),  # store="notes.txt/sub": was a raw NotADirectoryError
}


def cause_of(error: BaseException) -> str | None:
    """``"full"``, ``"read-only"``, ``"denied"`` or ``"under-a-file"`` when ``error``, or an error
    it was raised from or during, is the file system saying so (an ``OSError``'s errno, or its words in DuckDB's or
    pyarrow's message, which carry no errno); else None."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for cause, codes in _CAUSES.items():
            if isinstance(current, OSError) and current.errno in codes:
                return cause
            if any(os.strerror(code) in str(current) for code in codes):
                return cause
        current = current.__cause__ or current.__context__
    return None


def cannot_write(error: BaseException, path: Path, then: str) -> StoreError | None:
    """The one line for a store that the file system refuses to write (``then``: what to do,
    which depends on when it happened), or None when ``error`` is something else."""
    cause = cause_of(error)
    where = repr(str(path))
    if cause == "full":
        what = f"the disk holding the run store {where} is full ({os.strerror(errno.ENOSPC)})"
    elif cause == "read-only":
        what = f"the run store {where} cannot be written: its file system is read-only"
    elif cause == "denied":
        what = f"the run store {where} cannot be written: no permission to write in that folder"
    elif cause == "under-a-file":
        what = f"the run store {where} cannot be made: a part of its path is a file, not a folder"
    else:
        return None
    return StoreError(f"{what}; {then}", path=path)


def at_open(error: BaseException, readable: bool) -> str:
    """What to do about a store that the file system refuses to write as it is opened;
    ``readable``: it holds a database, which ``open_store`` reads without writing."""
    if cause_of(error) == "full":
        return "free some space there, or give store= another folder"
    return "give store= a folder you can write to" + (
        " (nito_nb.open_store reads this one as it is)" if readable else ""
    )


def cannot_open(error: BaseException, path: Path, db: Path) -> StoreError:
    """The one line for a store's database that DuckDB cannot open for writing or reading."""
    refused = cannot_write(error, path, at_open(error, db.is_file()))
    if refused is not None:
        return refused
    # DuckDB's own words, without the query it adds under them: a checksum that does not match,
    # a file cut short ("Could not read enough bytes"), a version it cannot read...
    why = one_line(error, with_type=False).split(" LINE 1:")[0]
    damaged = any(word in why for word in _DAMAGED)
    return StoreError(
        f"the run store's database {str(db)!r} cannot be opened ({why})"
        + ("; it is damaged or cut short" if damaged else "")
        + f": move the folder {str(path)!r} away, or give store= another folder",
        path=path,
    )


#: DuckDB's words for a database file that is damaged or cut short.
_DAMAGED = (
    "Corrupt database",
    "checksum",
    "Could not read enough bytes",
    "not a valid DuckDB database",
)
