"""sim/replay: a recorded SSE body byte for byte, or a nito_nb log with its recorded timing.

Pure: the bytes of the recording (and of its SOURCES.tsv) come in; the server reads the files
(`_app._read_replay`).
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Sequence

from ._options import SimOptions
from ._reply import ErrorReply, Event, Reply, StreamReply, error_reply, split_sse


def _is_data(piece: bytes) -> bool:
    return any(line.startswith(b"data:") for line in piece.lstrip().splitlines())


def replay_sse(body: bytes, status: int = 200, content_type: str | None = None) -> Reply:
    """Replay a recorded SSE body byte for byte, its data events paced like tokens.

    A recording without timing gets the request's pacing; an error status returns the body whole.
    """
    if status != 200:
        return ErrorReply(status, body, content_type)
    events = [Event("token" if _is_data(p) else "send", p) for p in split_sse(body)]
    return StreamReply(events, status, content_type or "text/event-stream")


_NOT_REPLAYED_HEADERS = frozenset(
    {"content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive",
     "date", "server"}
)  # fmt: skip


def replay_log(lines: Sequence[str], speed: float) -> Reply:
    """Replay a saved nito_nb log (JSON Lines) with its recorded timing divided by `speed`.

    `speed` 0 means as fast as possible. A log that ended truncated is replayed with the
    connection cut at the same place.
    """
    header = json.loads(lines[0])
    if not isinstance(header, dict) or "nito_nb_log" not in header:
        raise ValueError("not a nito_nb log: the first line has no 'nito_nb_log' key")
    scale = 0.0 if speed == 0 else 1.0 / speed
    headers_dt = (header.get("headers_dt_ns") or 0) / 1e9
    events: list[Event] = []
    body = bytearray()
    truncated = False
    for line in lines[1:]:
        if not line.strip():
            continue
        record = json.loads(line)
        if "end" in record:
            end = record["end"]
            truncated = isinstance(end, dict) and end.get("status") == "truncated"
            continue
        if "raw_b64" in record:
            raw = base64.b64decode(record["raw_b64"])
        else:
            raw = str(record.get("raw", "")).encode()
        body += raw
        offset = max(0.0, record.get("dt_ns", 0) / 1e9 - headers_dt) * scale
        events.append(Event("at", raw, seconds=offset))
    if truncated:
        events.append(Event("drop"))
    status = int(header.get("status_code") or 200)
    recorded = {str(k).lower(): str(v) for k, v in (header.get("headers") or {}).items()}
    content_type = recorded.pop("content-type", None)
    # Keep what the gateway said (retry-after, request ids...), not how the bytes were framed:
    # the log holds the decoded body, and the server frames it anew.
    headers = {k: v for k, v in recorded.items() if k not in _NOT_REPLAYED_HEADERS}
    if status != 200:
        return ErrorReply(status, bytes(body), content_type, headers)
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
            reply = replay_log(body.decode("utf-8").splitlines(), options.speed)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            return error_reply(400, f"sim.replay: {name} is not a nito_nb log: {exc}")
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
