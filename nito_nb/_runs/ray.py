"""``engine="ray"``: a run's requests sent by Ray actors, on any node of a Ray cluster.

The driver (the Run, in the notebook) keeps the schedule, the backoff's in-flight limit, the
panel and the store: it hands each attempt of a request to an actor when it is due and gets the
whole log of its stream back (every chunk with its arrival time, on the actor's own clock, so
durations never mix two machines' clocks; the log's origin is moved onto the driver's timeline,
``_clock.py``). Each actor is one asyncio loop with at most ``per_worker`` streams in flight
(Ray's ``max_concurrency`` of an async actor). Actors never retry: retries and the run's shared
429 backoff happen in the driver (``_remote.py``), which also tells every actor to hold its
sends while the run is paused.

An actor that dies (killed, its node lost) fails the requests it had in flight, each with the
reason (status ``failed``); it is taken out of the pool and the run goes on with the others.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
from typing import Any, NamedTuple

from .._client.endpoint import Simulator
from .._core.counts import whole
from .._core.errors import ConfigurationError
from .._core.log import ChunkLog
from .._core.state import StreamState
from .._core.status import Status
from .._recordings import from_events, from_wire, to_wire
from .._stream import Stream
from . import gc as _gc
from .client_load import ClientMonitor, Health
from .clock import Hold, loop_time, offset_ns, to_local_ns
from .plan import Request

__all__ = ["RayEngine", "Recalled", "Sent", "Worker", "worker_stream"]


#: How long a stopped run waits for a worker to send back a stopped stream (what arrived).
RECALL_S = 2.0


class Sent(NamedTuple):
    """What a worker gave back for one attempt."""

    stream: Stream
    worker: str | None
    node: str | None
    #: True when the stream is the worker's own (its ``log.t0_ns`` is the attempt's send, on the
    #: driver's timeline); False for a stream the driver made (the worker died, none was left).
    sent: bool
    #: The worker loop's lag, CPU and run-queue wait samples since its last reply (``ClientMonitor.drain``).
    health: Health | None = None


class Worker:
    """The actor's class (wrapped by ``ray.remote`` when the engine starts)."""

    def __init__(
        self,
        name: str,
        connection: dict[str, Any],
        models: list[str] | None = None,
        simulator: tuple[Simulator, str] | None = None,
    ) -> None:
        self.name = name
        self.connection = connection
        self.models = models or []
        #: (the driver's simulator process: its URL and token, the driver's node id): where this
        #: actor's sim/ models go when it runs on that node (a loopback URL: not from another).
        #: The token comes as an argument of the actor (pickled by Ray), never on a command line.
        self.simulator = simulator
        self.own_simulator = False  # it starts an in-process one of its own (_setup)
        self.client: Any = None
        self.hold = Hold()
        self.monitor: ClientMonitor | None = None
        self.sampler: Any = None
        self.settler: Any = None
        #: The sends in flight, by the driver's call id: their loop, their task, and what they
        #: leave when stopped (a stopped stream, or None if nothing was sent), for ``recall``.
        self.running: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Task[Any], Any]] = {}

    async def where(self) -> tuple[str, str, int, bool]:
        """(worker name, node id, pid, whether its sim/ models go to an in-process simulator of its
        own), once the actor can send: the engine asks every actor before the run's schedule starts."""
        import ray

        await self._setup()
        return self.name, ray.get_runtime_context().get_node_id(), os.getpid(), self.own_simulator

    async def _setup(self) -> None:
        from .._client import AsyncClient
        from .._client.endpoint import is_embedded

        if self.client is None:
            import ray

            here = ray.get_runtime_context().get_node_id()
            if self.simulator is not None and self.simulator[1] == here:
                from .._client import register_simulator

                simulator = self.simulator[0]
                register_simulator(lambda: simulator)
            else:
                self.own_simulator = any(
                    is_embedded(m, self.connection.get("base_url")) for m in self.models
                )
            self.client = AsyncClient(max_retries=0)  # one attempt: the driver retries
            self.monitor = ClientMonitor(worker=True)  # its loop's lag, sent back with each log
            self.sampler = asyncio.ensure_future(self.monitor.sample())
            # What is old is frozen, at the start and then every SETTLE_EVERY seconds, and the
            # young pass waits longer, as in the driver and in a worker process (gc.py,
            # processes.py's _serve): frozen once, a full pass walked every stream the actor
            # had made since, with its loop (which stamps the reads) stopped. The actor is
            # killed at the run's end, so nothing hands the objects back (no _gc.end()).
            _gc.begin()
            self.settler = asyncio.ensure_future(_gc.settling())
            await self.client.warm()  # a first request's one-time work
            start_endpoints(self.connection, self.models)

    async def pause(self, wall_ns: int) -> None:
        """Send nothing before this wall time (the run's shared 429 pause)."""
        self.hold.until(wall_ns)

    async def send(
        self,
        messages: list[dict[str, Any]],
        model: str,
        params: dict[str, Any],
        send_at_ns: int | None = None,
        call_id: int | None = None,
    ) -> tuple[StreamState | ChunkLog, int, Health]:
        """Send one attempt (at the wall time ``send_at_ns`` if given: it is handed over ahead of its
        scheduled send, the Run's SEND_LEAD) and stream it to its end; return the stream (``_recorded.to_wire``),
        this process's clock offset (``_clock.py``) and its loop's new lag and CPU samples
        (``_client_load.py``). ``call_id``: the driver's, for ``recall``."""
        await self._setup()
        left: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if call_id is not None:
            self.running[call_id] = (asyncio.get_running_loop(), asyncio.current_task(), left)  # type: ignore[assignment]
        try:
            await self.hold.wait()
            stream = await worker_stream(
                self.client, self.connection, messages, model, params, send_at_ns
            )
        except Recalled as recalled:
            left.set_result(to_wire(recalled.stream))
            raise
        except asyncio.CancelledError:
            left.set_result(None)
            raise
        finally:
            self.running.pop(call_id, None)  # type: ignore[arg-type]
        assert self.monitor is not None
        return to_wire(stream), offset_ns(), self.monitor.drain()

    async def recall(
        self, call_id: int
    ) -> tuple[StreamState | ChunkLog | None, int, Health] | None:
        """The run was stopped: stop the send ``call_id`` and return what it left, as ``send``
        would (its stream None if it had sent nothing); None if it is not here (queued in Ray,
        or ended). Called in the "control" group, whose loop is not the sends' (Ray gives each
        concurrency group its own): the task is cancelled in its own loop."""
        found = self.running.get(call_id)
        if found is None:
            return None
        loop, task, left = found
        loop.call_soon_threadsafe(task.cancel)
        try:
            sent = await asyncio.wait_for(asyncio.wrap_future(left), RECALL_S)
        except asyncio.TimeoutError:
            return None
        assert self.monitor is not None
        return sent, offset_ns(), self.monitor.drain()


