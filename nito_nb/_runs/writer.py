"""The Run's writer thread: finished Streams become result rows, written in batches.

The loop thread (``_runner.py``) puts each finished request (a ``Finished``) on the Run's queue;
this thread takes them in batches of at most ``BATCH_SIZE`` or ``BATCH_SECONDS``, turns each
batch into result rows (``_results.py``: the frame's own metrics), writes them to the store when
there is one (``_store.py``; the Streams are then dropped, else kept for ``run.frame()``) and
refreshes the progress display at most ``MAX_UPDATES_PER_S`` times a second. ``END`` on the
queue says the loop thread is done.

When the store fails (a full disk, a file system turned read-only), the run stops with one line
saying why, where and how to resume (``_store_errors.py``), and every batch from the failed one
on is kept in memory, rows and Streams: ``run.results()`` and ``run.frame()`` still have every
request that was answered (they were empty after a full disk).
"""

from __future__ import annotations

import queue
import time
from typing import TYPE_CHECKING

from .._core.errors import one_line
from .._display.throttle import Throttle
from . import gc as _gc
from .gil import loop_first
from .results import Finished, result_rows
from .store_errors import StoreError, cannot_write, cause_of

if TYPE_CHECKING:
    from .runner import Run

__all__ = ["BATCH_SECONDS", "BATCH_SIZE", "END", "MAX_UPDATES_PER_S", "MAX_WAITING", "write_loop"]

#: The progress display is refreshed at most this often.
MAX_UPDATES_PER_S = 4.0
#: Finished requests are written (and their metrics computed) in batches of at most this many,
#: or after BATCH_SECONDS, whichever comes first: a killed process loses at most one batch
#: plus what is in flight. The batch's frame is the events helper's peak memory (about 0.4 MB
#: per sim/chat stream, measured with bench/bench_runs.py), so the batch stays small.
BATCH_SIZE = 128
BATCH_SECONDS = 1.0
#: When this many finished requests wait for the writer, the workers wait too before taking the
#: next request (back-pressure): memory stays bounded when the writer is the slower side.
MAX_WAITING = 2 * BATCH_SIZE
#: Put on the queue by the loop thread once it has ended.
END = object()


def write_loop(run: Run) -> None:
    """The writer thread of ``run``, until the loop thread's ``END``; then the run has ended."""
    batch: list[Finished] = []
    first = 0.0
    updates = Throttle(MAX_UPDATES_PER_S)  # the progress panel's rate, as every live view's
    ended = False
    try:
        while not ended:
            try:
                item = run._queue.get(timeout=BATCH_SECONDS / 2)
            except queue.Empty:
                item = None
            if item is END:
                ended = True
            elif item is not None:
                if not batch:
                    first = time.monotonic()
                batch.append(item)
            now = time.monotonic()
            if batch and (ended or len(batch) >= BATCH_SIZE or now - first >= BATCH_SECONDS):
                _flush(run, batch)
                batch = []
            _gc.settle()  # what finished requests left is old now: no full GC pass walks it again
            if run.progress is not None and updates.ready():
                run.progress.update()
                updates.done()
    except BaseException as exc:  # not the store (_flush keeps its failures): stop sending, say why
        run._fail_run(exc)
        # Let the loop thread end; the failure may come from the last flush, after its END
        # (waiting for a second one hung the run forever).
        while not ended and run._queue.get() is not END:
            pass
    finally:
        _gc.end()
        if run._writer is not None:
            try:
                run._writer.close()
            except Exception as exc:  # the run must still end (its waiters): say it instead
                run._fail_run(store_failed(run, exc))
        run.ended = time.monotonic()
        if run.progress is not None:
            run.progress.finish()
        run._finished.set_result(None)


def _flush(run: Run, batch: list[Finished]) -> None:
    with loop_first():  # the sending loop keeps its turns while the rows are made (_gil.py)
        rows = result_rows(batch, run.run_id, run._phases)
    failed = None
    if run._writer is not None and run._store_failure is None:
        try:
            run._writer.write(batch, rows)
        except Exception as exc:  # the store failed: this batch and the next ones stay in memory
            failed = run._store_failure = store_failed(run, exc)
    with run._lock:
        run._rows.extend(rows)
        if run._writer is None or run._store_failure is not None:  # else the store has them
            for item in batch:
                run._streams[item.request.key] = item.stream
    if failed is not None:
        run._fail_run(failed)  # the requests in flight are stopped, and kept as they come back


def store_failed(run: Run, error: BaseException) -> BaseException:
    """The error that stops a run whose store failed: what happened, where, what to do, and that
    the run's results are in memory. Not the store's at all (a bug of ours): ``error`` itself."""
    import duckdb

    assert run._writer is not None
    path = run._writer.path
    kept = "this run keeps its results in memory meanwhile (run.results(), run.frame())"
    if run.schedule is None:
        how = (f"run the same call again with store={str(path)!r} to resume it: the requests done in the store are "
               f"skipped, the others sent; {kept}")
    else:  # a load run measures: it is never resumed (_runner._load_requests)
        how = f"run the load run again (a load run is not resumed); {kept}"
    first = {"full": "free some space there", "read-only": "make it writable again",
             "denied": "allow writing there"}.get(cause_of(error) or "")
    refused = cannot_write(error, path, f"{first}, then {how}")
    if refused is not None:
        return refused
    if isinstance(error, (duckdb.Error, OSError)):
        return StoreError(f"the run store {str(path)!r} failed ({one_line(error)}); once that is mended, {how}",
                          path=path)
    return error
