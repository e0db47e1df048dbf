"""A Run's sender: its requests, sent concurrently on an asyncio loop in a thread of their own.

The ``Dispatcher`` owns the sending: the loop thread (``_loop.py``), the client, the engine
(worker processes or Ray actors, or none), the slots (``gate.py``: ``concurrency`` behind the
shared 429 backoff), the requests in flight and the schedule's origin. A closed loop has
``concurrency`` workers sharing one iterator of requests; an open loop sends each request at
its scheduled time. Each finished request goes to the run's writer (``writer.py``) and is
counted (``stats.py``); the loop's end is the writer's ``end()``.

Retries happen only before the first byte of a body, at most ``max_retries`` times per request,
by the client's own rule (``_client/retry.py``), and every attempt is counted. A 401, 402 or 403
ends the run at once; a model whose first ``NOT_FOUND_LIMIT`` answers were all 404 gets no more
requests (``refused_models``). A stream that breaks or reports an error after it started is a result
(``truncated`` / ``error``, with what arrived), never retried.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .._client import AsyncClient, BaseClient
from .._client.base import check_call
from .._client.endpoint import Simulator, use_simulator
from .._client.retry import retry_delay
from .._core.errors import (
    AuthenticationError,
    ConfigurationError,
    NitoError,
    PaymentRequiredError,
    RateLimitError,
    RedirectError,
)
from .._core.printable import printable
from .._core.status import Status
from .._core.units import to_seconds
from .._loop import LoopThread
from .._stream import AsyncStream, Stream
from .._stream_source import source_of
from .backoff import Backoff
from .gate import Gate
from .images import read_again
from .plan import Request
from .results import Finished
from .writer import BATCH_SECONDS

if TYPE_CHECKING:
    from .._stream_results import StreamResults
    from .client_load import ClientMonitor
    from .processes import ProcessEngine
    from .ray import RayEngine
    from .stats import RunStats
    from .writer import RunWriter

__all__ = [
    "NOT_FOUND_LIMIT",
    "PER_WORKER",
    "RAY_SEND_LEAD",
    "SEND_LEAD",
    "Dispatcher",
    "check_requests",
    "start_engine",
]

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
#: A model whose first this many answered requests were all 404 (not found) is sent no more: a
#: misspelled model got every one of its 40 requests sent, and the run said only "40 not ok".
NOT_FOUND_LIMIT = 3


def check_requests(
    client: AsyncClient, connection: dict[str, Any], requests: list[Request]
) -> None:
    """Raise the configuration error (no key, bad base URL...) of each model once, now."""
    checked: set[str] = set()
    options = {k: v for k, v in connection.items() if k in ("api_key", "base_url")}
    for request in requests:
        if request.model in checked:
            continue
        checked.add(request.model)
        check_call(
            client,
            request.messages,
            request.model,
            options.get("api_key"),
            options.get("base_url"),
            dict(request.params),
        )


def start_engine(
    engine: str,
    workers: int | None,
    per_worker: int | None,
    connection: dict[str, Any],
    models: list[str],
    simulator: Simulator | None,
    client: ClientMonitor,
) -> RayEngine | ProcessEngine | None:
    """The worker processes or Ray actors of ``engine`` (None for "asyncio"), started now, ready
    for ``models`` (``ray.start_endpoints``). ``client``: the run's monitor, told when the
    simulator runs in a worker's process (a Ray actor on another node: its work counts there)."""
    if per_worker is None:
        per_worker = PER_WORKER
    if engine == "ray":
        from .ray import RayEngine

        ray_engine = RayEngine(workers, per_worker, connection, models, simulator=simulator)
        client.simulator = client.simulator or ray_engine.simulator_in_workers
        return ray_engine
    if engine == "processes":
        from .processes import ProcessEngine

        return ProcessEngine(workers, per_worker, connection, models, simulator=simulator)
    return None


def _after_the_end(error: BaseException) -> None:
    """A dispatcher's ``fail`` once its loop has ended: nothing is sent any more."""