def start_endpoints(connection: dict[str, Any], models: list[str]) -> None:
    """Do now, before the run's schedule starts, what a worker's first request of each model
    would do before its send: for a ``sim/`` model without a base URL, start this process's
    embedded simulator. It took 70 ms, which made every worker's first request 28-70 ms late
    (send delay; under 1.5 ms for the next ones, and for the asyncio engine, whose process had it
    running already)."""
    from .._client.endpoint import endpoint

    for model in models:
        try:
            endpoint(model, connection.get("base_url"))
        except Exception:  # the request itself says what is wrong, as its result
            pass


async def worker_stream(
    client: Any,
    connection: dict[str, Any],
    messages: list[dict[str, Any]],
    model: str,
    params: dict[str, Any],
    send_at_ns: int | None,
) -> Any:
    """One attempt of a worker (a Ray actor or a worker process), sent at the wall time
    ``send_at_ns`` if given (handed over ahead of its scheduled send: the Run's SEND_LEAD), read
    to its end; the ended AsyncStream, also when it was refused before the body (its log says how)."""
    from .._core.errors import NitoError
    from .._stream import AsyncStream
    from .._stream_source import source_of

    try:
        if params.get("images"):  # read again here, off the loop (images.py)
            from .images import read_again

            params = {**params, "images": await read_again(params["images"])}
        stream = client.stream(messages, model=model, raise_errors=False, **connection, **params)
    except ConfigurationError as exc:  # an image of its row changed or went since it was planned
        body = {name: value for name, value in params.items() if name != "images"}
        return unsent_stream(model, messages, body, str(exc), exception="ConfigurationError")
    if send_at_ns is not None:
        source_of(stream).send_at(loop_time(send_at_ns))
    try:
        await stream.wait(raise_errors=False)
    except NitoError as exc:
        stream = exc.stream if isinstance(exc.stream, AsyncStream) else stream
    # the run was stopped: wait() stopped the stream, what arrived is kept
    except asyncio.CancelledError:
        if source_of(stream).waiting_to_send:
            raise  # nothing was sent: nothing to give back
        if not stream.finished:
            await stream.aclose()
        raise Recalled(stream) from None
    return stream


