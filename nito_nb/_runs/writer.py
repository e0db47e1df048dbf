"""A Run's results: its writer thread turns finished Streams into result rows, written in batches.

``RunWriter`` owns them: the queue of finished requests, the result rows, the Streams kept in
memory, the store's writer and its failure. The sender (``dispatch.py``, on the loop thread)
``put``s each finished request (a ``Finished``) and says ``end()`` once it is done; the writer's
thread takes them in batches of at most ``BATCH_SIZE`` or ``BATCH_SECONDS``, turns each batch
into result rows (``results.py``: the frame's own metrics), writes them to the store when there
is one (``store_writer.py``; the Streams are then dropped, else kept for ``run.frame()``, frozen:
``_recordings.freeze_ended``) and updates the progress display (a live output: its own throttle
says when it renders). Whoever reads takes a copy (``rows``; ``kept_streams``, ``kept_ended``:
thawed anew); ``frame_of`` makes the chunk-level frame of what one
run or several (a sweep's) kept.

With a store, the next batch is taken as soon as the store has this batch's events file, when a
whole one waits: the helper writes its events while this batch's rows commit
(``StoreWriter.write``'s ``ahead``).

When the store fails (a full disk, a file system turned read-only), the run stops with one line
saying why, where and how to resume (``store_errors.py``), and every batch from the failed one
on is kept in memory, rows and Streams: ``run.results()`` and ``run.frame()`` still have every
request that was answered (they were empty after a full disk).
"""

from __future__ import annotations

import collections
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._core.errors import ConfigurationError, one_line
from .._recordings import Frozen, freeze_ended, thaw
from . import gc as _gc
from .gil import loop_first
from .results import Finished, LoadInfo, result_rows
from .scoring import SCORES
from .store_errors import StoreError, cannot_write, cause_of

if TYPE_CHECKING:
    import pandas as pd

    from .._display.sink import LiveOutput
    from .._frame.inputs import EndedStream
    from .._stream_results import StreamResults
    from .plan import Request
    from .scoring import Scorer
    from .store_writer import StoreWriter

__all__ = ["BATCH_SECONDS", "BATCH_SIZE", "MAX_WAITING", "RunWriter", "frame_of"]

#: Finished requests are written (and their metrics computed) in batches of at most this many,
#: or after BATCH_SECONDS, whichever comes first: a killed process loses at most two batches
#: (the one committing, the next one taken ahead) plus what is in flight. The batch's frame is
#: the events helper's peak memory (about 0.4 MB per sim/chat stream, measured with
#: bench/bench_runs.py), so the batch stays small.
BATCH_SIZE = 128
BATCH_SECONDS = 1.0
#: When this many finished requests wait for the writer, the workers wait too before taking the
#: next request (back-pressure, ``full``): memory stays bounded when the writer is the slower side.
MAX_WAITING = 2 * BATCH_SIZE
#: How often the writer's thread looks for finished requests when no batch filled meanwhile
#: (seconds): rows and progress are at most this late, besides BATCH_SECONDS.
WAKE_SECONDS = BATCH_SECONDS / 4
#: Put on the queue by ``end()``: the loop thread has ended.
_END = object()