class Dispatcher:
    """The sender of one run: ``start()`` sends ``todo`` (at ``offsets``, seconds after the
    schedule's origin, for an open loop), ``cancel()`` stops it from any thread. ``fail(error)``
    ends the run (a 401, 402 or 403, a redirect, or the loop's own failure)."""

    def __init__(
        self,
        *,
        client: AsyncClient,
        connection: dict[str, Any],
        retry_rule: BaseClient,
        simulator: Simulator | None,
        engine: RayEngine | ProcessEngine | None,
        ray: bool,
        todo: list[Request],
        offsets: list[float] | None,
        concurrency: int,
        stop_on_error_rate: float | None,
        started: float,
        stats: RunStats,
        writer: RunWriter,
        fail: Callable[[BaseException], None],
    ) -> None:
        self._client = client
        self._connection = connection
        self._retry_rule = retry_rule  # its max_retries and max_retry_wait, checked
        self._simulator = simulator  # where the run's sim/ models go (a simulator apart), or None
        #: The worker processes or Ray actors that send, or None: this loop sends.
        self.engine = engine
        self._ray = ray
        self._todo = todo
        self._offsets = offsets  # None: a closed loop
        self._concurrency = concurrency
        self._stop_on_error_rate = stop_on_error_rate
        self.stats = stats
        self._results = writer  # the run's writer: each finished request goes there
        self._fail = fail
        self.gate = Gate(Backoff(concurrency))
        #: The Streams being sent, by request key (the default engine's; a worker's are in the worker).
        self.in_flight: dict[str, Stream | AsyncStream] = {}
        #: Why sending stopped before its end (the error rate), or None.
        self.stop_reason: str | None = None
        #: The models sent no more (their first answers were all 404), with the gateway's message.
        self.refused_models: dict[str, str] = {}
        self._not_found: Counter[str] = Counter()  # 404s of each model before any other answer
        self._found: set[str] = set()  # models that answered something else first
        #: The schedule's origin (``time.perf_counter()``; reset when sending starts) and the same
        #: moment on the monotonic clock (``run.stats()``'s rates count from it).
        self.t0 = time.perf_counter()
        self.origin = started
        self._lead = 0.0
        self._loop_t0 = 0.0
        # The requests are sent on the package's one loop-thread runner (_loop.py); a
        # stop() before its loop exists is kept and cancels the run as soon as it starts.
        self.sender = LoopThread(self._send_all, name="nito_nb-run", on_end=self._ended)

    def start(self) -> None:
        self.sender.start()

    def cancel(self) -> None:
        """Stop sending: in-flight requests are closed and recorded as stopped (any thread;
        nothing happens once the loop has closed)."""
        self.sender.cancel()

    def in_flight_models(self) -> list[str | None]:
        """The model of each request being sent now."""
        return [stream.request.get("model") for stream in list(self.in_flight.values())]

    def now(self) -> float:
        """Seconds since the schedule's origin (the run's timeline)."""
        return time.perf_counter() - self.t0

    def on_timeline(self, stream: StreamResults) -> float:
        """When ``stream`` was sent (its ``log.t0_ns``; a worker's is mapped onto this process's
        clock already), in seconds after the run's start: the one rule of ``sent_at`` and of a
        retried request's last send."""
        return to_seconds(stream.log.t0_ns) - self.t0

    # -- the loop thread -------------------------------------------------------------------------

    def _ended(self) -> None:
        # On the loop thread, once its loop has closed. A cancellation (stop() or a 401/402/403) is
        # recorded already; anything else must not vanish with the thread.
        try:
            if self.sender.error is not None:
                self._fail(self.sender.error)
        finally:
            try:
                if self.engine is not None:
                    self.engine.close()
            finally:
                self._results.end()
                # Let go of the run (``fail`` is its bound method; nothing fails once the loop has
                # ended): that cycle held a dropped Run and its streams until a full GC pass.
                self._fail = _after_the_end

    async def _send_all(self) -> None:
        # for this task and those it starts (the context is per task)
        use_simulator(self._simulator)
        monitor = asyncio.ensure_future(self.stats.client.sample())
        if self.engine is None:
            # the first request's one-time work, before the schedule's origin
            await self._client.warm()
        # An open loop's origin is its lead from now, so that its first request is made ready
        # ahead like every other: sent at once, it was late by its hand-over (2.8-4.8 ms with a
        # worker engine, against about 1 ms for the next ones).
        self._lead = RAY_SEND_LEAD if self._ray else SEND_LEAD
        self.t0 = time.perf_counter() + (self._lead if self._offsets is not None else 0.0)
        self.origin = time.monotonic() + self.t0 - time.perf_counter()
        # The origin on the loop's clock, read once: a send time derived per request from two
        # clock readings jittered by microseconds, and requests due within them left out of order.
        self._loop_t0 = asyncio.get_running_loop().time() + self.t0 - time.perf_counter()
        try:
            if self._offsets is None:
                await self._send_closed_loop()
            else:
                await self._send_open_loop(self._offsets)
        finally:
            monitor.cancel()
            await asyncio.gather(monitor, return_exceptions=True)

    async def _send_open_loop(self, offsets: list[float]) -> None:
        """Send each request at its scheduled time, whether or not earlier ones have ended."""
        tasks: set[asyncio.Task[None]] = set()
        try:
            for request, offset in zip(self._todo, offsets, strict=True):
                if self.stop_reason is not None:
                    break
                if request.model in self.refused_models:
                    continue
                # Woken a little ahead: the request is made ready meanwhile (handed to a worker,
                # with its time) and only its send waits for the time (AsyncStreamSource.send_at).
                delay = self.t0 + offset - time.perf_counter() - self._lead
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
        workers = [
            asyncio.ensure_future(self._worker(pending))
            for _ in range(min(self._concurrency, len(self._todo)))
        ]
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
            if request.model in self.refused_models:  # not sent, not recorded: as the rest above
                continue
            await self._one(request)
            while self._results.full():
                await asyncio.sleep(BATCH_SECONDS / 20)

    async def _one(self, request: Request, scheduled: float | None = None) -> None:
        started = _dt.datetime.now(_dt.timezone.utc)
        attempts = 0
        loop = asyncio.get_running_loop()
        timing: dict[str, float | None] = {"scheduled_at": scheduled, "sent_at": None}
        if self.engine is not None:
            # Sent by worker processes or Ray actors: retried, and paused with every worker on a
            # 429, by this driver (remote.py).
            from .remote import send_remote

            await send_remote(self, self.engine, request, started, timing)
            return
        images = None
        if request.images:  # read once for all its attempts; checked against the key's bytes
            try:
                images = await read_again(request.images)
            except ConfigurationError as exc:  # changed or gone since the run was planned
                from .ray import unsent_stream

                failed = unsent_stream(
                    request.model,
                    request.messages,
                    request.params,
                    str(exc),
                    exception="ConfigurationError",
                )
                self.finish(request, failed, 0, started, timing)
                return
        while True:
            asked = self.now()
            await self.gate.acquire()
            # refused while it waited: not sent
            if not attempts and request.model in self.refused_models:
                self.gate.release()
                return
            if not attempts:
                self.held(timing, asked)
            attempts += 1
            self.stats.attempted()
            stream: AsyncStream | None = None
            error: NitoError | None = None
            try:
                stream = self._client.stream(
                    request.messages,
                    model=request.model,
                    raise_errors=False,
                    images=images,
                    **self._connection,
                    **request.params,
                )
                source = source_of(stream)
                if scheduled is not None and attempts == 1:
                    source.send_at(self._loop_t0 + scheduled)
                self.in_flight[request.key] = stream
                try:
                    # read in this task: nothing else touches the stream until it has ended
                    await source.wait_alone()
                except NitoError as exc:  # refused before the body: an HTTP error, no connection
                    error = exc
                    stream = exc.stream if isinstance(exc.stream, AsyncStream) else stream
            except asyncio.CancelledError:
                if stream is not None:
                    # stopped before its send time: left out, as later ones
                    unsent = source_of(stream).waiting_to_send
                    if not stream.finished:
                        await stream.aclose()
                    if not unsent:
                        started = self._sent(stream, attempts, started, timing)
                        self.finish(request, stream, attempts, started, timing)
                raise
            finally:
                self.in_flight.pop(request.key, None)
                self.gate.release()
            assert stream is not None
            started = self._sent(stream, attempts, started, timing)
            if error is None:
                if stream.status == Status.DONE:
                    self.gate.succeeded()
                self.finish(request, stream, attempts, started, timing)
                return
            delay = self.retry_or_finish(
                request, stream, error, attempts, started, timing, loop.time()
            )
            if delay is None:
                return
            if not isinstance(error, RateLimitError):  # a 429 waits in the gate, with everyone
                await asyncio.sleep(delay)

    def held(self, timing: dict[str, float | None], asked: float) -> None:
        """After a scheduled first attempt got its slot (it asked at ``asked``, on the run's
        timeline): how far past its time the gate held it (a 429's pause, the in-flight limit), a
        lateness that is not the client's (``client_load``). The one rule of both engines."""
        scheduled = timing["scheduled_at"]
        if scheduled is not None:
            now = self.now()
            timing["held"] = max(0.0, min(now - asked, now - scheduled))

    def _sent(
        self,
        stream: AsyncStream,
        attempts: int,
        started: _dt.datetime,
        timing: dict[str, float | None],
    ) -> _dt.datetime:
        """The first attempt's ``sent_at`` (and ``started_at``, docs/RUNS.md) is its stream's own
        send (``log.t0_ns``/``t0_wall``, taken as the request is built, after any wait for a slot
        and a turn or two of the loop after this task asked for it), as the worker engines
        report their workers' (``remote.py``): a time taken in this task was earlier by those
        turns, which a busy loop makes milliseconds. Returns ``started``."""
        if attempts != 1:
            return started
        timing["sent_at"] = self.on_timeline(stream)
        return stream.log.t0_wall

    def retry_or_finish(
        self,
        request: Request,
        stream: Stream | AsyncStream,
        error: NitoError,
        attempts: int,
        started: _dt.datetime,
        timing: dict[str, float | None],
        now: float,
        **where: str | None,
    ) -> float | None:
        """After an attempt failed before its body: the seconds before the next attempt, or None
        when the request ends here (finished; a 401, 402 or 403 also ends the run, and so does a
        redirect: every request would get it, and none is followed). A 429 slows the whole run,
        retried or not. The one rule of both engines' attempt loops (``remote.py``)."""
        if isinstance(error, (AuthenticationError, PaymentRequiredError, RedirectError)):
            self.finish(request, stream, attempts, started, timing, **where)
            self._fail(error)
            return None
        if isinstance(error, RateLimitError):
            self.gate.backoff.rate_limited(now, error.retry_after)
        rule = self._retry_rule
        delay = retry_delay(attempts - 1, error, rule.max_retries, rule.max_retry_wait)
        if delay is None:
            self.finish(request, stream, attempts, started, timing, **where)
            return None
        self.stats.retried()
        return delay

    def finish(
        self,
        request: Request,
        stream: StreamResults,
        attempts: int,
        started: _dt.datetime,
        timing: dict[str, float | None],
        worker: str | None = "local",
        node: str | None = None,
    ) -> None:
        """``request`` ended with ``stream`` (its last attempt's): to the writer, counted, and
        sending stops once the error rate reached ``stop_on_error_rate``."""
        # A retried request's timings are its last attempt's (its stream's): where that one left.
        last_sent = self.on_timeline(stream) if attempts > 1 and stream.log.t0_ns else None
        self._results.put(
            Finished(
                request,
                stream,
                attempts,
                started,
                timing["scheduled_at"],
                timing["sent_at"],
                last_sent,
                worker,
                node,
            )
        )
        self.stats.ended(stream.status)
        self._judge_model(request.model, stream)
        scheduled, sent = timing["scheduled_at"], timing["sent_at"]
        if scheduled is not None and sent is not None:  # how late the client itself sent it
            self.stats.client.sent_late(sent - scheduled - (timing.get("held") or 0.0))
        limit = self._stop_on_error_rate
        if limit is not None and self.stop_reason is None:
            self.stop_reason = self.stats.over_error_rate(limit)
            if self.stop_reason is not None:
                print(f"nito: the run stopped sending: {self.stop_reason}", file=sys.stderr)

    def _judge_model(self, model: str, stream: StreamResults) -> None:
        """Count a 404 (not found) of ``model``; at the ``NOT_FOUND_LIMIT``-th, with no other
        answer from it before, it is sent no more, and one line says so with the gateway's words."""
        if model in self._found or model in self.refused_models:
            return
        code = stream.log.status_code
        if code is not None and 200 <= code < 300:
            self._found.add(model)
        elif code == 404:
            self._not_found[model] += 1
            if self._not_found[model] >= NOT_FOUND_LIMIT:
                said = (
                    (stream.error or {}).get("message")
                    or getattr(stream.exception, "message", None)
                    or ""
                )
                said = printable(" ".join(str(said).split()))
                said = said if len(said) <= 300 else said[:299] + "…"
                self.refused_models[model] = said
                print(
                    f"nito: no more requests sent to {model!r}: its first {NOT_FOUND_LIMIT} were answered "
                    f"404 ({said or 'not found'}); check the model name (Client().models() lists them)",
                    file=sys.stderr,
                )
