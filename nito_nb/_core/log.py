"""The chunk log: every event of a stream with the moment it arrived and its exact bytes. No I/O
except :meth:`ChunkLog.save` / :func:`read_log` (:func:`read_log_lines` reads lines already read).

Exact but for the key: whatever the gateway echoes of the request's key is taken out before an
event is logged, and an event already logged is written again (:meth:`ChunkLog.rewrite`) when a
later one completes a key it started (``_core/redaction.py``). A saved log, a frame and a store,
all made from the log, never hold it.

Stored in columns (arrival times and byte offsets in ``array('q')``, kinds in a ``bytearray``, all
raw bytes in one ``bytearray``) rather than one object per event: a stream then costs about its
raw bytes plus 17 bytes per event, where a list of event objects or parsed dicts would cost
several times the body (bench/bench_stream.py; docs/BENCHMARKS.md). Events are decoded again
from their bytes when someone looks at them.

A log that takes no more events and is kept long (a run's streams without a store) can be packed
(:meth:`ChunkLog.pack`): its times, offsets and bytes held as one zlib stream, about a 25th of
the body for the simulator's chunks, a 14th for OpenAI's; a run without a store otherwise kept
1.45 times its bodies (docs/BENCHMARKS.md). Every reading gives the same values, decompressed
for that reading and not kept.

A run of identical comments that arrived together (one read, one time) is logged one by one up
to ``COMMENT_RUN``, then counted on the last one logged (``Event.repeat``) instead of stored
again: a server that sends keep-alives by the million, as a compression bomb does, would
otherwise cost 30 bytes of log each (issue 28). Saved, such an event says ``"repeat": n``, and
loading it feeds its bytes n times, which counts them again the same way.
"""

from __future__ import annotations

import base64
import copy
import datetime as _dt
import json
import os
import time
import zlib
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .file_kinds import not_text
from .sse import ServerSentEvent, SSEDecoder
from .units import to_seconds

__all__ = [
    "COMMENT_RUN",
    "KINDS",
    "ChunkLog",
    "Event",
    "LogFormatError",
    "clean_headers",
    "read_log",
    "read_log_lines",
]

LOG_VERSION = 1
#: Identical comments of one read logged one by one before the rest of the run is only counted.
#: Far above what real streams send at once (tests/data/real: 30 in a row at most, in a recording
#: read whole), so that no real stream's log changes.
COMMENT_RUN = 64

#: Event kinds, in code order.
KINDS = ("chunk", "comment", "done", "bad-data", "empty", "other", "http-error")
CHUNK, COMMENT, DONE, BAD_DATA, EMPTY, OTHER, HTTP_ERROR = range(len(KINDS))

# Never kept: a log is saved, shown and shared. Lower-case header names.
_SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key"}
)


def clean_headers(headers: Any) -> dict[str, str]:
    """Headers as a plain dict, without anything that can carry a credential."""
    items = headers.items() if hasattr(headers, "items") else headers
    return {str(k).lower(): str(v) for k, v in items if str(k).lower() not in _SECRET_HEADERS}


class LogFormatError(ValueError):
    """A file that nito_nb cannot read as a stream: not a saved log (or a newer version of one),
    not a recorded SSE body."""


@dataclass(frozen=True)
class Event:
    """One logged event, decoded again from its raw bytes on demand."""

    seq: int
    t_ns: int  # time.perf_counter_ns() when the bytes that completed it were read
    t: float  # seconds since the request was sent
    kind: str
    raw: bytes
    #: How many times this event came in a row, at this time (a run of identical comments, see
    #: the module's docstring): its bytes stand for ``raw * repeat`` of the body.
    repeat: int = 1

    @property
    def sse(self) -> ServerSentEvent:
        if self.kind == "http-error":
            return ServerSentEvent(
                data=self.raw.decode("utf-8", "replace"), event="http-error", raw=self.raw
            )
        decoder = SSEDecoder()
        events = decoder.decode(self.raw) + decoder.flush()
        return events[-1] if events else ServerSentEvent(raw=self.raw)

    @property
    def data(self) -> str | None:
        return None if self.kind == "comment" else self.sse.data

    @property
    def comment(self) -> str | None:
        return self.sse.comment if self.kind == "comment" else None

    @property
    def event(self) -> str:
        return self.sse.event

    @property
    def chunk(self) -> dict[str, Any] | None:
        """The parsed chunk for ``kind == "chunk"``, else None."""
        if self.kind != "chunk":
            return None
        value = json.loads(self.sse.data)
        return value if isinstance(value, dict) else None


