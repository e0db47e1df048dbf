"""sim/replay: a recorded SSE body byte for byte, or a nito_nb log with its recorded timing.

Pure: the bytes of the recording (and of its SOURCES.tsv) come in; the server reads the files
(`_app._read_replay`).
"""

from __future__ import annotations

import dataclasses
import io

from .._core.log import LogFormatError, read_log_lines
from .._core.sse import SSEDecoder
from .._core.status import Status
from .._core.units import to_seconds
from ._options import SimOptions
from ._reply import ErrorReply, Event, Reply, StreamReply, error_reply


def sse_events(body: bytes) -> list[Event]:
    """An SSE body cut into its events by nito_nb's decoder (``_core/sse.py``: any line ending, a
    mix of them too): each data event a token, each comment sent at once, and the bytes after the
    last event (blank lines, a field without data) sent last. They concatenate back to the body."""
    decoder = SSEDecoder()
    decoded = decoder.decode(body) + decoder.flush()
    events = [Event("send" if e.is_comment else "token", e.raw) for e in decoded]
    used = sum(len(e.raw) for e in decoded)
    if used < len(body):
        events.append(Event("send", body[used:]))
    return events


def replay_sse(body: bytes, status: int = 200, content_type: str | None = None) -> Reply:
    """Replay a recorded SSE body byte for byte, its data events paced like tokens.

    A recording without timing gets the request's pacing; an error status returns the body whole.
    """
    if status != 200:
        return ErrorReply(status, body, content_type)
    return StreamReply(sse_events(body), status, content_type or "text/event-stream")


_NOT_REPLAYED_HEADERS = frozenset(
    {"content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive",
     "date", "server"}
)  # fmt: skip


def replay_log(body: bytes, speed: float, name: str = "the log") -> Reply:
    """Replay a saved nito_nb log (read by nito_nb's reader, ``_core/log.py``) with its recorded
    timing divided by `speed`.

    `speed` 0 means as fast as possible. A log that ended truncated is replayed with the
    connection cut at the same place. Not a log: LogFormatError.
    """
    log, recorded = read_log_lines(io.BytesIO(body), repr(name))
    scale = 0.0 if speed == 0 else 1.0 / speed
    t0 = log.t0_ns
    headers_dt = 0.0 if log.headers_ns is None else to_seconds(log.headers_ns - t0)
    events: list[Event] = []
    for t_ns, _kind, raw in recorded:
        offset = max(0.0, to_seconds(t_ns - t0) - headers_dt) * scale
        events.append(Event("at", raw, seconds=offset))
    if log.end.get("status") == Status.TRUNCATED:
        events.append(Event("drop"))
    status = log.status_code or 200
    recorded_headers = dict(log.headers)  # lower-case names, without credentials
    content_type = recorded_headers.pop("content-type", None)
    # Keep what the gateway said (retry-after, request ids...), not how the bytes were framed:
    # the log holds the decoded body, and the server frames it anew.
    headers = {k: v for k, v in recorded_headers.items() if k not in _NOT_REPLAYED_HEADERS}
    if status != 200:
        return ErrorReply(status, b"".join(raw for _, _, raw in recorded), content_type, headers)
    return StreamReply(
        events,
        status,
        content_type or "text/event-stream",
        headers,
        headers_delay_s=headers_dt * scale,
    )


def recorded_status(sources_tsv: str, filename: str) -> tuple[int, str | None] | None:
    """The `http_status` and `content_type` of a recording, from a SOURCES.tsv table."""
    rows = [line.split("\t") for line in sources_tsv.splitlines() if line.strip()]
    if not rows:
        return None
    columns = rows[0]
    try:
        file_col, status_col = columns.index("file"), columns.index("http_status")
    except ValueError:
        return None
    type_col = columns.index("content_type") if "content_type" in columns else None
    for row in rows[1:]:
        if len(row) > max(file_col, status_col) and row[file_col] == filename:
            content_type = row[type_col] if type_col is not None and len(row) > type_col else ""
            try:
                return int(row[status_col]), content_type or None
            except ValueError:
                return None
    return None


def replay_file(
    name: str, body: bytes, options: SimOptions, sources_tsv: str | None = None
) -> Reply:
    """The reply that replays the recording `name` (its bytes: `body`) under the request's options.

    A nito_nb log (`.jsonl`, or a body that starts like one) keeps its recorded timing and status;
    a `.sse` body takes its status and content type from the `sources_tsv` table beside it, if
    any. `sim.status` and `sim.content_type` override both; a streamed body under an error
    status is sent whole, as a gateway sends an error.
    """
    reply: Reply
    if name.endswith(".jsonl") or body.startswith(b'{"nito_nb_log"'):
        try:
            reply = replay_log(body, options.speed, name)
        except LogFormatError as exc:
            return error_reply(400, f"sim.replay: {exc}")
    else:
        status, content_type = 200, None
        if sources_tsv is not None:
            status, content_type = recorded_status(sources_tsv, name) or (status, content_type)
        reply = replay_sse(body, options.status or status, options.content_type or content_type)
    if options.status or options.content_type:
        reply = dataclasses.replace(
            reply,
            status=options.status or reply.status,
            content_type=options.content_type or reply.content_type,
        )
    if isinstance(reply, StreamReply) and reply.status != 200:
        # A streamed body under an error status (an override): send it whole, like a gateway.
        data = b"".join(e.data for e in reply.events)
        reply = ErrorReply(reply.status, data, reply.content_type)
    return reply
