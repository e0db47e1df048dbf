"""The Run: every request of a plan, sent concurrently on an asyncio loop in a worker thread.

Two threads, so that a run works the same in a script and in a notebook whose kernel already
runs an event loop (the magic's ``-m a,b`` does the same): the *loop thread* sends the requests
(``concurrency`` workers sharing one iterator of requests, behind the shared 429 backoff of
``_backoff.py``) and hands each finished Stream to the *writer thread*, which turns batches of
them into result rows (``_results.py``: the frame's own metrics), writes them to the store when
there is one (``_store.py``; the Streams are then dropped) and refreshes the progress display at
most ``MAX_UPDATES_PER_S`` times a second.

Retries happen only before the first byte of a body, at most ``max_retries`` times per request,
by the client's own rule (``BaseClient._retry_delay``), and every attempt is counted. A 401 or 402
ends the run at once. A stream that breaks or reports an error after it started is a result
(``truncated`` / ``error``, with what arrived), never retried.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as _dt
import queue
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .._client import AsyncClient, BaseClient
from .._core import metrics
from .._core.errors import (
    AuthenticationError,
    ConfigurationError,
    NitoError,
    PaymentRequiredError,
    RateLimitError,
)
from .._stream import AsyncStream, Stream
from .._stream_base import StreamBase
from ..display.runner import LoopThread
from ..display.throttle import Throttle
from ._backoff import Backoff
from ._plan import Plan, Request
from ._results import Finished, result_rows, results_frame, summary

if TYPE_CHECKING:
    import pandas as pd

    from ._store import StoreWriter

__all__ = ["Run"]

#: The progress display is refreshed at most this often.
MAX_UPDATES_PER_S = 4.0
#: Finished requests are written (and their metrics computed) in batches of at most this many,
#: or after BATCH_SECONDS, whichever comes first: a killed process loses at most one batch
#: plus what is in flight. The batch's frame is the writer's peak memory (about 0.4 MB per
#: sim/chat stream, measured with bench/bench_runs.py), so the batch stays small.
BATCH_SIZE = 128
BATCH_SECONDS = 1.0
#: When this many finished requests wait for the writer, the workers wait too before taking the
#: next request (back-pressure): memory stays bounded when the writer is the slower side.
MAX_WAITING = 2 * BATCH_SIZE
_END = object()


class Run:
    """Many requests (prompts × models × repeats), running in the background.

    ``run.wait()`` (or ``await run``) waits for the end; ``results()``, ``summary()``, ``frame()``
    give what has finished so far; ``stop()`` ends it (in-flight requests are recorded as
    stopped, the others are not sent: running the same call on the same store resumes).
    """

    def __init__(
        self,
        plan: Plan,
        *,
        concurrency: int = 16,
        store: str | None = None,
        connection: dict[str, Any] | None = None,
        max_retries: int = 3,
        max_retry_wait: float = 30.0,
        progress: bool | None = None,
        run_id: str | None = None,
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigurationError(f"concurrency must be a whole number >= 1, not {concurrency!r}")
        self.run_id = run_id or _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6]
        self.plan = plan
        self.concurrency = concurrency
        self.store_path = store
        self._connection = dict(connection or {})
        self._client = AsyncClient(max_retries=0, **self._connection)
        # Decides whether (and how long after) an attempt is retried: the client's own rule.
        self._retry_rule = BaseClient(max_retries=max_retries, max_retry_wait=max_retry_wait)
        self._check_requests()
        self._writer: StoreWriter | None = None
        skipped: set[str] = set()
        if store is not None:
            from ._store import StoreWriter

            self._writer = StoreWriter(store)
            try:
                skipped = self._writer.done_keys()
            except BaseException:
                self._writer.close()
                raise
        self.skipped = [r for r in plan.requests if r.key in skipped]
        self._todo = [r for r in plan.requests if r.key not in skipped]
        self._order = {r.key: i for i, r in enumerate(plan.requests)}
        self.backoff = Backoff(concurrency)
        #: The error that ended the run early (a 401 or 402, or a failure of the store), or None.
        self.error: BaseException | None = None
        self.stopped = False
        self.started = time.monotonic()
        self.ended: float | None = None
        self._rows: list[dict[str, Any]] = []
        self._streams: dict[str, StreamBase] = {}  # without a store only: key -> Stream
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._in_flight: dict[str, Stream | AsyncStream] = {}
        self._sending = 0
        self.n_attempts = 0
        self.n_retries = 0
        self._finished: concurrent.futures.Future[Run] = concurrent.futures.Future()
        from ._progress import progress_for

        self.progress = progress_for(self, progress)
        # The requests are sent on the package's one loop-thread runner (display/runner.py); a
        # stop() before its loop exists is kept and cancels the run as soon as it starts.
        self._sender = LoopThread(self._send_all, name="nito_nb-run", on_end=self._sender_ended)
        self._writer_thread = threading.Thread(target=self._write_loop, name="nito_nb-run-writer", daemon=True)
        self._writer_thread.start()
        self._sender.start()

    # -- checks before anything is sent ----------------------------------------------------------

    def _check_requests(self) -> None:
        """Raise the configuration error (no key, bad base URL...) of each model once, now."""
        checked: set[str] = set()
        options = {k: v for k, v in self._connection.items() if k in ("api_key", "base_url")}
        for request in self.plan.requests:
            if request.model in checked:
                continue
            checked.add(request.model)
            self._client._build(request.messages, request.model, options.get("api_key"),
                                options.get("base_url"), dict(request.params))

    # -- the loop thread -------------------------------------------------------------------------

    def _sender_ended(self) -> None:
        # On the loop thread, once its loop has closed. A cancellation (stop() or a 401/402) is
        # recorded already; anything else must not vanish with the thread.
        try:
            if self._sender.error is not None:
                self._fail_run(self._sender.error)
        finally:
            self._queue.put(_END)

    async def _send_all(self) -> None:
        pending: Iterator[Request] = iter(self._todo)
        self._freed = asyncio.Event()
        workers = [asyncio.ensure_future(self._worker(pending)) for _ in range(min(self.concurrency, len(self._todo)))]
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _worker(self, pending: Iterator[Request]) -> None:
        for request in pending:  # one shared iterator: each request is taken by one worker
            await self._one(request)
            while self._queue.qsize() > MAX_WAITING:
                await asyncio.sleep(BATCH_SECONDS / 20)

    async def _slot(self) -> None:
        """Wait for the shared backoff's pause to end and for a free slot under its limit."""
        loop = asyncio.get_running_loop()
        while True:
            pause = self.backoff.wait(loop.time())
            if pause > 0:
                await asyncio.sleep(pause)
                continue
            if self._sending < self.backoff.limit:
                self._sending += 1
                return
            self._freed.clear()
            await self._freed.wait()

    def _release(self) -> None:
        self._sending -= 1
        self._freed.set()

    async def _one(self, request: Request) -> None:
        started = _dt.datetime.now(_dt.timezone.utc)
        attempts = 0
        loop = asyncio.get_running_loop()
        while True:
            await self._slot()
            attempts += 1
            self.n_attempts += 1
            stream: AsyncStream | None = None
            error: NitoError | None = None
            try:
                stream = self._client.stream(
                    request.messages, model=request.model, raise_errors=False, **self._connection, **request.params
                )
                self._in_flight[request.key] = stream
                try:
                    await stream.wait(raise_errors=False)
                except NitoError as exc:  # refused before the body: an HTTP error, no connection
                    error = exc
                    stream = exc.stream if isinstance(exc.stream, AsyncStream) else stream
            except asyncio.CancelledError:
                if stream is not None:
                    if not stream.finished:
                        await stream.aclose()
                    self._finish(request, stream, attempts, started)
                raise
            finally:
                self._in_flight.pop(request.key, None)
                self._release()
            assert stream is not None
            if error is None:
                if stream.status == "done":
                    self.backoff.succeeded()
                self._finish(request, stream, attempts, started)
                return
            if isinstance(error, (AuthenticationError, PaymentRequiredError)):
                self._finish(request, stream, attempts, started)
                self._fail_run(error)
                return
            if isinstance(error, RateLimitError):  # the whole run slows, retried or not
                self.backoff.rate_limited(loop.time(), error.retry_after)
            delay = self._retry_rule._retry_delay(attempts - 1, error)
            if delay is None:
                self._finish(request, stream, attempts, started)
                return
            self.n_retries += 1
            if not isinstance(error, RateLimitError):  # a 429 waits in _slot, with everyone
                await asyncio.sleep(delay)

    def _finish(self, request: Request, stream: Stream | AsyncStream, attempts: int, started: _dt.datetime) -> None:
        self._queue.put(Finished(request, stream, attempts, started))

    def _fail_run(self, error: BaseException) -> None:
        """End the run now (a 401/402, or the store failed): one clear message."""
        if self.error is None:
            self.error = error
            message = getattr(error, "message", None) or str(error)
            print(f"nito: the run stopped: {message}", file=sys.stderr)
        self._cancel()

    def _cancel(self) -> None:
        self._sender.cancel()  # from any thread; nothing happens once the loop has closed

    # -- the writer thread -----------------------------------------------------------------------

    def _write_loop(self) -> None:
        batch: list[Finished] = []
        first = 0.0
        updates = Throttle(MAX_UPDATES_PER_S)  # the progress panel's rate, as every live view's
        ended = False
        try:
            while not ended:
                try:
                    item = self._queue.get(timeout=BATCH_SECONDS / 2)
                except queue.Empty:
                    item = None
                if item is _END:
                    ended = True
                elif item is not None:
                    if not batch:
                        first = time.monotonic()
                    batch.append(item)
                now = time.monotonic()
                if batch and (ended or len(batch) >= BATCH_SIZE or now - first >= BATCH_SECONDS):
                    self._flush(batch)
                    batch = []
                if self.progress is not None and updates.ready():
                    self.progress.update()
                    updates.done()
        except BaseException as exc:  # the store failed (disk full...): stop sending, say why
            self._fail_run(exc)
            while self._queue.get() is not _END:  # let the loop thread end
                pass
        finally:
            if self._writer is not None:
                self._writer.close()
            self.ended = time.monotonic()
            if self.progress is not None:
                self.progress.finish()
            self._finished.set_result(self)

    def _flush(self, batch: list[Finished]) -> None:
        rows, frame = result_rows(batch, self.run_id)
        if self._writer is not None:
            self._writer.write(batch, rows, frame)
        with self._lock:
            self._rows.extend(rows)
            if self._writer is None:
                for item in batch:
                    self._streams[item.request.key] = item.stream

    # -- the user's side -------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._finished.done()

    @property
    def total(self) -> int:
        """Requests this run sends (the plan's, without those a store already had done)."""
        return len(self._todo)

    def wait(self, timeout: float | None = None) -> Run:
        """Wait for the run to end (a KeyboardInterrupt stops it, then waits for the clean end)."""
        try:
            self._finished.result(timeout)
        except KeyboardInterrupt:
            self.stop()
            self._finished.result()
            raise
        return self

    def __await__(self) -> Any:
        return asyncio.wrap_future(self._finished).__await__()

    def stop(self) -> None:
        """End the run: in-flight requests are closed and recorded as ``stopped``, the rest are
        not sent. Returns at once; ``wait()`` for the end."""
        self.stopped = True
        self._cancel()

    def results(self) -> pd.DataFrame:
        """One row per finished request, in the plan's order (row, model, repeat); see
        docs/RUNS.md for the columns."""
        with self._lock:
            rows = list(self._rows)
        order = self._order
        rows.sort(key=lambda row: order[row["key"]])
        return results_frame(rows)

    def summary(self) -> pd.DataFrame:
        """One row per model: counts by status, p50/p90/p99 of ttft, itl, e2e, tokens, cost."""
        return summary(self.results())

    def frame(self) -> pd.DataFrame:
        """The chunk-level frame of every finished stream (``stream`` = the request key). With a
        store it is read from the store once the run has ended."""
        if self.store_path is not None:
            from ._store import open_store

            with open_store(self.store_path) as store:
                return store.frame([row["key"] for row in self._rows])
        from .._frame import frame

        with self._lock:
            streams = dict(self._streams)
        return frame(streams)

    def stats(self) -> dict[str, Any]:
        """Counts so far, per model and in total (what the progress display shows)."""
        with self._lock:
            rows = list(self._rows)
        return run_stats(self, rows)

    def __repr__(self) -> str:
        with self._lock:
            n = len(self._rows)
        state = "done" if self.done else ("stopping" if self.stopped else "running")
        return f"<nito_nb.Run {self.run_id} {state}: {n}/{self.total} requests>"

    def _ipython_display_(self) -> None:
        from ._progress import show

        show(self)


