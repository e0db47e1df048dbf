"""``engine="ray"``: a run's requests sent by Ray actors, on any node of a Ray cluster.

The driver (the Run, in the notebook) keeps the schedule, the backoff's in-flight limit, the
panel and the store: it hands each request to an actor when it is due and gets the whole log of
its stream back (every chunk with its arrival time, on the actor's own clock, so durations never
mix two machines' clocks). Each actor is one asyncio loop with at most ``per_worker`` streams in
flight (Ray's ``max_concurrency`` of an async actor). Retries before the first byte happen in the
actor, by the client's own rule (``max_retries``): the run-wide 429 backoff of the asyncio engine
is not shared across actors.

An actor that dies (killed, its node lost) fails the requests it had in flight, each with the
reason (status ``failed``); it is taken out of the pool and the run goes on with the others.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import tempfile
import time
from typing import Any

from .._core.errors import ConfigurationError
from .._core.log import ChunkLog
from .._recorded import from_events
from .._stream import Stream
from ._plan import Request

__all__ = ["RayEngine", "Worker"]


class Worker:
    """The actor's class (wrapped by ``ray.remote`` when the engine starts)."""

    def __init__(self, name: str, connection: dict[str, Any], max_retries: int) -> None:
        self.name = name
        self.connection = connection
        self.max_retries = max_retries
        self.client: Any = None

    def where(self) -> tuple[str, str, int]:
        """(worker name, node id, pid)."""
        import ray

        return self.name, ray.get_runtime_context().get_node_id(), os.getpid()

    async def send(self, messages: list[dict[str, Any]], model: str, params: dict[str, Any]) -> str:
        """Stream one request to its end; return its log as JSON Lines (``Stream.save``'s format)."""
        from .._client import AsyncClient
        from .._core.errors import NitoError

        if self.client is None:
            self.client = AsyncClient(max_retries=self.max_retries)
        stream = self.client.stream(messages, model=model, raise_errors=False, **self.connection, **params)
        try:
            await stream.wait(raise_errors=False)
        except NitoError as exc:  # refused before the body: the log says how
            stream = exc.stream if exc.stream is not None else stream
        return "\n".join(stream.log.to_lines()) + "\n"


def _from_text(text: str) -> Stream:
    """The Stream of a log sent back by an actor (the same events, times and status)."""
    from .._recorded import load

    fd, path = tempfile.mkstemp(suffix=".jsonl", prefix="nito-ray-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return load(path)
    finally:
        os.unlink(path)


def failed_stream(request: Request, message: str, status: str = "failed") -> Stream:
    """A Stream without a byte that ended ``failed`` with ``message`` (what a dead worker leaves)
    or ``stopped`` (the run was stopped before the actor sent it back)."""
    log = ChunkLog({"model": request.model, "messages": request.messages, **request.params},
                   t0_ns=time.perf_counter_ns())
    log.end = {"status": status, "exception": "ConnectionLost", "message": message}
    return from_events(log, [])


class RayEngine:
    """A pool of ``workers`` Ray actors, each with at most ``per_worker`` streams in flight."""

    def __init__(self, workers: int | None, per_worker: int, connection: dict[str, Any], max_retries: int) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigurationError("engine='ray' needs Ray: pip install 'nito_nb[ray]'") from None
        if isinstance(per_worker, bool) or not isinstance(per_worker, int) or per_worker < 1:
            raise ConfigurationError(f"per_worker must be a whole number >= 1, not {per_worker!r}")
        if not ray.is_initialized():  # a local cluster; call ray.init(address=...) first for a real one
            ray.init(include_dashboard=False, log_to_driver=False)
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ConfigurationError(f"workers must be a whole number >= 1, not {workers!r}")
        remote = ray.remote(Worker).options(max_concurrency=per_worker, num_cpus=0)
        # The key is never sent through Ray's object store unless the user gave one explicitly.
        self._actors: dict[str, Any] = {
            f"ray-{i}": remote.remote(f"ray-{i}", connection, max_retries) for i in range(workers)
        }
        self.nodes: dict[str, str] = {}
        for name, actor in self._actors.items():
            _, node, _ = ray.get(actor.where.remote())
            self.nodes[name] = node
        self._turn = itertools.cycle(list(self._actors))
        self._load: dict[str, int] = dict.fromkeys(self._actors, 0)
        self.per_worker = per_worker

    @property
    def alive(self) -> list[str]:
        return list(self._actors)

    def actor(self, name: str) -> Any:
        return self._actors[name]

    def _pick(self) -> str | None:
        if not self._actors:
            return None
        return min(self._actors, key=lambda name: self._load[name])  # the least loaded worker

    async def send(self, request: Request) -> tuple[Stream, str | None, str | None]:
        """(the request's Stream, worker, node). A dead worker gives a failed Stream."""
        import ray
        from ray.exceptions import RayActorError

        name = self._pick()
        if name is None:
            return failed_stream(request, "no Ray worker is left: every worker of the run died"), None, None
        self._load[name] += 1
        try:
            ref = self._actors[name].send.remote(request.messages, request.model, dict(request.params))
            try:
                text = await ref
            except asyncio.CancelledError:
                ray.cancel(ref)
                raise
        except RayActorError as exc:
            self._actors.pop(name, None)
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            message = f"the Ray worker {name} died while this request was in flight ({reason[:300]})"
            return failed_stream(request, message), name, self.nodes.get(name)
        finally:
            self._load[name] -= 1
        return _from_text(text), name, self.nodes.get(name)

    def close(self) -> None:
        import ray

        for actor in self._actors.values():
            ray.kill(actor)
        self._actors.clear()
