"""``engine="processes"``: a run's requests sent by N local worker processes.

Like ``engine="ray"`` (``_ray.py``) without Ray: the driver (the Run) keeps the schedule, the
in-flight limit, the panel and the store, and hands each attempt of a request to the least
loaded worker over a pipe; each worker is one asyncio loop with at most ``per_worker`` streams in
flight and sends back each stream's whole log (arrival times on its own clock) with its clock's
offset, so that the driver can put the log's origin on its own timeline (``_clock.py``). Workers
never retry: retries and the run's shared 429 backoff happen in the driver (``_remote.py``),
which sends every worker a pause ("nothing before this wall time") when a 429 comes back.
A worker that dies fails the requests it had in flight, with the reason, and leaves the pool; the
run goes on.

A worker is ``python -m nito_nb._runs.worker_main FD``, a new interpreter (a fork of a process
that runs threads can deadlock) that talks over one socket pair, not a ``multiprocessing``
``spawn`` child: ``spawn`` runs the user's script again in every worker (to import its
``__main__``), so a script without an ``if __name__ == "__main__":`` guard started the run again
in each worker, multiprocessing refused that, every worker died, and every request failed with
"every worker of the run died". What a worker needs (the connection, with any ``api_key``) goes
over the socket, never on its command line.
"""

from __future__ import annotations

import asyncio
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from .._client.endpoint import Simulator
from .._core.counts import whole
from .._core.errors import ConfigurationError, Secret, redact
from .._core.log import ChunkLog
from .._core.state import StreamState
from .._recordings import to_wire
from . import gc as _gc
from .client_load import ClientMonitor, Health
from .clock import Hold, offset_ns
from .plan import Request
from .ray import (
    RECALL_S,
    Recalled,
    Sent,
    failed_stream,
    from_worker,
    least_loaded,
    start_endpoints,
    unsent_stream,
    worker_stream,
)

__all__ = ["ProcessEngine"]


def main(argv: list[str]) -> None:
    """A worker process (``python -m nito_nb._runs.worker_main FD``): its settings, then requests
    (and pauses) in through the socket ``FD``, logs out."""
    conn = Connection(int(argv[1]))
    try:
        settings = conn.recv()
    except (EOFError, OSError):  # the run ended before this worker started
        return
    _worker_main(conn, *settings)


def _worker_main(
    conn: Any,
    connection: dict[str, Any],
    per_worker: int,
    models: list[str],
    simulator: Simulator | None = None,
) -> None:
    """A worker: requests (and pauses) in through ``conn``, logs out. ``simulator``: the
    driver's simulator process (its URL and token: they came through the socket, pickled, not on
    the worker's command line), where this worker's ``sim/`` models go."""
    if simulator is not None:
        from .._client import register_simulator

        register_simulator(lambda: simulator)
    try:
        asyncio.run(_serve(conn, connection, per_worker, models))
    except KeyboardInterrupt:  # the notebook's interrupt reaches the whole process group
        pass


