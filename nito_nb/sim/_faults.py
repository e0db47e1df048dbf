"""Faults of a gateway: the fault scenarios (an error chunk, a cut, a stall, garbage, HTTP errors)
and `sim.fail_rate`, which makes any model fail on a share of requests picked by hash."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ._options import SimOptions
from ._reply import DONE, ErrorReply, Event, error_reply
from ._request import SimRequest, request_digest
from ._texts import CHAT_ANSWERS
from ._writer import ChunkWriter, Generate


def _partial_chat(w: ChunkWriter, tokens: int) -> tuple[list[Event], list[Event]]:
    events = list(w.contents(CHAT_ANSWERS[0]))
    return events[:tokens], events[tokens:]


def _error_midstream(w: ChunkWriter) -> Iterator[Event]:
    head, _ = _partial_chat(w, 40)
    yield from head
    yield from w.error("Upstream provider disconnected (simulated fault).")


def _drop(w: ChunkWriter) -> Iterator[Event]:
    head, _ = _partial_chat(w, 40)
    yield from head
    yield Event("drop")


def _stall(w: ChunkWriter) -> Iterator[Event]:
    head, tail = _partial_chat(w, 30)
    yield from head
    yield Event("pause", seconds=w.request.options.stall_s)
    yield from tail
    yield from w.finish("stop")


def _garbage(w: ChunkWriter) -> Iterator[Event]:
    head, tail = _partial_chat(w, 30)
    yield from head
    yield Event("send", b'data: {"id": "' + w.id.encode() + b'", this is not JSON\n\n')
    yield from tail
    yield from w.finish("stop")


def http_error(model: str, options: SimOptions) -> ErrorReply:
    if model == "sim/http-401":
        return error_reply(401, "No auth credentials found (simulated: sim/http-401).")
    if model == "sim/http-402":
        return error_reply(
            402,
            "Insufficient credits: add credits to continue (simulated: sim/http-402).",
            {"balance": 0.0},
        )
    if model == "sim/http-429":
        retry = options.retry_after
        retry_text = str(int(retry)) if retry == int(retry) else str(retry)
        return error_reply(
            429,
            "Rate limit exceeded: retry shortly (simulated: sim/http-429).",
            {"provider_name": "sim", "retry_after_seconds": retry},
            **{"Retry-After": retry_text},
        )
    if model == "sim/http-503":
        return error_reply(503, "No provider available for this model (simulated: sim/http-503).")
    html = (
        "<html>\r\n<head><title>500 Internal Server Error</title></head>\r\n<body>\r\n"
        "<center><h1>500 Internal Server Error</h1></center>\r\n"
        "<hr><center>nito_nb-sim</center>\r\n</body>\r\n</html>\r\n"
    )
    return ErrorReply(500, html.encode(), "text/html")


FAULT_STREAMS: dict[str, Generate] = {
    "sim/error-midstream": _error_midstream,
    "sim/drop": _drop,
    "sim/stall": _stall,
    "sim/garbage": _garbage,
}


def picked_to_fail(request: SimRequest) -> bool:
    """Whether `sim.fail_rate` picks this request: a pure function of (model, messages, seed),
    so that a flaky run is the same run every time."""
    rate = request.options.fail_rate
    if rate <= 0:
        return False
    return int(request_digest(request)[:12], 16) / float(1 << 48) < rate


def fault_status(options: SimOptions) -> ErrorReply:
    status = int(options.fail_status)
    message = f"Simulated fault (sim.fail_rate): HTTP {status}."
    if status == 429:
        retry = options.retry_after
        return error_reply(429, message, {"provider_name": "sim"}, **{"Retry-After": f"{retry:g}"})
    return error_reply(status, message)


#: A mid-stream fault comes after this many events of the answer (fewer if it is shorter).
FAULT_AFTER_EVENTS = 8


def fault_midstream(events: Iterable[Event], w: ChunkWriter, kind: str) -> Iterator[Event]:
    """The first events of the answer, then the connection cut ("drop") or an error chunk."""
    for n, event in enumerate(events):
        if n >= FAULT_AFTER_EVENTS or event.data == DONE:
            break
        yield event
    if kind == "drop":
        yield Event("drop")
        return
    yield from w.error("Upstream provider disconnected (simulated: sim.fail_rate).")