class RunWriter:
    """The results of one run. ``store``: the store's folder, opened now (None: in memory only);
    ``phases``: a load run's measured window (each row's phase); ``resumable``: a run the same
    call resumes (a load run is not: what a failed store's message says); ``scorer``: the run's
    scores, each row graded as it is written (``scoring.py``)."""

    def __init__(
        self,
        store: str | None,
        run_id: str,
        phases: LoadInfo | None,
        resumable: bool,
        scorer: Scorer | None = None,
    ) -> None:
        self.run_id = run_id
        self.scorer = scorer
        self.phases = phases
        self.resumable = resumable
        self.store_path = store
        self.store: StoreWriter | None = None
        if store is not None:
            from .store_writer import StoreWriter

            self.store = StoreWriter(store, helper=True)  # events built beside, not under the GIL
        #: The store's failure (a full disk...), once it failed: the rest stays in memory.
        self.store_failure: BaseException | None = None
        self._lock = threading.Lock()  # the rows and Streams: written here, copied by readers
        # The finished requests the writer has not taken, and what wakes it: a batch is full, or
        # the end. Not a queue.SimpleQueue, whose put woke the writer's thread for every request:
        # a thread switch and two GIL hand-overs each, on the sending loop's thread
        # (bench/bench_runs_floor.py). The writer also looks every WAKE_SECONDS.
        self._waiting: collections.deque[Any] = collections.deque()
        self._wake = threading.Event()
        self._rows: list[dict[str, Any]] = []
        # key -> Stream frozen (``_recordings.freeze_ended``), without a store or once it failed
        self._streams: dict[str, Any] = {}
        # The next batch, taken while the store wrote the one before (_take_next), and whether the
        # end came with it.
        self._next_batch: list[Finished] | None = None
        self._next_batch_over = False

    # -- before the run starts -------------------------------------------------------------------

    def done_keys(self) -> set[str]:
        """The keys the store has done (a resumed run skips them); none without a store."""
        if self.store is None:
            return set()
        try:
            return self.store.done_keys()
        except BaseException:
            self.close()
            raise

    def keep_done_before(self, requests: list[Request]) -> None:
        """Take the store's rows of ``requests`` (done before this run: a resume skips them) among
        the results, so that ``rows()`` covers every key of the plan: a resumed run's results
        held only what it sent (59 of 100 rows; a fully done store, none)."""
        if self.store is None or not requests:
            return
        by_key = {request.key: request for request in requests}
        try:
            rows = self.store.rows_of(list(by_key))
        except BaseException:
            self.close()
            raise
        try:
            graded = self.store.scores_of(list(by_key))  # kept: not graded again (docs/SCORES.md)
        except BaseException:
            self.close()
            raise
        for row in rows:
            row["row"] = by_key[row["key"]].row  # the input's label, as this run's rows have it
            row[SCORES] = graded.get(row["key"])
        with self._lock:
            self._rows.extend(rows)

    def close(self) -> None:
        """Let the store go: for a run that failed to start (its thread closes it otherwise)."""
        if self.store is not None:
            self.store.close()

    def start(
        self,
        progress: LiveOutput | None,
        fail: Callable[[BaseException], None],
        ended: Callable[[], None],
    ) -> None:
        """Start the writer's thread: ``progress`` is updated as rows come, and finished at the
        end; ``fail(error)`` stops the run (the store failed); ``ended()`` is called last."""
        _gc.begin()  # the thread's end calls _gc.end()
        threading.Thread(
            target=self._write_loop,
            args=(progress, fail, ended),
            name="nito_nb-run-writer",
            daemon=True,
        ).start()

    # -- the loop thread's side ------------------------------------------------------------------

    def put(self, item: Finished) -> None:
        """A request ended: its result is written with the next batch."""
        self._waiting.append(item)
        if len(self._waiting) >= BATCH_SIZE:
            self._wake.set()

    def end(self) -> None:
        """No request will end any more: the last batch is written and the thread ends."""
        self._waiting.append(_END)
        self._wake.set()

    @property
    def waiting(self) -> int:
        """Finished requests not yet taken by the writer's thread."""
        return len(self._waiting)

    def full(self) -> bool:
        """Whether the sender should wait before taking another request (``MAX_WAITING``)."""
        return len(self._waiting) > MAX_WAITING

    # -- the readers' side -----------------------------------------------------------------------

    def rows(self) -> list[dict[str, Any]]:
        """The result rows so far, in the order the requests ended (a copy)."""
        with self._lock:
            return list(self._rows)

    def kept_streams(self) -> dict[str, StreamResults]:
        """The Streams kept in memory, by request key (a copy): all of them without a store,
        those from the failed batch on when the store failed, else none."""
        with self._lock:
            kept = dict(self._streams)
        return {key: thaw(one) for key, one in kept.items()}  # new ones each time: none kept

    def kept_ended(self) -> dict[str, EndedStream]:
        """What the frame of each Stream ``kept_streams`` gives needs of it (its log and four
        facts), by request key: of a frozen one, its log alone is thawed, in a fourth of the time
        of the whole Stream (10,000 sim/tools requests: 0.3-0.4 s, against 1.1-1.7 s)."""
        from .._frame.inputs import EndedStream

        with self._lock:
            kept = dict(self._streams)
        out = {}
        for key, one in kept.items():
            if isinstance(one, Frozen):
                log = one.log()
                out[key] = EndedStream(log, one.ttfb, one.model, str(one.status), log.attempts)
            else:
                out[key] = EndedStream.of(one)
        return out

    def set_scores(self, graded: dict[str, dict[str, Any]]) -> None:
        """Put scores in the rows of their keys (``{key: {name: (value, error, describe)}}``),
        beside those they have: a batch score's at the end of the run, or a rescore's. Each row's
        scores are replaced by a new dict, never changed in place (a reader holds the old one)."""
        with self._lock:
            for row in self._rows:
                new = graded.get(row["key"])
                if new:
                    row[SCORES] = {**(row.get(SCORES) or {}), **new}

    @property
    def n_rows(self) -> int:
        """How many requests have their result row."""
        return len(self._rows)

    # -- the writer's thread ---------------------------------------------------------------------

    def _write_loop(
        self,
        progress: LiveOutput | None,
        fail: Callable[[BaseException], None],
        ended: Callable[[], None],
    ) -> None:
        """Until the loop thread's ``end()``; then the run has ended."""
        batch: list[Finished] = []
        first = 0.0
        over = False
        try:
            while not over or batch:
                if not self._waiting and not over and len(batch) < BATCH_SIZE:
                    self._wake.wait(WAKE_SECONDS)
                self._wake.clear()  # before taking: what is put after it is seen next time round
                over = self._take(batch) or over
                if batch and not first:
                    first = time.monotonic()
                now = time.monotonic()
                if batch and (over or len(batch) >= BATCH_SIZE or now - first >= BATCH_SECONDS):
                    self._flush(batch, fail)
                    batch, first = [], 0.0
                    # taken while the batch was written (_take_next)
                    if self._next_batch is not None:
                        batch, self._next_batch = self._next_batch, None
                        first = time.monotonic()
                        over = over or self._next_batch_over
                _gc.settle()  # what finished requests left is old now: no full GC pass walks it again
                if progress is not None:
                    progress.update()  # throttled by the display itself (progress.MAX_UPDATES_PER_S)
        # not the store (_flush keeps its failures): stop sending, say why
        except BaseException as exc:
            fail(exc)
            over = over or self._next_batch_over
            # Let the loop thread end; the failure may come from the last flush, after its end()
            # (waiting for a second one hung the run forever).
            while not over:
                if not self._waiting:
                    self._wake.wait(WAKE_SECONDS)
                self._wake.clear()
                over = self._take([])
        finally:
            _gc.end()
            if self.store is not None:
                try:
                    self.store.close()
                except Exception as exc:  # the run must still end (its waiters): say it instead
                    fail(self.store_failed(exc))
            ended()

    def _take(self, batch: list[Finished]) -> bool:
        """Move the finished requests waiting into ``batch``, up to BATCH_SIZE; True once the
        end was among them."""
        waiting = self._waiting
        while waiting and len(batch) < BATCH_SIZE:
            item = waiting.popleft()
            if item is _END:
                return True
            batch.append(item)
        return False

    def _take_next(self) -> list[Finished] | None:
        """The next batch, when a whole one waits or the run's last one does (the end is in):
        taken now, for the store to hand its events to the helper while it commits the batch
        before (``StoreWriter.write``). The loop flushes it next (``_next_batch``). The last
        batch taken ahead shortens the run's tail, where nothing else is left to overlap."""
        waiting = self._waiting
        if self._next_batch is not None or not waiting:
            return None
        if len(waiting) < BATCH_SIZE and waiting[-1] is not _END:  # _END is the last put
            return None
        following: list[Finished] = []
        self._next_batch_over = self._take(following)
        self._next_batch = following
        return following or None  # empty: only the end came, and the loop ends with it

    def _flush(self, batch: list[Finished], fail: Callable[[BaseException], None]) -> None:
        with loop_first():  # the sending loop keeps its turns while the rows are made (gil.py)
            rows = result_rows(batch, self.run_id, self.phases)
            if self.scorer is not None and self.scorer.plain:  # docs/SCORES.md: as they finish
                self.scorer.grade(rows, [item.stream for item in batch], self.scorer.plain)
            kept = None
            if self.store is None or self.store_failure is not None:
                # Kept until the run is dropped, and ended: frozen, their logs packed (a 25th of
                # the body; zlib releases the GIL meanwhile) and their states pickled into one
                # bytes object each (``_recordings.freeze_ended``). Here, before anyone else can read
                # them: the loop thread is done with them (bench/bench_runs_floor.py's memory:
                # 75.1 KiB kept per sim/chat request before packing, its body 51.6; 13.0 KiB per
                # sim/tools request before freezing, its body 6.0).
                kept = freeze_ended([item.stream for item in batch])
        failed = None
        if self.store is not None and self.store_failure is None:
            try:
                self.store.write(batch, rows, self._take_next)
            # the store failed: this batch and the next ones stay in memory
            except Exception as exc:
                failed = self.store_failure = self.store_failed(exc)
                kept = freeze_ended([item.stream for item in batch])
        with self._lock:
            self._rows.extend(rows)
            if kept is not None:  # else the store has them
                for item, one in zip(batch, kept, strict=True):
                    self._streams[item.request.key] = one
        if failed is not None:
            fail(failed)  # the requests in flight are stopped, and kept as they come back

    def store_failed(self, error: BaseException) -> BaseException:
        """The error that stops a run whose store failed: what happened, where, what to do, and
        that the run's results are in memory. Not the store's at all (a bug of ours): ``error`` itself."""
        import duckdb

        assert self.store is not None
        path = self.store.path
        kept = "this run keeps its results in memory meanwhile (run.results(), run.frame())"
        if self.resumable:
            how = (
                f"run the same call again with store={str(path)!r} to resume it: the requests done in the store are "
                f"skipped, the others sent; {kept}"
            )
        else:  # a load run measures: it is never resumed (runner._load_requests)
            how = f"run the load run again (a load run is not resumed); {kept}"
        # A run still writing when Python exits (a script that ended without run.wait()): DuckDB
        # then refuses every query that would run Python code, and its store is not to blame.
        if sys.is_finalizing() or "interpreter is shutting down" in str(error):
            return StoreError(
                f"the run was cut short by Python's exit before it ended; {how.split('; ')[0]}",
                path=path,
            )
        first = {
            "full": "free some space there",
            "read-only": "make it writable again",
            "denied": "allow writing there",
        }.get(cause_of(error) or "")
        refused = cannot_write(error, path, f"{first}, then {how}")
        if refused is not None:
            return refused
        if isinstance(error, (duckdb.Error, OSError)):
            return StoreError(
                f"the run store {str(path)!r} failed ({one_line(error)}); once that is mended, {how}",
                path=path,
            )
        return error