class Recalled(asyncio.CancelledError):
    """A stream stopped by the run as it streamed (``stream``: what arrived, status ``stopped``),
    raised in the worker and, with where it ran and the worker's health samples, in the driver:
    the Run keeps a stopped request's chunks, as with the default engine. A CancelledError
    still: whoever does not look for it is cancelled as before."""

    def __init__(
        self,
        stream: Any,
        worker: str | None = None,
        node: str | None = None,
        health: Health | None = None,
    ) -> None:
        super().__init__()
        self.stream, self.worker, self.node, self.health = stream, worker, node, health


def least_loaded(names: list[str], load: dict[str, int], last: str | None) -> str:
    """The worker with the fewest requests in flight; among equals, the next one after ``last``
    in turn. (Ties went to the first: a run whose requests each end before the next is due sent
    every one to the same worker.)"""
    start = names.index(last) + 1 if last in names else 0
    return min(names[start:] + names[:start], key=load.__getitem__)


def from_worker(sent: StreamState | ChunkLog, worker_offset_ns: int) -> Stream:
    """The Stream a worker sent back (``_recorded.to_wire``: its ended state, or its log), its
    times moved onto this process's clock (``_clock.py``). Pickled, not as JSON Lines through a
    file and ``load``, which cost the driver's loop 8 ms per request and made the driver the
    bottleneck of engine="processes"."""
    sent.shift(to_local_ns(0, worker_offset_ns, offset_ns()))
    return from_wire(sent)


def failed_stream(request: Request, message: str, status: str = Status.FAILED) -> Stream:
    """A Stream without a byte that ended ``failed`` with ``message`` (what a dead worker leaves)
    or ``stopped`` (the run was stopped before the actor sent it back)."""
    return unsent_stream(request.model, request.messages, request.params, message, status)


def unsent_stream(
    model: str,
    messages: list[dict[str, Any]],
    params: dict[str, Any],
    message: str,
    status: str = Status.FAILED,
    exception: str = "ConnectionLost",
) -> Stream:
    """``failed_stream`` of a request given by its parts (a worker's: it has no Request), its
    error the ``nito_nb.errors`` class named ``exception``."""
    log = ChunkLog({"model": model, "messages": messages, **params}, t0_ns=time.perf_counter_ns())
    log.end = {"status": status, "exception": exception, "message": message}
    return from_events(log, [])


