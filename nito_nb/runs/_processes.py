"""``engine="processes"``: a run's requests sent by N local worker processes.

Like ``engine="ray"`` (``_ray.py``) without Ray: the driver (the Run) keeps the schedule, the
in-flight limit, the panel and the store, and hands each request to the least loaded worker over
a pipe; each worker is one asyncio loop with at most ``per_worker`` streams in flight and sends
back each stream's whole log (arrival times on its own clock). Workers are started with
``spawn`` (a fork of a process that runs threads can deadlock). A worker that dies fails the
requests it had in flight, with the reason, and leaves the pool; the run goes on.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import threading
from typing import Any

from .._core.errors import ConfigurationError
from .._stream import Stream
from ._plan import Request
from ._ray import _from_text, failed_stream

__all__ = ["ProcessEngine"]


def _worker_main(conn: Any, connection: dict[str, Any], max_retries: int, per_worker: int) -> None:
    """A worker process: requests in through ``conn``, logs out."""
    try:
        asyncio.run(_serve(conn, connection, max_retries, per_worker))
    except KeyboardInterrupt:  # the notebook's interrupt reaches the whole process group
        pass


async def _serve(conn: Any, connection: dict[str, Any], max_retries: int, per_worker: int) -> None:
    from .._client import AsyncClient
    from .._core.errors import NitoError
    from .._stream import AsyncStream

    loop = asyncio.get_running_loop()
    client = AsyncClient(max_retries=max_retries)
    limit = asyncio.Semaphore(per_worker)
    tasks: set[asyncio.Task[None]] = set()

    async def one(rid: int, messages: list[dict[str, Any]], model: str, params: dict[str, Any]) -> None:
        async with limit:
            stream = client.stream(messages, model=model, raise_errors=False, **connection, **params)
            try:
                await stream.wait(raise_errors=False)
            except NitoError as exc:  # refused before the body: the log says how
                stream = exc.stream if isinstance(exc.stream, AsyncStream) else stream
            conn.send((rid, "\n".join(stream.log.to_lines()) + "\n"))

    while True:
        try:
            message = await loop.run_in_executor(None, conn.recv)
        except (EOFError, OSError):  # the driver is gone
            break
        if message is None:
            break
        task = asyncio.ensure_future(one(*message))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    for task in list(tasks):
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class _Worker:
    def __init__(self, name: str, ctx: Any, connection: dict[str, Any], max_retries: int, per_worker: int) -> None:
        self.name = name
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker_main, args=(child, connection, max_retries, per_worker),
                                   name=f"nito_nb-{name}", daemon=True)
        self.process.start()
        child.close()
        self.pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[str]]] = {}
        self.alive = True
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, name=f"nito_nb-{name}-reader", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        """Resolve each request's future with its log; fail them all when the worker dies."""
        while True:
            try:
                rid, text = self.conn.recv()
            except (EOFError, OSError):
                break
            with self.lock:
                found = self.pending.pop(rid, None)
            if found is not None:
                loop, future = found
                loop.call_soon_threadsafe(_resolve, future, text, None)
        self.alive = False
        self.process.join(timeout=5)
        code = self.process.exitcode
        reason = f"exit code {code}" if code is not None else "its pipe closed"
        with self.lock:
            pending, self.pending = self.pending, {}
        for loop, future in pending.values():
            try:
                loop.call_soon_threadsafe(_resolve, future, None, reason)
            except RuntimeError:  # the run's loop already closed
                pass


def _resolve(future: asyncio.Future[Any], text: str | None, died: str | None) -> None:
    if future.done():
        return
    if died is not None:
        future.set_exception(_WorkerDied(died))
    else:
        future.set_result(text)


class _WorkerDied(Exception):
    pass


class ProcessEngine:
    """``workers`` local processes (default: one per core), each with at most ``per_worker``
    streams in flight."""

    def __init__(self, workers: int | None, per_worker: int, connection: dict[str, Any], max_retries: int) -> None:
        if workers is None:
            workers = os.cpu_count() or 1
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ConfigurationError(f"workers must be a whole number >= 1, not {workers!r}")
        if isinstance(per_worker, bool) or not isinstance(per_worker, int) or per_worker < 1:
            raise ConfigurationError(f"per_worker must be a whole number >= 1, not {per_worker!r}")
        ctx = multiprocessing.get_context("spawn")
        self._workers = {f"proc-{i}": _Worker(f"proc-{i}", ctx, connection, max_retries, per_worker)
                         for i in range(workers)}
        self._load = dict.fromkeys(self._workers, 0)
        self._next_id = 0
        self.node = socket.gethostname()

    @property
    def alive(self) -> list[str]:
        return [name for name, w in self._workers.items() if w.alive]

    def pid(self, name: str) -> int:
        pid = self._workers[name].process.pid
        assert pid is not None
        return pid

    async def send(self, request: Request) -> tuple[Stream, str | None, str | None]:
        """(the request's Stream, worker, node). A dead worker gives a failed Stream."""
        alive = self.alive
        if not alive:
            return failed_stream(request, "no worker process is left: every worker of the run died"), None, None
        name = min(alive, key=lambda n: self._load[n])
        worker = self._workers[name]
        self._next_id += 1
        rid = self._next_id
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        with worker.lock:
            worker.pending[rid] = (asyncio.get_running_loop(), future)
        self._load[name] += 1
        try:
            try:
                worker.conn.send((rid, request.messages, request.model, dict(request.params)))
            except (OSError, ValueError) as exc:  # the pipe broke: the worker is gone
                with worker.lock:
                    worker.pending.pop(rid, None)
                raise _WorkerDied(f"its pipe broke: {exc}") from None
            text = await future
        except _WorkerDied as exc:
            message = f"the worker process {name} died while this request was in flight ({exc})"
            return failed_stream(request, message), name, self.node
        finally:
            self._load[name] -= 1
            with worker.lock:
                worker.pending.pop(rid, None)
        return _from_text(text), name, self.node

    def close(self) -> None:
        for worker in self._workers.values():
            try:
                worker.conn.send(None)
            except (OSError, ValueError):
                pass
        for worker in self._workers.values():
            worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
