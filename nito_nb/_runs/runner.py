"""The Run: every request of a plan, sent concurrently on an asyncio loop in a worker thread.

Two threads, so that a run works the same in a script and in a notebook whose kernel already
runs an event loop (the magic's ``-m a,b`` does the same): the *loop thread*, here, sends the
requests (``concurrency`` workers sharing one iterator of requests, or an open-loop schedule,
behind the shared 429 backoff of ``_backoff.py``) and hands each finished Stream to the *writer
thread* (``_record.py``), which turns batches of them into result rows, writes them to the store
when there is one and refreshes the progress display. ``run.stats()`` is ``_stats.py``.

Retries happen only before the first byte of a body, at most ``max_retries`` times per request,
by the client's own rule (``BaseClient._retry_delay``), and every attempt is counted. A 401, 402 or 403
ends the run at once. A stream that breaks or reports an error after it started is a result
(``truncated`` / ``error``, with what arrived), never retried.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import datetime as _dt
import queue
import sys
import threading
import time
import uuid
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

from .._client import AsyncClient, BaseClient
from .._client.endpoint import Simulator, is_embedded, simulator_apart, use_simulator
from .._core.counts import whole
from .._core.errors import (
    AuthenticationError,
    ConfigurationError,
    NitoError,
    PaymentRequiredError,
    RateLimitError,
    RedirectError,
)
from .._core.waiting import wait_or_stop
from .._loop import LoopThread
from .._stream import AsyncStream, Stream
from .._stream_results import StreamResults
from .._stream_source import source_of
from . import gc as _gc
from .backoff import Backoff
from .client_load import ClientMonitor
from .plan import Plan, Request, request_key
from .results import Finished, LoadInfo, results_frame, summary
from .schedule import Schedule
from .stats import run_stats
from .writer import BATCH_SECONDS, END, MAX_WAITING, write_loop

if TYPE_CHECKING:
    import pandas as pd

    from .processes import ProcessEngine
    from .ray import RayEngine
    from .store import StoreWriter

__all__ = ["Run"]

#: An open-loop run keeps at most this many requests in flight unless ``concurrency`` says less.
OPEN_LOOP_MAX_IN_FLIGHT = 100_000
#: ``stop_on_error_rate`` is judged once this many requests have ended (not on the first one).
MIN_ENDED_FOR_ERROR_RATE = 10
#: An open-loop request is started this long (seconds) before its scheduled send, so that what
#: comes before the send (the request built, its client made, two task switches on a busy loop)
#: is done by then: requests left 1-3 ms late at the median at 80% of the loop's capacity, and
#: most of that lateness was this (bench/bench_load.py).
SEND_LEAD = 0.025
#: ... and with engine="ray" this long: a call from the driver to an actor took 45-85 ms now and
#: then on a 2-core machine (7 of 380 requests of a sweep from 1 to 40/s), and those left late.
RAY_SEND_LEAD = 0.1
#: With engine="processes" or "ray": each worker's streams in flight, unless ``per_worker`` says.
#: High, as Ray's own default for an async actor: an open loop sends on its schedule, and a cap
#: below the streams it has in flight queues its requests in the workers. With 64, two workers
#: sending sim/chat (streams of about 3 s) at 40/s left requests 615 ms late at p99; with 1,000,
#: 2.9 ms. A worker loop carries 500 paced streams with 0.1 ms of timing error (bench_load.py).
PER_WORKER = 1000
#: The metrics an ``slo`` may bound (seconds; ``*_from_schedule`` include the send delay).
SLO_METRICS = ("ttft", "itl", "tpot", "e2e", "ttft_from_schedule", "e2e_from_schedule")


def _check_slo(slo: dict[str, float] | None) -> dict[str, float]:
    if slo is None:
        return {}
    if not isinstance(slo, dict):
        raise ConfigurationError(f"slo is a dict like {{'ttft': 1.0, 'itl': 0.05}}, not {slo!r}")
    for name, bound in slo.items():
        if name not in SLO_METRICS:
            raise ConfigurationError(f"slo: unknown metric {name!r}; use {', '.join(SLO_METRICS)}")
        if isinstance(bound, bool) or not isinstance(bound, int | float) or not bound > 0:
            raise ConfigurationError(f"slo[{name!r}] is a bound in seconds > 0, not {bound!r}")
    return {name: float(bound) for name, bound in slo.items()}


def _load_requests(plan: Plan, n: int, run_id: str) -> list[Request]:
    """The plan's requests taken in turn until the schedule's ``n`` sends. ``repeat`` counts
    the turns; the key also hashes the run id, so that every rate of a sweep (and every load run
    on one store) keeps its own rows."""
    base = plan.requests
    if not base:
        return []
    out = []
    for i in range(n):
        r = base[i % len(base)]
        turn = i // len(base)
        key = request_key(r.model, r.messages, {"params": r.params, "load_run": run_id, "seq": i}, turn)
        out.append(Request(key, r.row, r.model, turn, r.messages, r.params))
    return out


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
        concurrency: int | None = None,
        schedule: Schedule | None = None,
        slo: dict[str, float] | None = None,
        stop_on_error_rate: float | None = None,
        engine: str = "asyncio",
        workers: int | None = None,
        per_worker: int | None = None,
        store: str | None = None,
        connection: dict[str, Any] | None = None,
        max_retries: int = 3,
        max_retry_wait: float = 30.0,
        progress: bool | None = None,
        run_id: str | None = None,
    ) -> None:
        if concurrency is None:  # closed loop: 16 at a time; open loop: as many as the schedule asks
            concurrency = 16 if schedule is None else OPEN_LOOP_MAX_IN_FLIGHT
        concurrency = whole("concurrency", concurrency)
        # Now, before the simulator's process and the store are started (the engines check them
        # again, for whoever makes one directly).
        workers = None if workers is None else whole("workers", workers)
        per_worker = None if per_worker is None else whole("per_worker", per_worker)
        self.slo = _check_slo(slo)
        if stop_on_error_rate is not None and (
            isinstance(stop_on_error_rate, bool) or not isinstance(stop_on_error_rate, int | float)
            or not 0 < stop_on_error_rate <= 1
        ):
            raise ConfigurationError(f"stop_on_error_rate is a share in (0, 1], not {stop_on_error_rate!r}")
        self.stop_on_error_rate = stop_on_error_rate
        #: Why the run stopped sending before its end (the error rate), or None.
        self.stop_reason: str | None = None
        self.run_id = run_id or _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6]
        self.plan = plan
        self.concurrency = concurrency
        self.schedule = schedule
        self._offsets: list[float] = schedule.offsets() if schedule is not None else []
        self._phases = self.load_info(client=False)  # the measured window, for each row's phase
        self.store_path = store
        self._connection = dict(connection or {})
        self._client = AsyncClient(max_retries=0, **self._connection)
        # Decides whether (and how long after) an attempt is retried: the client's own rule.
        self._retry_rule = BaseClient(max_retries=max_retries, max_retry_wait=max_retry_wait)
        base_url = self._connection.get("base_url")
        embedded = any(is_embedded(request.model, base_url) for request in plan.requests)
        # sim/ models go to a simulator in a process of its own: in this one, its work would be
        # the run's (with Ray, only the actors on this node use it: _ray.py).
        with simulator_apart() if embedded else contextlib.nullcontext() as simulator:
            self._check_requests()
        #: The simulator apart (its URL and token) where the run's sim/ models go, or None.
        self._simulator: Simulator | None = simulator
        if engine not in ("asyncio", "processes", "ray"):
            raise ConfigurationError(f"engine must be 'asyncio', 'processes' or 'ray', not {engine!r}")
        self.engine = engine
        self._engine: RayEngine | ProcessEngine | None = None
        if engine == "asyncio" and (workers is not None or per_worker is not None):
            # (per_worker was taken and ignored: a run that meant a worker engine got none)
            name = "workers" if workers is not None else "per_worker"
            raise ConfigurationError(f"{name}= is for engine='processes' or engine='ray'")
        if per_worker is None:
            per_worker = PER_WORKER
        self._writer: StoreWriter | None = None
        skipped: set[str] = set()
        if store is not None:
            from .store import StoreWriter

            self._writer = StoreWriter(store, helper=True)  # events built beside, not under the GIL
            try:
                # A load run measures; it never resumes (its keys hold its run id: see _load_requests).
                skipped = self._writer.done_keys() if schedule is None else set()
            except BaseException:
                self._writer.close()
                raise
        requests = plan.requests if schedule is None else _load_requests(plan, len(self._offsets), self.run_id)
        self.skipped = [r for r in requests if r.key in skipped]
        self._todo = [r for r in requests if r.key not in skipped]
        self._order = {r.key: i for i, r in enumerate(requests)}
        self.backoff = Backoff(concurrency)
        #: The error that ended the run early (a 401, 402 or 403, or a failure of the store), or None.
        self.error: BaseException | None = None
        self.stopped = False
        self.started = time.monotonic()
        self.ended: float | None = None
        self._rows: list[dict[str, Any]] = []
        self._streams: dict[str, StreamResults] = {}  # key -> Stream, without a store or once it failed
        #: The store's failure (a full disk...), set by the writer thread: the rest stays in memory.
        self._store_failure: BaseException | None = None
        self._achieved: dict[str, float] | None = None  # a load run's achieved rates, once ended (_stats.py)
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._in_flight: dict[str, Stream | AsyncStream] = {}
        self._sending = 0
        self.n_attempts = 0
        self.n_retries = 0
        self._n_ended = 0  # requests ended so far (loop thread), and those that did not end done
        self._n_bad = 0
        self.client = ClientMonitor(simulator=embedded and simulator is None)
        self._t0 = time.perf_counter()  # the schedule's origin (reset when sending starts)
        self._origin = self.started  # the same moment on the monotonic clock (for run.stats())
        # Resolved with None, not the Run: a Run that held a future of itself was a reference
        # cycle, freed only by a full GC pass once dropped (test_gc.py).
        self._finished: concurrent.futures.Future[None] = concurrent.futures.Future()
        # The workers start last, once nothing else can fail (a busy store, a bad option).
        try:
            if engine == "ray":
                from .ray import RayEngine

                self._engine = RayEngine(workers, per_worker, self._connection, self._models(),
                                         simulator=self._simulator)
                self.client.simulator = self.client.simulator or self._engine.simulator_in_workers
            elif engine == "processes":
                from .processes import ProcessEngine

                self._engine = ProcessEngine(workers, per_worker, self._connection, self._models(),
                                             simulator=self._simulator)
        except BaseException:
            if self._writer is not None:
                self._writer.close()
            raise
        from .progress import progress_for

        self.progress = progress_for(self, progress)
        # The requests are sent on the package's one loop-thread runner (_loop.py); a
        # stop() before its loop exists is kept and cancels the run as soon as it starts.
        self._sender = LoopThread(self._send_all, name="nito_nb-run", on_end=self._sender_ended)
        self._writer_thread = threading.Thread(target=write_loop, args=(self,), name="nito_nb-run-writer",
                                               daemon=True)
        _gc.begin()  # the writer thread's end calls _gc.end()
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

    def _models(self) -> list[str]:
        """The models this run will send to, for its workers to get ready for (``_ray.start_endpoints``)."""
        return sorted({request.model for request in self._todo})

    # -- the loop thread -------------------------------------------------------------------------

    def _sender_ended(self) -> None:
        # On the loop thread, once its loop has closed. A cancellation (stop() or a 401/402/403) is
        # recorded already; anything else must not vanish with the thread.
        try:
            if self._sender.error is not None:
                self._fail_run(self._sender.error)
        finally:
            try:
                if self._engine is not None:
                    self._engine.close()
            finally:
                self._queue.put(END)

    async def _send_all(self) -> None:
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()  # for a slot (_slot)
        use_simulator(self._simulator)  # for this task and those it starts (the context is per task)
        monitor = asyncio.ensure_future(self.client.sample())
        if self._engine is None:
            await self._client.warm()  # the first request's one-time work, before the schedule's origin
        # An open loop's origin is its lead from now, so that its first request is made ready
        # ahead like every other: sent at once, it was late by its hand-over (2.8-4.8 ms with a
        # worker engine, against about 1 ms for the next ones).
        self._lead = RAY_SEND_LEAD if self.engine == "ray" else SEND_LEAD
        self._t0 = time.perf_counter() + (self._lead if self.schedule is not None else 0.0)
        self._origin = time.monotonic() + self._t0 - time.perf_counter()
        # The origin on the loop's clock, read once: a send time derived per request from two
        # clock readings jittered by microseconds, and requests due within them left out of order.
        self._loop_t0 = asyncio.get_running_loop().time() + self._t0 - time.perf_counter()
        try:
            if self.schedule is None:
                await self._send_closed_loop()
            else:
                await self._send_open_loop()
        finally:
            monitor.cancel()
            await asyncio.gather(monitor, return_exceptions=True)

    async def _send_open_loop(self) -> None:
        """Send each request at its scheduled time, whether or not earlier ones have ended."""
        tasks: set[asyncio.Task[None]] = set()
        try:
            for request, offset in zip(self._todo, self._offsets, strict=True):
                if self.stop_reason is not None:
                    break
                # Woken a little ahead: the request is made ready meanwhile (handed to a worker,
                # with its time) and only its send waits for the time (AsyncStreamSource.send_at).
                delay = self._t0 + offset - time.perf_counter() - self._lead
                if delay > 0:
                    await asyncio.sleep(delay)
                task = asyncio.ensure_future(self._one(request, offset))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            while tasks:
                await asyncio.gather(*list(tasks))
        finally:
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*list(tasks), return_exceptions=True)

    async def _send_closed_loop(self) -> None:
        pending: Iterator[Request] = iter(self._todo)
        workers = [asyncio.ensure_future(self._worker(pending)) for _ in range(min(self.concurrency, len(self._todo)))]
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _worker(self, pending: Iterator[Request]) -> None:
        for request in pending:  # one shared iterator: each request is taken by one worker
            if self.stop_reason is not None:  # stop_on_error_rate: the rest is not sent
                break
            await self._one(request)
            while self._queue.qsize() > MAX_WAITING:
                await asyncio.sleep(BATCH_SECONDS / 20)

    async def _slot(self) -> None:
        """Wait for the shared backoff's pause to end and for a free slot under its limit. Waiters
        are served in order, one per freed slot (``_hand_over``): an Event that woke every waiter
        on every release cost 409,063 wake-ups for 1,000 requests behind a limit of 64
        (bench/bench_load.py's maximum rate)."""
        loop = asyncio.get_running_loop()
        while True:
            pause = self.backoff.wait(loop.time())
            if pause > 0:
                await asyncio.sleep(pause)
                continue
            if self._sending < self.backoff.limit and not self._waiting:
                self._sending += 1
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiting.append(waiter)
            try:
                await waiter  # a slot was handed over to this waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():  # handed over as it was cancelled
                    self._release()
                raise
            if self.backoff.wait(loop.time()) <= 0:
                return
            self._release()  # a pause began meanwhile: wait it out, then in line again

    def _release(self) -> None:
        self._sending -= 1
        self._hand_over()

    def _succeeded(self) -> None:
        """A request ended done: the backoff's limit may rise, and a waiter get the new slot."""
        self.backoff.succeeded()
        self._hand_over()

    def _hand_over(self) -> None:
        """The free slots go to the waiters, in order (one cancelled meanwhile is skipped)."""
        while self._waiting and self._sending < self.backoff.limit:
            waiter = self._waiting.popleft()
            if not waiter.done():
                self._sending += 1
                waiter.set_result(None)

    async def _one(self, request: Request, scheduled: float | None = None) -> None:
        started = _dt.datetime.now(_dt.timezone.utc)
        attempts = 0
        loop = asyncio.get_running_loop()
        timing: dict[str, float | None] = {"scheduled_at": scheduled, "sent_at": None}
        if self._engine is not None:
            await self._one_remote(self._engine, request, started, timing)
            return
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
                if scheduled is not None and attempts == 1:
                    source_of(stream).send_at(self._loop_t0 + scheduled)
                self._in_flight[request.key] = stream
                try:
                    await stream.wait(raise_errors=False)
                except NitoError as exc:  # refused before the body: an HTTP error, no connection
                    error = exc
                    stream = exc.stream if isinstance(exc.stream, AsyncStream) else stream
            except asyncio.CancelledError:
                if stream is not None:
                    unsent = source_of(stream).waiting_to_send  # stopped before its send time: left out, as later ones
                    if not stream.finished:
                        await stream.aclose()
                    if not unsent:
                        started = self._sent(stream, attempts, started, timing)
                        self._finish(request, stream, attempts, started, timing)
                raise
            finally:
                self._in_flight.pop(request.key, None)
                self._release()
            assert stream is not None
            started = self._sent(stream, attempts, started, timing)
            if error is None:
                if stream.status == "done":
                    self._succeeded()
                self._finish(request, stream, attempts, started, timing)
                return
            delay = self._retry_or_finish(request, stream, error, attempts, started, timing, loop.time())
            if delay is None:
                return
            if not isinstance(error, RateLimitError):  # a 429 waits in _slot, with everyone
                await asyncio.sleep(delay)

    def _sent(self, stream: AsyncStream, attempts: int, started: _dt.datetime,
              timing: dict[str, float | None]) -> _dt.datetime:
        """The first attempt's ``sent_at`` (and ``started_at``, docs/RUNS.md) is its stream's own
        send (``log.t0_ns``/``t0_wall``, taken as the request is built, after any wait for a slot
        and a turn or two of the loop after this task asked for it), as the worker engines
        report their workers' (``_remote.py``): a time taken in this task was earlier by those
        turns, which a busy loop makes milliseconds. Returns ``started``."""
        if attempts != 1:
            return started
        timing["sent_at"] = self._on_timeline(stream)
        return stream.log.t0_wall

    def _on_timeline(self, stream: StreamResults) -> float:
        """When ``stream`` was sent (its ``log.t0_ns``; a worker's is mapped onto this process's
        clock already), in seconds after the run's start: the one rule of ``sent_at`` and of a
        retried request's last send."""
        return stream.log.t0_ns / 1e9 - self._t0

    def _retry_or_finish(self, request: Request, stream: Stream | AsyncStream, error: NitoError, attempts: int,
                         started: _dt.datetime, timing: dict[str, float | None], now: float,
                         **where: str | None) -> float | None:
        """After an attempt failed before its body: the seconds before the next attempt, or None
        when the request ends here (finished; a 401, 402 or 403 also ends the run, and so does a
        redirect: every request would get it, and none is followed). A 429 slows the whole run,
        retried or not. The one rule of both engines' attempt loops (``_remote.py``)."""
        if isinstance(error, (AuthenticationError, PaymentRequiredError, RedirectError)):
            self._finish(request, stream, attempts, started, timing, **where)
            self._fail_run(error)
            return None
        if isinstance(error, RateLimitError):
            self.backoff.rate_limited(now, error.retry_after)
        delay = self._retry_rule._retry_delay(attempts - 1, error)
        if delay is None:
            self._finish(request, stream, attempts, started, timing, **where)
            return None
        self.n_retries += 1
        return delay

    async def _one_remote(self, engine: RayEngine | ProcessEngine, request: Request, started: _dt.datetime,
                          timing: dict[str, float | None]) -> None:
        """One request sent by worker processes or Ray actors: retried, and paused with every
        worker on a 429, by the driver (``_remote.py``)."""
        from .remote import send_remote

        await send_remote(self, engine, request, started, timing)

    def _finish(self, request: Request, stream: Stream | AsyncStream, attempts: int, started: _dt.datetime,
                timing: dict[str, float | None], worker: str | None = "local", node: str | None = None) -> None:
        # A retried request's timings are its last attempt's (its stream's): where that one left.
        last_sent = self._on_timeline(stream) if attempts > 1 and stream.log.t0_ns else None
        self._queue.put(Finished(request, stream, attempts, started, timing["scheduled_at"], timing["sent_at"],
                                 last_sent, worker, node))
        self._n_ended += 1
        if stream.status not in ("done", "stopped"):
            self._n_bad += 1
        limit = self.stop_on_error_rate
        if (limit is not None and self.stop_reason is None and self._n_ended >= MIN_ENDED_FOR_ERROR_RATE
                and self._n_bad / self._n_ended >= limit):
            self.stop_reason = (f"error rate {self._n_bad}/{self._n_ended} reached stop_on_error_rate={limit:g}:"
                                " no further request was sent")
            print(f"nito: the run stopped sending: {self.stop_reason}", file=sys.stderr)

    def _fail_run(self, error: BaseException) -> None:
        """End the run now (a 401/402/403, or the store failed): one clear message."""
        if self.error is None:
            self.error = error
            message = getattr(error, "message", None) or str(error)
            print(f"nito: the run stopped: {message}", file=sys.stderr)
        self._cancel()

    def _cancel(self) -> None:
        self._sender.cancel()  # from any thread; nothing happens once the loop has closed

    # -- the user's side -------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._finished.done()

    @property
    def total(self) -> int:
        """Requests this run sends (the plan's, without those a store already had done)."""
        return len(self._todo)

    def wait(self, timeout: float | None = None) -> Run:
        """Wait for the run to end, or ``timeout`` seconds at most (then it goes on: check
        ``done``); a KeyboardInterrupt stops it, then waits for the clean end."""
        wait_or_stop(self._finished, self.stop, timeout)
        return self

    def __await__(self) -> Generator[Any, None, Run]:
        yield from asyncio.wrap_future(self._finished).__await__()
        return self

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
        """One row per model: counts by status, p50/p90/p99 of ttft, itl, e2e, tokens, cost. A
        load run (``rate=``) summarises only the requests scheduled between warmup and cooldown
        and adds the achieved rate, throughput, goodput, send delay and the client's health."""
        return summary(self.results(), load=self.load_info())

    def load_info(self, client: bool = True) -> LoadInfo | None:
        """What the summary of a load run needs: the measured window, the SLO, the client."""
        if self.schedule is None:
            return None
        start = float(self.schedule.warmup)
        end = self.schedule.end(self._offsets) - self.schedule.cooldown
        if end <= start:
            raise ConfigurationError(
                f"warmup={self.schedule.warmup:g} s and cooldown={self.schedule.cooldown:g} s leave no time"
                f" to measure in a schedule of {self.schedule.end(self._offsets):g} s")
        return LoadInfo(rate=float(self.schedule.rate), start=start, end=end, slo=self.slo,
                        client=self.client.report() if client else {})

    def frame(self) -> pd.DataFrame:
        """The chunk-level frame of every finished stream (``stream`` = the request key). With a
        store it is read from the store once the run has ended (and, if the store failed, what
        it could not take from memory)."""
        from .frames import frame_of

        return frame_of([self])

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
        from .progress import show

        show(self)

