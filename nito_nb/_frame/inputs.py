"""What ``nito_nb.frame`` accepts, as labelled Streams: a Stream, a saved log, a recorded SSE body,
a folder, a list or a dict of those (docs/METRICS.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .._core.errors import ConfigurationError
from .._core.file_kinds import RUN_STORE_DB, run_store_folder
from .._core.log import CHUNK, DONE, ChunkLog, LogFormatError
from .._recordings import read_file
from .._stream import Stream
from .._stream_results import StreamResults

__all__ = ["EndedStream", "FrameSource"]


class FrameSource(Protocol):
    """What a frame reads of a stream: a Stream, or an EndedStream."""

    @property
    def log(self) -> ChunkLog: ...
    @property
    def ttfb(self) -> float | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def status(self) -> Any: ...
    @property
    def attempts(self) -> int: ...


@dataclass(frozen=True, slots=True)
class EndedStream:
    """An ended Stream reduced to what its frame rows need: its log and four facts.

    A Stream holds a lock and cannot leave its process; this can (pickled), and a frame built
    from it is the Stream's own frame: the rows come from the log, by the same reading. A run
    store's helper process builds its events from these (``_runs/events.py``)."""

    log: ChunkLog
    ttfb: float | None
    model: str | None
    status: str
    attempts: int

    @classmethod
    def of(cls, stream: StreamResults) -> EndedStream:
        return cls(stream.log, stream.ttfb, stream.model, str(stream.status), stream.attempts)


def _expand(
    source: Any, skipped: dict[str, str] | None
) -> Iterable[tuple[str, FrameSource, str | None]]:
    """(default label, Stream, path or None) for every stream in ``source``; a file that cannot be
    read goes to ``skipped`` (path -> reason) when it is a dict, else raises naming the file."""
    if isinstance(source, Mapping):
        for label, item in source.items():
            for _, stream, origin in _expand(item, skipped):
                yield str(label), stream, origin
        return
    if isinstance(source, (StreamResults, EndedStream, str, os.PathLike)):
        source = [source]
    elif not isinstance(source, Iterable):
        raise TypeError(
            f"nito_nb.frame takes a Stream, a path, a list or a dict of them, not {type(source).__name__}"
        )
    for position, item in enumerate(source):
        if isinstance(item, (StreamResults, EndedStream)):
            yield f"{item.model or 'stream'}#{position}", item, None
        elif isinstance(item, (str, os.PathLike)):
            path = Path(item)
            store = _run_store(path)
            if store is not None:
                message = run_store_folder(store)
                if skipped is None:
                    raise ConfigurationError(message)
                skipped[os.fspath(item)] = f"ConfigurationError: {message}"
                continue
            if path.is_dir():
                files = sorted(
                    p for p in path.iterdir() if p.suffix in (".jsonl", ".sse") and p.is_file()
                )
            elif path.is_file():
                files = [path]
            else:
                error = FileNotFoundError(
                    f"{os.fspath(item)!r} is neither a file nor a folder: nito_nb.frame takes "
                    "Streams, saved logs (.jsonl), recorded SSE files or folders of them"
                )
                if skipped is None:
                    raise error
                skipped[os.fspath(item)] = f"FileNotFoundError: {error}"
                continue
            for file in files:
                opened = _open(file, skipped)
                if opened is not None:
                    yield file.stem, opened, str(file)
        else:
            raise TypeError(
                f"nito_nb.frame cannot read a {type(item).__name__}: pass Streams, paths to saved "
                "logs (.jsonl), recorded SSE files, or folders of them"
            )


def _run_store(path: Path) -> str | None:
    """The folder of the run store that ``path`` is (a folder that holds a store's database and no
    log) or whose database it is, else None."""
    if path.is_dir():
        if (path / RUN_STORE_DB).is_file() and not any(
            p.suffix in (".jsonl", ".sse") and p.is_file() for p in path.iterdir()
        ):
            return os.fspath(path)
    elif path.name == RUN_STORE_DB and path.is_file():
        return os.fspath(path.parent)
    return None


def _open(path: Path, skipped: dict[str, str] | None) -> Stream | None:
    """The Stream of one file; an error names the file (or, when skipping, is noted and None)."""
    try:
        return read_file(path)
    except (OSError, ValueError) as exc:  # LogFormatError, a bad byte, a damaged line...
        reason = f"{type(exc).__name__}: {exc}"
        if skipped is not None:
            skipped[str(path)] = reason
            return None
        if str(path) in str(exc) or isinstance(exc, OSError):
            raise
        raise LogFormatError(f"{str(path)!r}: {reason}") from exc