def frame_of(writers: list[RunWriter]) -> pd.DataFrame:
    """One chunk-level frame of the finished streams of one run's or several runs' writers
    (``stream`` = the request key; a load run's keys hold its run id, so the runs of a sweep never
    share one): from their store when they have one (a sweep's runs share theirs), else from the
    Streams they kept; a run whose store failed kept the Streams from then on, and those are
    added to what the store has. One frame, not a concat of frames: ``df.attrs`` holds what each
    stream's rows need (``df.nito``). The one rule of ``Run.frame()`` and ``Sweep.frame()``."""
    from .._frame import frame

    kept: dict[str, EndedStream] = {}
    for writer in writers:
        kept.update(writer.kept_ended())
    stores = {writer.store_path for writer in writers}
    if len(stores) == 1 and (path := stores.pop()) is not None:
        from .store import open_store

        keys = [row["key"] for writer in writers for row in writer.rows() if row["key"] not in kept]
        if not kept:
            with open_store(path) as store:
                return store.frame(keys)
        if not keys:  # the store failed at its first batch: nothing to read there
            return frame(kept)
        with open_store(path) as store:
            return _joined(store.frame(keys), frame(kept))
    if any(writer.store_path is not None for writer in writers):
        raise ConfigurationError(
            "these runs keep their streams in different stores: frame each run apart"
        )
    return frame(kept)


def _joined(stored: pd.DataFrame, kept: pd.DataFrame) -> pd.DataFrame:
    """The frame of a store's streams and the frame of Streams kept in memory, as one frame: the
    rows of both (dtypes restored: the two ``stream`` columns have other categories) and the
    ``df.attrs["nito"]`` of both."""
    import pandas as pd

    from .._frame import frame
    from .._frame.inputs import freeze

    out = frame(pd.concat([stored, kept], ignore_index=True))
    out.attrs = {"nito": freeze({**stored.attrs["nito"], **kept.attrs["nito"]})}
    return out
