"""``%config Nito.store = "PATH"``: the magic's streams written to a run store, and read back.

Every Stream the magic keeps is written when it ends, with the run's own writer and result rows
(``_runs/store_writer.write_streams``), under the run id ``magic-<session>``; ``%nito history``, ``cost``
and ``last`` read the magic's streams of earlier sessions (earlier kernels) back, rebuilt from
their events (``Store.streams``). The store is never what loses a cell: a failure to write or to
read it is one line on stderr, and the answer is shown and kept anyway.
"""

from __future__ import annotations

import datetime as _dt
import sys
import uuid
from pathlib import Path
from typing import Any

from .._core.errors import one_line
from .._runs.store import Store
from .._runs.store_open import DB_NAME
from .._runs.store_writer import write_streams

__all__ = ["RUN_ID_PREFIX", "earlier_streams", "last_stream", "new_session", "write"]

#: Every row the magic writes has a run id that starts so (a run's rows, in a shared store, do not).
RUN_ID_PREFIX = "magic-"
_MAGIC_ROWS = f"starts_with(run_id, '{RUN_ID_PREFIX}')"


def new_session() -> str:
    """A run id for this session's streams: ``magic-<UTC time>-<6 hex digits>``."""
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{RUN_ID_PREFIX}{now}-{uuid.uuid4().hex[:6]}"


def write(path: str, streams: list[Any], session: str, row: Any = None) -> None:
    """Write the ended ``streams`` to the store; a failure is one line, never an exception (the
    answer is already shown and kept in ``_nito``)."""
    try:
        write_streams(path, streams, session, row)
    except Exception as exc:  # a busy store, a full disk, a broken file: say it, keep the cell
        print(
            f"nito: not written to the store {path!r} ({one_line(exc)}); the answer is kept in _nito.",
            file=sys.stderr,
        )


def _read(path: str, query: str, params: list[Any], instead: str) -> list[Any]:
    """The Streams of the keys ``query`` selects, rebuilt; [] (with one line) if it cannot be read."""
    if not (Path(path) / DB_NAME).is_file():  # nothing written yet
        return []
    try:
        # shared: also while a nito_nb.run of this kernel writes the same store (see Store).
        with Store(path, shared=True) as store:
            keys = [key for (key,) in store.con.execute(query, params).fetchall()]
            return [store.streams(key) for key in keys]
    except Exception as exc:
        print(
            f"nito: cannot read the store {path!r} ({one_line(exc)}); {instead}.", file=sys.stderr
        )
        return []


def earlier_streams(path: str, session: str) -> list[Any]:
    """The magic's streams in the store but this session's, oldest first."""
    return _read(
        path,
        f"SELECT key FROM requests WHERE {_MAGIC_ROWS} AND run_id <> ? ORDER BY started_at, key",
        [session],
        "only this session's streams are listed",
    )


def last_stream(path: str) -> Any:
    """The magic's last stream in the store, rebuilt, or None."""
    found = _read(
        path,
        f"SELECT key FROM requests WHERE {_MAGIC_ROWS} ORDER BY started_at DESC, key LIMIT 1",
        [],
        "nothing to show",
    )
    return found[0] if found else None