async def _serve(conn: Any, connection: dict[str, Any], per_worker: int, models: list[str]) -> None:
    from .._client import AsyncClient

    loop = asyncio.get_running_loop()
    client = AsyncClient(max_retries=0)  # one attempt per message: the driver retries
    monitor = ClientMonitor(worker=True)  # this loop's lag, sent back with each log
    sampler = asyncio.ensure_future(monitor.sample())
    # What is old is frozen, as in the driver (_gc.py): this loop takes the arrival times, and a
    # full pass of the collector stops it while chunks arrive; they are then read together and
    # stamped with the last one's arrival. Frozen once, at the start, the streams' own objects
    # were walked by every full pass (70,000-150,000 at 250 paced streams: 30-70 ms of CPU a
    # pass), and the timing errors were 30-100 ms at p99 (docs/LOAD.md).
    _gc.begin()
    settler = asyncio.ensure_future(_gc.settling())
    await client.warm()  # a first request's one-time work, before the run's schedule starts
    start_endpoints(connection, models)
    conn.send(READY)  # the run's schedule starts once every worker can send (ProcessEngine)
    limit = asyncio.Semaphore(per_worker)
    hold = Hold()
    # The requests in flight, by id: for the driver's ("stop", id), and cancelled at the end.
    running: dict[int, asyncio.Task[None]] = {}

    replies = _Replies(conn)

    def answer(rid: int, stream: Any) -> None:
        replies.send(
            (rid, None if stream is None else to_wire(stream), offset_ns(), monitor.drain())
        )

    async def one(
        rid: int,
        messages: list[dict[str, Any]],
        model: str,
        params: dict[str, Any],
        send_at_ns: int | None,
    ) -> None:
        try:
            async with limit:
                await hold.wait()  # a request queued here waits out the run's pause too
                stream = await worker_stream(
                    client, connection, messages, model, params, send_at_ns
                )
        except Recalled as recalled:  # the run was stopped as it streamed: what arrived goes back
            answer(rid, recalled.stream)
            return
        except asyncio.CancelledError:  # stopped before its send: None says nothing was sent
            answer(rid, None)
            return
        except Exception as exc:  # a reply for every request, or the run waits for it forever
            # NitoError: not a connection error, so the driver does not retry it. The key is
            # taken out of the message, as the Stream takes it out of everything it keeps.
            key = Secret.of(connection.get("api_key") or os.environ.get("NITO_API_KEY"))
            message = redact(f"the worker failed: {type(exc).__name__}: {exc}", key)[:500]
            answer(rid, unsent_stream(model, messages, params, message, exception="NitoError"))
            return
        finally:
            running.pop(rid, None)
        answer(rid, stream)

    ended = loop.create_future()

    def receive() -> None:
        # The pipe is read by the loop's own reader callback: with a thread blocked in recv()
        # (run_in_executor), every request paid a thread wake-up and a GIL hand-over before it
        # could start, about a millisecond of its send delay on a 2-core machine.
        try:
            while conn.poll():
                message = conn.recv()
                if message is None:  # the run is over
                    raise EOFError
                if message[0] == "pause":  # ("pause", wall_ns): send nothing before then
                    hold.until(message[1])
                    continue
                # ("stop", id): the run was stopped; one that ended is not here
                if message[0] == "stop":
                    stopping = running.get(message[1])
                    if stopping is not None:
                        stopping.cancel()
                    continue
                running[message[0]] = asyncio.ensure_future(one(*message))  # one() takes itself out
        except (EOFError, OSError):  # the driver is gone, or said so
            if not ended.done():
                ended.set_result(None)

    loop.add_reader(conn.fileno(), receive)
    try:
        await ended
    finally:
        loop.remove_reader(conn.fileno())
    tasks = [*running.values(), sampler, settler]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    replies.close()  # the stopped requests' replies too
    _gc.end()  # frozen objects given back (a worker run in a thread of a test's process)


