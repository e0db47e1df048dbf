"""One request of a run sent by workers (``engine="processes"`` or ``"ray"``): the driver's side.

Each attempt is one send by a worker; workers never retry. Retrying here, in the driver, is what
makes a 429 seen by any worker slow the whole run: it goes into the run's one ``Backoff``
(``backoff.py``, behind the run's ``Gate``), which holds every dispatch of the driver, and the
driver tells every worker to hold what it has queued until the same moment (``engine.pause``);
the ramp back up is the backoff's, as with the default engine. The retry rule is the client's
own (``_client/retry.py``), and a 401, 402 or 403 ends the run, as there: both through the
``Dispatcher``'s ``retry_or_finish`` (``dispatch.py``), whose public methods are all this uses.

Times: the worker's stream comes back with its log's origin on the driver's clock (``clock.py``),
so ``sent_at`` is the moment the worker actually sent the first attempt (after any wait in its
own queue), on the run's timeline; its durations stay the worker's.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import time
from typing import TYPE_CHECKING

from .._core.errors import NitoError, RateLimitError
from .._core.status import Status
from .._core.units import to_ns
from .plan import Request
from .ray import Recalled, failed_stream

if TYPE_CHECKING:
    from .dispatch import Dispatcher
    from .processes import ProcessEngine
    from .ray import RayEngine

__all__ = ["send_remote"]


async def send_remote(
    dispatcher: Dispatcher,
    engine: RayEngine | ProcessEngine,
    request: Request,
    started: _dt.datetime,
    timing: dict[str, float | None],
) -> None:
    """Send ``request`` through ``engine`` until it ends or may not be retried; hand it to the
    dispatcher (``finish``).
    A scheduled first attempt is handed over ahead and sent by the worker at its time (SEND_LEAD)."""
    loop = asyncio.get_running_loop()
    attempts = 0
    while True:
        asked = dispatcher.now()
        await dispatcher.gate.acquire()
        # refused while it waited: not sent
        if not attempts and request.model in dispatcher.refused_models:
            dispatcher.gate.release()
            return
        if not attempts:
            dispatcher.held(timing, asked)
        now = dispatcher.now()
        attempts += 1
        dispatcher.stats.attempted()
        # A scheduled first attempt is handed over up to SEND_LEAD ahead: the worker sends it at its time.
        scheduled = timing["scheduled_at"] if attempts == 1 else None
        send_at_ns = (
            None
            if scheduled is None or scheduled <= now
            else time.time_ns() + to_ns(scheduled - now)
        )
        # its send, for all the driver knows
        dispatched = now if scheduled is None else max(now, scheduled)
        try:
            stream, worker, node, sent, health = await engine.send(request, send_at_ns)
        except Recalled as recalled:  # stopped as it streamed: the worker sent back what arrived
            if recalled.health is not None:
                dispatcher.stats.client.add(*recalled.health)
            if timing["sent_at"] is None:
                timing["sent_at"] = dispatcher.on_timeline(recalled.stream)
                started = recalled.stream.log.t0_wall
            dispatcher.finish(
                request,
                recalled.stream,
                attempts,
                started,
                timing,
                worker=recalled.worker,
                node=recalled.node,
            )
            raise
        # stopped: the worker's stream is cancelled, nothing came back
        except asyncio.CancelledError:
            if scheduled is not None and dispatcher.now() < scheduled:
                raise  # stopped before its send time: left out, as the requests after it
            stream = failed_stream(
                request, "stopped before the worker sent the stream back", Status.STOPPED
            )
            if timing["sent_at"] is None:
                timing["sent_at"] = dispatched
            dispatcher.finish(request, stream, attempts, started, timing, worker=None, node=None)
            raise
        finally:
            dispatcher.gate.release()
        # the worker's loop is the client too: its lag counts (client_load.py)
        if health is not None:
            dispatcher.stats.client.add(*health)
        if timing["sent_at"] is None:
            if sent:  # the worker's own send of the first attempt, on the run's timeline
                timing["sent_at"] = dispatcher.on_timeline(stream)
                started = stream.log.t0_wall
            else:  # the worker died: when the driver handed the request over is all there is
                timing["sent_at"] = dispatched
        error = stream.exception if sent and stream.status == Status.FAILED else None
        if not isinstance(error, NitoError):  # a result (done, error, truncated), or a dead worker
            if stream.status == Status.DONE:
                dispatcher.gate.succeeded()
            dispatcher.finish(request, stream, attempts, started, timing, worker=worker, node=node)
            return
        delay = dispatcher.retry_or_finish(
            request, stream, error, attempts, started, timing, loop.time(), worker=worker, node=node
        )
        if isinstance(error, RateLimitError):  # every worker holds what it has queued, too
            engine.pause(time.time_ns() + to_ns(dispatcher.gate.backoff.wait(loop.time())))
        if delay is None:
            return
        if not isinstance(error, RateLimitError):  # a 429 waits in the run's gate, with everyone
            await asyncio.sleep(delay)