def _unique_labels(labels: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for label in labels:
        unique, n = label, 1
        while unique in seen:
            n += 1
            unique = f"{label}#{n}"
        seen.add(unique)
        out.append(unique)
    return out


def _stream_attrs(stream: FrameSource, origin: str | None) -> dict[str, Any]:
    return log_attrs(stream.log, str(stream.status), origin)


def log_attrs(log: ChunkLog, status: str, origin: str | None) -> dict[str, Any]:
    """What ``df.attrs["nito"]`` says of one stream (its log, how it ended, where it came from):
    the one rule, for frames of Streams and of a Run's store alike."""
    # Kept small and JSON-friendly: pandas deep-copies attrs on many operations and Parquet stores
    # them as JSON. The messages stay in the log (they can be long).
    request = {k: v for k, v in log.request.items() if k != "messages"}
    request["n_messages"] = len(log.request.get("messages") or [])
    return json.loads(
        json.dumps(
            {
                "source": origin,
                "request": request,
                "t0_wall": log.t0_wall.isoformat(),
                "status_code": log.status_code,
                "headers_dt_ns": None if log.headers_ns is None else log.headers_ns - log.t0_ns,
                "connect_ns": log.connect_ns,
                "status": status,
            },
            default=str,
        )
    )


class _ReadOnly:
    """What FrozenAttrs and FrozenList share: read-only, so one object stands for every copy."""

    __slots__ = ()

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self

    def __copy__(self) -> Any:
        return self

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "df.attrs['nito'] is read-only (it describes the streams the frame was built from)"
        )


class FrozenAttrs(_ReadOnly, dict[str, Any]):
    """``df.attrs["nito"]``: a read-only dict (nested values too) that pandas copies for free.

    pandas deep-copies ``attrs`` into every result of ``df[col]``, ``df.loc``, ``groupby``...
    (``NDFrame.__finalize__``): with a plain dict, reading columns and a run store's writer spent
    most of their time copying it (bench/bench_frame.py; docs/BENCHMARKS.md). Being read-only, one
    object can stand for every copy; it is still a dict, so ``json.dumps`` (Parquet's metadata) and
    ``==`` read it as one."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:  # pickles (and unpickles) as a plain dict's items
        return (FrozenAttrs, (dict(self),))

    _refuse = _ReadOnly._read_only
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore[assignment]


class FrozenList(_ReadOnly, list[Any]):
    """A list inside ``df.attrs["nito"]``: read-only, and copied for free (see FrozenAttrs)."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _ReadOnly._read_only  # type: ignore[assignment]
    append = extend = insert = pop = remove = clear = sort = reverse = _ReadOnly._read_only


def freeze(value: Any) -> Any:
    """``value`` (JSON-like) with every dict a FrozenAttrs and every list a FrozenList."""
    if isinstance(value, dict):
        return FrozenAttrs({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList(freeze(v) for v in value)
    return value


def event_starts(ends: np.ndarray) -> np.ndarray:
    """Where each event's bytes start in its log's body, from where they end."""
    return np.concatenate([np.zeros(1, np.int64), ends[:-1]])


class _Snapshot:
    """One stream's log as a frame reads it: its first ``n`` events (``of``; ``build._Builder`` takes its rows),
    the rows they take from ``base - 1`` (the response row) on, and its token column."""

    __slots__ = (
        "base",
        "body",
        "chunks",
        "ends",
        "first_done",
        "kinds",
        "n",
        "rows",
        "starts",
        "times",
        "token",
    )

    @classmethod
    def of(cls, stream: FrameSource, base: int) -> _Snapshot:
        """``stream``'s log as it is now, its event 0 on the frame's row ``base``."""
        log = stream.log
        n = len(log)
        # A snapshot of the first n events, copied: a live Stream appends to its log from another
        # thread, and a buffer view of its arrays would stop them from growing (BufferError).
        # Its kinds are appended last, so the first n entries of every column are complete.
        times = np.array(log.times_ns()[:n], dtype=np.int64)
        kinds = np.frombuffer(log.kind_codes()[:n], dtype=np.uint8)
        # where each event's bytes end in the body
        ends = np.array(log.offsets()[:n], dtype=np.int64)
        # An ended stream's log takes no more events: its bytes are read in place, without the
        # log-sized copy of ``log.body`` (which a live Stream's log needs: it grows meanwhile,
        # and a view of it would make its next append raise BufferError). Nothing here keeps a
        # view of it once the frame is built.
        ended = getattr(stream, "finished", True)  # an EndedStream has no such flag: ended
        body = log.body_buffer() if ended else log.body
        return cls(n, base, times, kinds, ends, body)

    def __init__(
        self,
        n: int,
        base: int,
        times: np.ndarray,
        kinds: np.ndarray,
        ends: np.ndarray,
        body: bytes | bytearray,
    ) -> None:
        self.n, self.base, self.rows = n, base, n + 1
        self.times, self.kinds, self.ends, self.body = times, kinds, ends, body
        self.starts = event_starts(ends)
        self.chunks = int(np.count_nonzero(kinds == CHUNK))
        done_positions = np.flatnonzero(kinds == DONE)
        self.first_done = int(done_positions[0]) if len(done_positions) else n
        self.token = np.zeros(n + 1, dtype=bool)