class RayEngine:
    """A pool of ``workers`` Ray actors, each with at most ``per_worker`` streams in flight."""

    def __init__(
        self,
        workers: int | None,
        per_worker: int,
        connection: dict[str, Any],
        models: list[str] | None = None,
        *,
        simulator: Simulator | None = None,
    ) -> None:
        # Checked before Ray is imported and started (seconds): a bad count is refused at once.
        per_worker = whole("per_worker", per_worker)
        if workers is not None:
            workers = whole("workers", workers)
        try:
            import ray
        except ImportError:
            raise ConfigurationError("engine='ray' needs Ray: pip install 'nito_nb[ray]'") from None
        # a local cluster; call ray.init(address=...) first for a real one
        if not ray.is_initialized():
            ray.init(include_dashboard=False, log_to_driver=False)
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        # The pause runs in a "control" group of its own: it never queues behind the sends that hold
        # every slot of the default group (concurrency_groups is an argument of ray.remote, not .options).
        # (Ray's type stubs leave out the actor options of this form.)
        remote = ray.remote(
            max_concurrency=per_worker,
            concurrency_groups={"control": 1},  # type: ignore[call-overload]
            num_cpus=0,
        )(Worker)
        # The key is never sent through Ray's object store unless the user gave one explicitly.
        # The driver's simulator process serves the actors of the driver's node; an actor on
        # another node cannot reach its loopback URL and starts its own in-process one.
        here = (
            (simulator, ray.get_runtime_context().get_node_id()) if simulator is not None else None
        )
        self._actors: dict[str, Any] = {
            f"ray-{i}": remote.remote(f"ray-{i}", connection, models, here) for i in range(workers)
        }
        self.nodes: dict[str, str] = {}
        #: Whether some actor serves sim/ models from a simulator in its own process (its work
        #: then counts as the client's: ``ClientMonitor.simulator``).
        self.simulator_in_workers = False
        for name, actor in self._actors.items():
            _, node, _, own = ray.get(actor.where.remote())
            self.nodes[name] = node
            self.simulator_in_workers |= own
        self._load: dict[str, int] = dict.fromkeys(self._actors, 0)
        self._last: str | None = None
        self._next_id = 0
        self.per_worker = per_worker

    @property
    def alive(self) -> list[str]:
        return list(self._actors)

    def actor(self, name: str) -> Any:
        return self._actors[name]

    def _pick(self) -> str | None:
        if not self._actors:
            return None
        self._last = least_loaded(list(self._actors), self._load, self._last)
        return self._last

    def pause(self, wall_ns: int) -> None:
        """Tell every actor to send nothing before this wall time (the run's shared 429 pause)."""
        for actor in self._actors.values():
            # Fire and forget (a dead actor has nothing to hold), past the sends queued in the actor.
            actor.pause.options(concurrency_group="control").remote(wall_ns)

    async def send(self, request: Request, send_at_ns: int | None = None) -> Sent:
        """One attempt of the request, by the least loaded actor, sent at the wall time ``send_at_ns``
        if given (else at once). A dead worker gives a failed Stream."""
        import ray
        from ray.exceptions import RayActorError

        name = self._pick()
        if name is None:
            return Sent(
                failed_stream(request, "no Ray worker is left: every worker of the run died"),
                None,
                None,
                False,
            )
        self._load[name] += 1
        self._next_id += 1
        call_id, actor = self._next_id, self._actors[name]
        try:
            ref = actor.send.remote(
                request.messages, request.model, dict(request.call), send_at_ns, call_id
            )
            try:
                sent, worker_offset, health = await ref
            # the run was stopped: what arrived comes back, as with the others
            except asyncio.CancelledError:
                recalled = await self._recall(actor, call_id)
                ray.cancel(ref)  # what is left of it: queued in Ray, not started
                if recalled is None or recalled[0] is None:
                    raise
                sent, worker_offset, health = recalled
                raise Recalled(
                    from_worker(sent, worker_offset), name, self.nodes.get(name), health
                ) from None
        except RayActorError as exc:
            self._actors.pop(name, None)
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            message = (
                f"the Ray worker {name} died while this request was in flight ({reason[:300]})"
            )
            return Sent(failed_stream(request, message), name, self.nodes.get(name), False)
        finally:
            self._load[name] -= 1
        return Sent(from_worker(sent, worker_offset), name, self.nodes.get(name), True, health)

    async def _recall(self, actor: Any, call_id: int) -> Any:
        """``Worker.recall`` of the send ``call_id``; None if the actor is gone or slow."""
        try:
            ref = actor.recall.options(concurrency_group="control").remote(call_id)
            return await asyncio.wait_for(asyncio.wrap_future(ref.future()), RECALL_S + 1.0)
        except Exception:  # a dead actor (RayActorError), a timeout: nothing comes back
            return None

    def close(self) -> None:
        import ray

        for actor in self._actors.values():
            ray.kill(actor)
        self._actors.clear()