class ChunkLog:
    """Arrival times and raw bytes of every event, plus the request and response metadata."""

    #: The times, offsets and bytes compressed together while the log is packed (:meth:`pack`),
    #: else None. A class default: a log pickled before packing existed reads as not packed.
    _packed: bytes | None = None

    def __init__(
        self,
        request: dict[str, Any] | None = None,
        *,
        t0_ns: int = 0,
        t0_wall: _dt.datetime | None = None,
    ) -> None:
        self.request: dict[str, Any] = request or {}
        self.t0_ns = t0_ns
        self.t0_wall = t0_wall or _dt.datetime.now(_dt.timezone.utc)
        self.headers_ns: int | None = None
        #: How long the attempt that got the response spent opening its connection (name lookup,
        #: TCP, TLS; ns, a duration): docs/METRICS.md's ``connect``. None when unknown: no trace
        #: of it (a recording, a transport that is not httpcore's), a connection reused from a
        #: pool, or no connection made.
        self.connect_ns: int | None = None
        #: False for a recorded body read without its arrival times (``read_sse``): every event then
        #: carries the same time, and the timing metrics are unknown rather than zero.
        self.timed = True
        self.status_code: int | None = None
        #: Requests sent for this stream (more than 1 after retries); t0 is the first one's send.
        self.attempts = 1
        self.headers: dict[str, str] = {}
        self.end: dict[str, Any] = {}  # how the stream ended: status, error text; set by the Stream
        #: Set by :func:`read_log` when the file was cut (its last line incomplete, or no end
        #: record): what was lost. The complete events are loaded all the same.
        self.cut: str | None = None
        self._times = array("q")
        self._ends = array("q")
        self._kinds = bytearray()
        self._raw = bytearray()
        self._repeats: dict[int, int] = {}  # seq -> times it came, for the few events counted

    # -- writing -----------------------------------------------------------------------------

    def append(self, t_ns: int, kind: int, raw: bytes) -> None:
        if self._packed is not None:
            self._unpack()
        self._times.append(t_ns)
        self._raw += raw
        self._ends.append(len(self._raw))
        self._kinds.append(kind)

    def extend(self, t_ns: int, kinds: bytes | bytearray, raws: list[bytes]) -> None:
        """Several events that arrived with the same read (one call per read on the hot path)."""
        if self._packed is not None:
            self._unpack()
        ends, raw = self._ends, self._raw
        for piece in raws:
            raw += piece
            ends.append(len(raw))
        self._times.extend([t_ns] * len(raws))
        self._kinds += kinds

    def rewrite(self, seq: int, raw: bytes) -> None:
        """Event ``seq`` holds ``raw`` from now on, in place of its bytes: the key taken out of an
        event already logged, once a later event completes it (``_core/redaction.py``; the
        only change a logged event ever sees). Its time and kind stay."""
        if self._packed is not None:
            self._unpack()
        ends = self._ends
        start = ends[seq - 1] if seq else 0
        end = ends[seq]
        self._raw[start:end] = raw
        shift = len(raw) - (end - start)
        if shift:
            ends[seq:] = array("q", [offset + shift for offset in ends[seq:]])

    def count_again(self, seq: int) -> None:
        """Event ``seq`` came once more (the same comment, in the same read): count it."""
        self._repeats[seq] = self._repeats.get(seq, 1) + 1

    def last_is(self, kind: int, t_ns: int, raw: bytes) -> bool:
        """Whether the last event logged is of ``kind``, arrived at ``t_ns``, with these bytes."""
        kinds = self._kinds
        if not kinds or kinds[-1] != kind:
            return False
        times, ends, body = self._columns()
        if times[-1] != t_ns:
            return False
        start = ends[-2] if len(ends) > 1 else 0
        return ends[-1] - start == len(raw) and body[start : ends[-1]] == raw

    def repeat(self, seq: int) -> int:
        """How many times event ``seq`` came in a row (1 but for a counted run of comments)."""
        return self._repeats.get(seq, 1)

    def start(self, t0_ns: int | None = None) -> None:
        """The request leaves now (or left at ``t0_ns``, a ``perf_counter_ns`` reading): the
        origin of every time, on both clocks. ``t0_wall`` is the same moment; it was the moment
        the log was made, which for an AsyncStream (made when asked for, sent when first
        awaited) could be long before."""
        now = time.perf_counter_ns()
        self.t0_ns = now if t0_ns is None else t0_ns
        self.t0_wall = _dt.datetime.now(_dt.timezone.utc) - _dt.timedelta(
            microseconds=(now - self.t0_ns) / 1000
        )

    def shift(self, delta_ns: int) -> None:
        """Move every time of the log by ``delta_ns`` (onto another process's clock: ``_runs/clock.py``);
        every duration stays as it was."""
        self.t0_ns += delta_ns
        if self.headers_ns is not None:
            self.headers_ns += delta_ns
        packed = self._packed is not None
        if packed:
            self._unpack()
        self._times = array("q", [t + delta_ns for t in self._times])
        if packed:
            self.pack()

    def without_events(self) -> ChunkLog:
        """A log with this one's request, response metadata and end, and no event: what a Stream
        rebuilt from this log's events starts from (``_recorded.from_log``)."""
        empty = copy.copy(self)  # every field, whatever fields the log gains
        empty.end = dict(self.end)
        empty._times, empty._ends, empty._kinds, empty._raw = (
            array("q"),
            array("q"),
            bytearray(),
            bytearray(),
        )
        empty._repeats = {}
        empty._packed = None
        return empty

    def pack(self) -> None:
        """Hold the events' times, offsets and bytes compressed, for a log that takes no more
        events and is kept long (a run's streams without a store: the module's docstring). Every
        reading gives what it gave before, decompressed each time and not kept (a few tens of
        µs for a 50 KB body); the metadata and the kinds stay as they are. Writing to a packed
        log (an ended stream's never is) unpacks it first. Packing a packed log does nothing."""
        if self._packed is not None or not self._kinds:
            return
        # zlib's fastest level: 40 µs for a 52 KB sim/chat body, which it takes to 1.9 KB (level 6:
        # 150 µs for 1.7 KB). The times and offsets first, so that reading the times alone (a
        # snapshot's last event) decompresses only them. One call, which lets go of the GIL once
        # (a compressor object's calls did for each column).
        self._packed = zlib.compress(b"".join((self._times, self._ends, self._raw)), 1)
        self._times, self._ends, self._raw = array("q"), array("q"), bytearray()
        self._kinds = bytearray(self._kinds)  # copied at its exact size: no room to grow

    @property
    def packed(self) -> bool:
        """Whether the log is packed (:meth:`pack`)."""
        return self._packed is not None

    def _unpack(self) -> None:
        """The packed columns back in place, for a write."""
        times, ends, raw = self._columns()
        self._times, self._ends, self._raw = times, ends, bytearray(raw)
        self._packed = None

    def _columns(self, upto: int | None = None) -> tuple[array, array, bytes | bytearray]:
        """The times, the offsets and the bytes (up to offset ``upto``; None: all): the log's
        own when not packed, else decompressed (the bytes as they come out, not copied)."""
        packed = self._packed
        if packed is None:
            return self._times, self._ends, self._raw
        n = 8 * len(self._kinds)
        unpacker = zlib.decompressobj()
        head = memoryview(unpacker.decompress(packed, 2 * n))
        times, ends = array("q"), array("q")
        times.frombytes(head[:n])
        ends.frombytes(head[n:])
        raw = unpacker.decompress(unpacker.unconsumed_tail, 0 if upto is None else upto)
        return times, ends, raw

    def set_response(self, status_code: int, headers: Any, t_ns: int) -> None:
        self.status_code = status_code
        self.headers = clean_headers(headers)
        self.headers_ns = t_ns

    # -- reading -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._kinds)

    def __getitem__(self, seq: int) -> Event:
        n = len(self._kinds)
        if seq < 0:
            seq += n
        if not 0 <= seq < n:
            raise IndexError(f"event {seq} of a log with {n} events")
        # a packed log's decompressed up to the event's end, which its offsets (first) say
        upto = None if self._packed is None else self.offsets()[seq]
        return self._event(seq, *self._columns(upto))

    def _event(self, seq: int, times: array, ends: array, raw: bytes | bytearray) -> Event:
        start = ends[seq - 1] if seq else 0
        t_ns = times[seq]
        return Event(
            seq,
            t_ns,
            to_seconds(t_ns - self.t0_ns),
            KINDS[self._kinds[seq]],
            bytes(raw[start : ends[seq]]),
            self._repeats.get(seq, 1),
        )

    def __iter__(self) -> Iterator[Event]:
        times, ends, raw = self._columns()  # a packed log decompressed once, not once per event
        for seq in range(len(self._kinds)):
            yield self._event(seq, times, ends, raw)

    def times_ns(self) -> array:
        """When each event arrived (``array('q')`` of ``perf_counter_ns`` readings, in order). A
        packed log's are decompressed for this call: a new array each time."""
        packed = self._packed
        if packed is None:
            return self._times
        times = array("q")
        times.frombytes(zlib.decompressobj().decompress(packed, 8 * len(self._kinds)))
        return times

    def kind_codes(self) -> bytes:
        return bytes(self._kinds)

    def offsets(self) -> array:
        """Where each event's raw bytes end in :attr:`body` (``array('q')``, one per event, in
        order; event ``i`` is ``body[offsets[i-1]:offsets[i]]``). The live array: copy what you
        keep, a live Stream appends to it (and shifts it in the rare :meth:`rewrite`); a packed
        log's is a new one each time."""
        packed = self._packed
        if packed is None:
            return self._ends
        n = 8 * len(self._kinds)
        ends = array("q")
        ends.frombytes(zlib.decompressobj().decompress(packed, 2 * n)[n:])
        return ends

    def raw_slices(self) -> Iterator[bytes]:
        """The raw bytes of each event, in order (cheaper than building Events)."""
        _, ends, raw = self._columns()
        start = 0
        for end in ends:
            yield bytes(raw[start:end])
            start = end

    @property
    def body(self) -> bytes:
        """The body as it arrived (without bytes that made no event, such as trailing blank lines;
        a counted run of comments once: ``Event.repeat``)."""
        return bytes(self._columns()[2])

    def body_buffer(self) -> bytes | bytearray:
        """The body itself, not a copy: :attr:`body` copies it (``bytes`` must not change under
        its reader), a log-sized allocation that a frame of a long log could not afford (its
        peak memory: docs/BENCHMARKS.md). Only for a log that takes no more events (an ended
        stream's), read and never changed; while a buffer view of it is held (``memoryview``,
        ``np.frombuffer``), an event appended raises BufferError. A packed log's is decompressed
        for this call (``bytes``): the body's one copy, which the log does not keep."""
        return self._columns()[2]

    @property
    def nbytes(self) -> int:
        """Memory held by the log's columns (packed: the compressed ones and the kinds)."""
        if self._packed is not None:
            return len(self._packed) + len(self._kinds)
        return (
            len(self._raw)
            + self._times.itemsize * len(self._times)
            + self._ends.itemsize * len(self._ends)
            + len(self._kinds)
        )

    def __repr__(self) -> str:
        size = len(self._raw) if self._packed is None else (self.offsets()[-1:] or [0])[0]
        return f"<ChunkLog {len(self)} events, {size:,} bytes>"

    # -- files -------------------------------------------------------------------------------

    def to_lines(self) -> Iterator[str]:
        header = {
            "nito_nb_log": LOG_VERSION,
            "request": self.request,
            "t0_wall": self.t0_wall.isoformat(),
            "t0_ns": self.t0_ns,
            "status_code": self.status_code,
            "headers": self.headers,
            "headers_dt_ns": None if self.headers_ns is None else self.headers_ns - self.t0_ns,
            "connect_ns": self.connect_ns,
            "timed": self.timed,
            "attempts": self.attempts,
        }
        yield json.dumps(header, ensure_ascii=False)
        t0, repeats = self.t0_ns, self._repeats
        for seq, (t_ns, kind, raw) in enumerate(
            zip(self.times_ns(), self._kinds, self.raw_slices(), strict=True)
        ):
            line: dict[str, Any] = {"dt_ns": t_ns - t0}
            if kind == HTTP_ERROR:
                line["kind"] = KINDS[kind]
            if seq in repeats:
                line["repeat"] = repeats[seq]
            try:
                line["raw"] = raw.decode("utf-8")
            except UnicodeDecodeError:
                line["raw_b64"] = base64.b64encode(raw).decode("ascii")
            yield json.dumps(line, ensure_ascii=False)
        yield json.dumps({"end": self.end}, ensure_ascii=False)

    def save(self, path: str | os.PathLike[str]) -> None:
        with open(path, "w", encoding="utf-8") as f:
            for line in self.to_lines():
                f.write(line)
                f.write("\n")