def run_stats(run: Run, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per model: total, finished, ok, in flight, errors by kind, rates, p50/p90 of ttft and itl."""
    now = run.ended if run.ended is not None else time.monotonic()
    elapsed = max(1e-9, now - run.started)
    totals = Counter(r.model for r in run._todo)
    flying = Counter(s.request.get("model") for s in list(run._in_flight.values()))
    models: dict[str, dict[str, Any]] = {}
    for model, total in totals.items():
        models[model] = {"model": model, "total": total, "finished": 0, "ok": 0, "in_flight": flying.get(model, 0),
                         "errors": Counter(), "ttft": [], "itl": [], "tokens": 0, "cost": 0.0}
    for row in rows:
        m = models.get(row["model"])
        if m is None:
            continue
        m["finished"] += 1
        if row["status"] == "done":
            m["ok"] += 1
        else:
            code = row.get("error_code")
            m["errors"][row["status"] + (f" {code}" if code else "")] += 1
        for name in ("ttft", "itl"):
            if row[name] is not None:
                m[name].append(row[name])
        m["tokens"] += row["completion_tokens"] or 0
        m["cost"] += row["cost"] or 0.0
    out = []
    for m in models.values():
        for name in ("ttft", "itl"):
            values = m.pop(name)
            m[f"{name}_p50"] = metrics.quantile(values, 0.5)
            m[f"{name}_p90"] = metrics.quantile(values, 0.9)
        m["requests_per_s"] = m["finished"] / elapsed
        m["tokens_per_s"] = m["tokens"] / elapsed
        m["errors"] = dict(m["errors"])
        out.append(m)
    finished = sum(m["finished"] for m in out)
    total = sum(m["total"] for m in out)
    rate = finished / elapsed
    ended = run.ended is not None
    eta = (total - finished) / rate if rate > 0 and not ended else None
    return {
        "models": out,
        "finished": finished,
        "total": total,
        "skipped": len(run.skipped),
        "elapsed": elapsed,
        "eta": eta,
        "attempts": run.n_attempts,
        "retries": run.n_retries,
        "rate_limited": run.backoff.n_rate_limited,
        "limit": run.backoff.limit,
        "state": ("stopped" if run.stopped or run.error else "done") if ended
        else ("stopping" if run.stopped else "running"),
        "error": None if run.error is None else (getattr(run.error, "message", None) or str(run.error)),
    }
