"""The capacity model's shell: the app's schedulers, and the body of a request that holds a slot.

The model itself is pure (`_capacity.py`). Here: one `Scheduler` per model and capacity in a
simulator process, made on its first request in the server's event loop (whose clock it reads),
so the requests of one simulator process that name the same model with the same capacity share
one batch. A request that finds the slots and the queue full is refused at once (429 with
`Retry-After`); one that gets a ticket has its status and headers at once, a keep-alive comment
every `keepalive_s` while it waits in the queue, then its body when `served()` says each piece
is due. Its ticket leaves the scheduler however the response ends (done, cut, its client gone),
so that no slot is ever lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from ._capacity import Capacity, Scheduler, Ticket, served, with_metrics
from ._completion import collect_completion
from ._reply import KEEPALIVE, ErrorReply, Event, StreamReply, error_reply
from ._request import SimRequest
from ._sending import BATCH_BYTES, MIN_SLEEP_S, Shutdown, SimulatedDrop, stamped
from ._writer import prompt_tokens

#: Past this many schedulers (distinct models and capacities), the idle ones are forgotten.
MAX_SCHEDULERS = 64

Admitted = tuple[Scheduler, Ticket]


class Batches:
    """Every scheduler of one app, and the admissions its queued requests wait for."""

    def __init__(self, shutdown: Shutdown) -> None:
        self._shutdown = shutdown
        self._schedulers: dict[tuple[str, Capacity], Scheduler] = {}
        self._admissions: dict[Ticket, asyncio.Future[None]] = {}

    def scheduler(self, model: str, capacity: Capacity) -> Scheduler:
        key = (model, capacity)
        found = self._schedulers.get(key)
        if found is None:
            if len(self._schedulers) >= MAX_SCHEDULERS:
                for old in [k for k, s in self._schedulers.items() if s.idle]:
                    del self._schedulers[old]
            found = self._schedulers[key] = Scheduler(capacity, asyncio.get_running_loop().time)
        return found

    def arrive(self, request: SimRequest) -> Admitted | ErrorReply:
        """A slot or a place in the queue for `request`, or the 429 of a full server."""
        capacity = request.options.capacity
        assert capacity is not None
        scheduler = self.scheduler(request.model, capacity)
        ticket = scheduler.arrive(prompt_tokens(request))
        if ticket is None:
            retry = request.options.retry_after
            return error_reply(
                429,
                f"The server is at capacity: its {capacity.slots} slots are busy and {capacity.queue} requests"
                " wait in its queue (simulated: sim.capacity). Retry later, or send fewer requests at once.",
                {"provider_name": "sim", "retry_after_seconds": retry},
                **{"Retry-After": f"{retry:g}"},
            )
        return scheduler, ticket

    def leave(self, admitted: Admitted) -> None:
        scheduler, ticket = admitted
        self._admissions.pop(ticket, None)
        for next_ticket in scheduler.leave(ticket):
            waiting = self._admissions.get(next_ticket)
            if waiting is not None and not waiting.done():
                waiting.set_result(None)

    def stream(
        self,
        admitted: Admitted,
        request: SimRequest,
        reply: StreamReply,
        headers: Mapping[str, str],
    ) -> StreamingResponse:
        body = self._body(admitted, request, reply)
        return _Held(body, reply.status, headers=dict(headers), on_end=lambda: self.leave(admitted))

    async def complete(
        self, admitted: Admitted, request: SimRequest, reply: StreamReply
    ) -> ErrorReply | dict[str, Any]:
        """`stream: false`: the slot is held for the whole generation, then the merged answer,
        with the server's `metrics` at its top level when asked."""
        sent = bytearray()
        events = []
        try:
            async for data in self._body(admitted, request, reply):
                sent += data
        except SimulatedDrop:
            if self._shutdown.stopping:
                raise
            events.append(Event("drop"))
        finally:
            self.leave(admitted)
        result = collect_completion([Event("send", bytes(sent)), *events], request)
        if request.options.metrics and not isinstance(result, ErrorReply):
            result["metrics"] = admitted[1].metrics()
        return result

    async def _body(
        self, admitted: Admitted, request: SimRequest, reply: StreamReply
    ) -> AsyncIterator[bytes]:
        scheduler, ticket = admitted
        options = request.options
        loop = asyncio.get_running_loop()
        yield KEEPALIVE
        while ticket.admitted is None:  # in the queue: a comment now and then, as gateways send
            waiting = self._admissions.get(ticket)
            if waiting is None:
                waiting = self._admissions[ticket] = loop.create_future()
            await self._shutdown.wait(
                waiting, options.keepalive_s if options.keepalive_s > 0 else 3600.0
            )
            if ticket.admitted is None:
                yield KEEPALIVE
        self._admissions.pop(ticket, None)
        start = ticket.admitted
        buffer = bytearray()
        for piece in served(reply.events, scheduler, ticket, options.keepalive_s):
            wait = start + piece.due - loop.time()
            if wait > MIN_SLEEP_S:
                if buffer:
                    yield bytes(buffer)
                    buffer.clear()
                await self._shutdown.sleep(wait)
            if piece.data is None:
                if buffer:
                    yield bytes(buffer)
                await asyncio.sleep(0.01)  # the bytes already written leave before the cut
                raise SimulatedDrop("simulated connection drop")
            data = piece.data
            # The server's times are those of the writes (uvicorn hands a yielded piece to the
            # socket in the same turn of the loop): the first token and the last chunk are
            # written as soon as they are stamped, not batched with what follows.
            if piece.first:
                ticket.first_token = loop.time()
            if piece.last:
                ticket.last_chunk = loop.time()
                if options.metrics:
                    data = with_metrics(data, ticket.metrics())
            if options.stamp:
                yield stamped(data)
                continue
            buffer += data
            if piece.first or piece.last:
                yield bytes(buffer)
                buffer.clear()
            elif len(buffer) >= BATCH_BYTES:
                yield bytes(buffer)
                buffer.clear()
                await asyncio.sleep(0)  # give the other streams a turn
        if buffer:
            yield bytes(buffer)


class _Held(StreamingResponse):
    """A streamed response that calls `on_end` however it ends: done, failed, or cancelled when
    its client went away (a body never iterated would never run its own `finally`)."""

    def __init__(
        self,
        content: AsyncIterator[bytes],
        status_code: int,
        *,
        headers: dict[str, str],
        on_end: Callable[[], None],
    ) -> None:
        super().__init__(content, status_code, headers=headers)
        self._on_end = on_end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_end()