class _Replies:
    """A worker's replies, written to the driver by a thread of their own, in order.

    A reply waits in the socket until the driver reads it, and a busy driver reads late: sent
    from the loop, a reply to a full socket held the loop, which reads the streams and stamps
    their reads, and the chunks that arrived meanwhile were read together, each stamped with the
    last one's arrival (at the end of 500 paced streams on two workers: 24-31 of a worker's 250
    sends waited over 1 ms, up to 42 ms; docs/LOAD.md). The thread waits instead, without the GIL."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._waiting: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._write, name="nito_nb-worker-replies", daemon=True
        )
        self._thread.start()

    def send(self, message: Any) -> None:
        self._waiting.put(message)

    def close(self) -> None:
        """Write what waits, then end the thread."""
        self._waiting.put(None)
        self._thread.join()

    def _write(self) -> None:
        while (message := self._waiting.get()) is not None:
            try:
                self._conn.send(message)
            except (OSError, ValueError):  # the driver is gone: nobody to tell
                return


class _Worker:
    def __init__(
        self,
        name: str,
        connection: dict[str, Any],
        per_worker: int,
        models: list[str],
        simulator: Simulator | None,
    ) -> None:
        self.name = name
        ours, theirs = socket.socketpair()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "nito_nb._runs.worker_main", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                env=_worker_env(),
                stdin=subprocess.DEVNULL,
            )  # its stdout and stderr are this process's: a crash says why there
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()  # the worker's end: its copy is its own
        self.conn = Connection(ours.detach())
        try:
            self.conn.send((connection, per_worker, models, simulator))
        except OSError:  # it died already: its reader below finds it so, and says how it ended
            pass
        self.pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[_Reply]]] = {}
        self.alive = True
        self.ready = threading.Event()  # set when the worker can send (or has died)
        self.lock = threading.Lock()
        self.reader = threading.Thread(
            target=self._read, name=f"nito_nb-{name}-reader", daemon=True
        )
        self.reader.start()

    def _read(self) -> None:
        """Resolve each request's future with its log; fail them all when the worker dies."""
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                break
            if message == READY:
                self.ready.set()
                continue
            rid, sent, worker_offset, health = message
            with self.lock:
                found = self.pending.pop(rid, None)
            if found is not None:
                loop, future = found
                loop.call_soon_threadsafe(_resolve, future, (sent, worker_offset, health), None)
        self.alive = False
        self.ready.set()
        try:
            code: int | None = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        reason = _gone(code, "its pipe closed")
        with self.lock:
            pending, self.pending = self.pending, {}
        for loop, future in pending.values():
            try:
                loop.call_soon_threadsafe(_resolve, future, None, reason)
            except RuntimeError:  # the run's loop already closed
                pass


def _worker_env() -> dict[str, str]:
    """This environment, with this process's import path first: a worker imports this very
    nito_nb (found, maybe, through a ``sys.path`` entry of the script's own)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
    return env


#: What a worker sends once it can send requests.
READY = "ready"
#: How long a run waits for its workers to start (a busy machine imports slowly); then it starts anyway.
READY_TIMEOUT = 120.0


def max_workers(cores: int) -> int:
    """The most worker processes a run starts on a machine with ``cores`` cores: each one is a
    Python interpreter (about 60 MB, a second to start), and each loop sends up to ``per_worker``
    streams, so past a few per core they only compete for the cores."""
    return max(64, 4 * cores)


#: A worker's reply: the stream (``_recorded.to_wire``), its clock's offset, its loop's new lag and CPU samples.
_Reply = tuple[StreamState | ChunkLog, int, Health]


def _resolve(future: asyncio.Future[Any], reply: _Reply | None, died: str | None) -> None:
    if future.done():
        return
    if died is not None:
        future.set_exception(_WorkerDied(died))
    else:
        future.set_result(reply)


class _WorkerDied(Exception):
    pass


def _gone(code: int | None, otherwise: str) -> str:
    """Why a worker's requests failed: its exit code when it has one, else ``otherwise``."""
    return f"exit code {code}" if code is not None else otherwise