def read_log(path: str | os.PathLike[str]) -> tuple[ChunkLog, list[tuple[int, int | None, bytes]]]:
    """Read a saved log: its metadata, and its events as (t_ns, kind code or None, raw bytes).

    The kind is None for SSE events: the Stream decodes them again to rebuild its state. A file
    that is not a log, or a line whose fields a save never writes (a hand edit), is a
    LogFormatError that names the line and what is wrong.
    """
    with open(path, "rb") as f:
        return read_log_lines(f, repr(os.fspath(path)))


def read_log_lines(
    f: Iterable[bytes], where: str
) -> tuple[ChunkLog, list[tuple[int, int | None, bytes]]]:
    """:func:`read_log` of a log's lines as bytes (a file open in binary mode, or
    ``io.BytesIO(body)`` for one already read, as the simulator's ``sim/replay`` has it);
    ``where`` names it in errors."""
    # Bytes, decoded line by line: a file that is not UTF-8 is then said to be so (it was a bare
    # UnicodeDecodeError), and a last line cut inside a character counts as cut, like any other.
    lines = iter(f)
    first = next(lines, b"")
    try:
        header = json.loads(first.decode("utf-8-sig"))  # -sig: an editor's BOM is harmless
    except UnicodeDecodeError:
        raise LogFormatError(f"{where} is not a nito_nb log: {_not_text(first)}") from None
    except ValueError:
        header = None
    if not isinstance(header, dict) or "nito_nb_log" not in header:
        raise LogFormatError(
            f"{where} is not a nito_nb log (its first line has no 'nito_nb_log' key). "
            "For a recorded SSE body use nito_nb.read_sse(path)."
        )
    version = header["nito_nb_log"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise LogFormatError(_bad_field(where, 1, "nito_nb_log", version, "a version number (1)"))
    if version > LOG_VERSION:
        raise LogFormatError(
            f"{where} is a version {version} log; this nito_nb reads up to version "
            f"{LOG_VERSION}: upgrade nito_nb."
        )
    log = _log_of(header, where)
    t0 = log.t0_ns
    events: list[tuple[int, int | None, bytes]] = []
    ended = False
    number = 1
    for number, line in enumerate(lines, start=2):
        if not line.strip():
            continue
        try:
            item = json.loads(line.decode("utf-8"))
            if not isinstance(item, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:  # UnicodeDecodeError included
            if any(rest.strip() for rest in lines):  # more lines follow: damaged, not cut
                what = "UTF-8 text" if isinstance(exc, UnicodeDecodeError) else "JSON"
                raise LogFormatError(f"line {number} of {where} is not {what}: {exc}") from None
            # The last line was cut (a copy or a save that did not finish): keep what is whole.
            log.cut = (
                f"the file was cut: its last line ({number}) is incomplete; the {len(events)} "
                "events before it are loaded"
            )
            break
        if "end" in item:
            if not isinstance(item["end"] or {}, dict):
                raise LogFormatError(_bad_field(where, number, "end", item["end"], "an object"))
            log.end = item["end"] or {}
            ended = True
            continue
        kind = KINDS.index(item["kind"]) if item.get("kind") in KINDS else None
        # What Stream.save writes (an int, a str) is taken as it is; the rest is checked.
        dt_ns = item.get("dt_ns", 0)
        if type(dt_ns) is not int:
            dt_ns = _whole(dt_ns, where, number, "dt_ns")
        text = item.get("raw")
        if type(text) is str and "raw_b64" not in item:
            try:
                raw = text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate (\ud800)
                raw = _event_raw(item, where, number)
        else:
            raw = _event_raw(item, where, number)
        if "repeat" in item:  # a counted run of comments: its bytes as often as they came
            raw *= _whole(item["repeat"], where, number, "repeat", at_least=1)
        events.append((t0 + dt_ns, kind, raw))
    if not ended and log.cut is None:  # Stream.save always writes the end record last
        log.cut = f"the file was cut after line {number}: it has no end record; its {len(events)} events are loaded"
    return log, events


def _log_of(header: dict[str, Any], where: str) -> ChunkLog:
    """The log of a saved header (line 1), each field checked: a hand-edited one of the wrong
    type was a TypeError or AttributeError from deep inside (or a log that broke later)."""
    request = header.get("request") or {}
    if not isinstance(request, dict):
        raise LogFormatError(_bad_field(where, 1, "request", request, "an object"))
    t0_wall = header.get("t0_wall")
    try:
        wall = _dt.datetime.fromisoformat(t0_wall) if t0_wall else None
    except (TypeError, ValueError):
        raise LogFormatError(
            _bad_field(where, 1, "t0_wall", t0_wall, "an ISO date and time")
        ) from None
    if wall is not None and wall.tzinfo is None:  # every time of a log is aware (UTC)
        wall = wall.replace(tzinfo=_dt.timezone.utc)
    t0 = _whole(header.get("t0_ns") or 0, where, 1, "t0_ns")
    log = ChunkLog(request, t0_ns=t0, t0_wall=wall)
    status = header.get("status_code")
    log.status_code = None if status is None else _whole(status, where, 1, "status_code")
    headers = header.get("headers") or {}
    if not isinstance(headers, dict):
        raise LogFormatError(_bad_field(where, 1, "headers", headers, "an object"))
    log.headers = clean_headers(headers)
    if header.get("headers_dt_ns") is not None:
        log.headers_ns = t0 + _whole(header["headers_dt_ns"], where, 1, "headers_dt_ns")
    if header.get("connect_ns") is not None:  # logs saved before the key have none
        log.connect_ns = _whole(header["connect_ns"], where, 1, "connect_ns")
    log.timed = header.get("timed") is not False  # logs saved before the key were all timed
    log.attempts = _whole(header.get("attempts") or 1, where, 1, "attempts")
    return log


def _event_raw(item: dict[str, Any], where: str, number: int) -> bytes:
    """An event line's bytes: its ``raw`` text, or ``raw_b64`` when they were not UTF-8."""
    if "raw_b64" in item:
        value = item["raw_b64"]
        try:
            return base64.b64decode(value, validate=True)
        except (TypeError, ValueError):  # binascii.Error is a ValueError
            raise LogFormatError(
                _bad_field(where, number, "raw_b64", value, "base64 text")
            ) from None
    value = item.get("raw", "")
    try:
        return value.encode("utf-8")
    except (AttributeError, UnicodeEncodeError):  # not a str, or a lone surrogate (\ud800)
        raise LogFormatError(_bad_field(where, number, "raw", value, "the event's text")) from None


def _whole(value: Any, where: str, number: int, name: str, at_least: int | None = None) -> int:
    """A count or a time in ns, as ``int()`` reads it (a float or a digit string of a hand edit
    still loads), else one line naming the field."""
    try:
        if isinstance(value, bool | list | dict) or value is None:
            raise TypeError
        whole = int(value)
        if at_least is not None and whole < at_least:
            raise ValueError
        return whole
    except (TypeError, ValueError, OverflowError):  # OverflowError: inf
        wanted = "a whole number" if at_least is None else f"a whole number >= {at_least}"
        raise LogFormatError(_bad_field(where, number, name, value, wanted)) from None


def _bad_field(where: str, number: int, name: str, value: Any, wanted: str) -> str:
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return (
        f"line {number} of {where}: {name!r} is {shown} ({type(value).__name__}), where a log saved "
        f"by Stream.save has {wanted}: the line was edited or damaged; fix it, or save the stream again"
    )


def _not_text(head: bytes) -> str:
    """What a file that is not UTF-8 text looks like (by its first bytes), and what to do."""
    return not_text(head, "a log saved by Stream.save is UTF-8 JSON Lines")