class ProcessEngine:
    """``workers`` local processes (default: one per core), each with at most ``per_worker``
    streams in flight. ``simulator``: the driver's simulator process (URL and token), for ``sim/``
    models (else each worker starts its own in-process one)."""

    def __init__(
        self,
        workers: int | None,
        per_worker: int,
        connection: dict[str, Any],
        models: list[str] | None = None,
        *,
        simulator: Simulator | None = None,
    ) -> None:
        models = list(models or [])  # the run's: each worker starts what their first request would
        if workers is None:
            workers = os.cpu_count() or 1
        workers = whole("workers", workers)
        cores = os.cpu_count() or 1
        if workers > max_workers(cores):  # they are started one by one: workers=10**6 never ended
            raise ConfigurationError(
                f"workers={workers} is more local processes than this machine's {cores} cores can run: at most "
                f"{max_workers(cores)} (each sends up to per_worker streams at once); for more, "
                "engine='ray' on a cluster"
            )
        per_worker = whole("per_worker", per_worker)
        if os.name != "posix":  # a worker's loop watches its socket (add_reader), and inherits it
            raise ConfigurationError(
                "engine='processes' needs a POSIX system (Linux, macOS): use engine='asyncio'"
            )
        self._workers: dict[str, _Worker] = {}
        try:
            for i in range(workers):
                self._workers[f"proc-{i}"] = _Worker(
                    f"proc-{i}", connection, per_worker, models, simulator
                )
        except BaseException:
            self.close()  # those started end with their socket
            raise
        self._load = dict.fromkeys(self._workers, 0)
        self._last: str | None = None
        self._next_id = 0
        self.node = socket.gethostname()
        # As the Ray engine waits for its actors: a schedule that started while the workers were
        # still importing (about a second) had every request of its first second sent that late
        # (send delay p50 610 ms over the first second at 65 requests/s, 3.5 ms after).
        deadline = time.monotonic() + READY_TIMEOUT
        for worker in self._workers.values():
            worker.ready.wait(max(0.0, deadline - time.monotonic()))

    @property
    def alive(self) -> list[str]:
        return [name for name, w in self._workers.items() if w.alive]

    def pid(self, name: str) -> int:
        return self._workers[name].process.pid

    def pause(self, wall_ns: int) -> None:
        """Tell every worker to send nothing before this wall time (the run's shared 429 pause)."""
        for name in self.alive:
            try:
                self._workers[name].conn.send(("pause", wall_ns))
            except (OSError, ValueError):  # the worker is gone: nothing to hold
                pass

    async def send(self, request: Request, send_at_ns: int | None = None) -> Sent:
        """One attempt of the request, by the least loaded worker, sent at the wall time
        ``send_at_ns`` if given (else at once). A dead worker gives a failed Stream."""
        alive = self.alive
        if not alive:
            return Sent(
                failed_stream(request, "no worker process is left: every worker of the run died"),
                None,
                None,
                False,
            )
        name = self._last = least_loaded(alive, self._load, self._last)
        worker = self._workers[name]
        self._next_id += 1
        rid = self._next_id
        future: asyncio.Future[_Reply] = asyncio.get_running_loop().create_future()
        with worker.lock:
            worker.pending[rid] = (asyncio.get_running_loop(), future)
        self._load[name] += 1
        try:
            try:
                worker.conn.send(
                    (rid, request.messages, request.model, dict(request.call), send_at_ns)
                )
            except (OSError, ValueError) as exc:  # the pipe broke: the worker is gone
                with worker.lock:
                    worker.pending.pop(rid, None)
                # Its exit code when it has one (a killed worker is reaped by now, nearly
                # always), as for the requests its reader fails (_read).
                raise _WorkerDied(_gone(worker.process.poll(), f"its pipe broke: {exc}")) from None
            try:
                # Shielded: a stopped run cancels this wait, not the reply, which may still come.
                sent, worker_offset, health = await asyncio.shield(future)
            except asyncio.CancelledError:
                recalled = await self._recall(worker, rid, future)
                # nothing came back, or nothing was sent
                if recalled is None or recalled[0] is None:
                    raise
                sent, worker_offset, health = recalled
                raise Recalled(from_worker(sent, worker_offset), name, self.node, health) from None
        except _WorkerDied as exc:
            message = f"the worker process {name} died while this request was in flight ({exc})"
            return Sent(failed_stream(request, message), name, self.node, False)
        finally:
            self._load[name] -= 1
            with worker.lock:
                worker.pending.pop(rid, None)
        return Sent(from_worker(sent, worker_offset), name, self.node, True, health)

    async def _recall(
        self, worker: _Worker, rid: int, future: asyncio.Future[_Reply]
    ) -> _Reply | None:
        """The run was stopped: ask the worker to stop request ``rid`` and wait (``RECALL_S`` at
        most) for what arrived, as the default engine keeps a stopped stream's chunks. None if
        the worker is gone or slow; a reply whose stream is None: it had not sent the request."""
        try:
            worker.conn.send(("stop", rid))
        except (OSError, ValueError):  # the worker is gone
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(future), RECALL_S)
        except (asyncio.TimeoutError, _WorkerDied):
            return None

    def close(self) -> None:
        for worker in self._workers.values():
            try:
                worker.conn.send(None)
            except (OSError, ValueError):
                pass
        for worker in self._workers.values():
            try:
                worker.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
            worker.conn.close()
