"""Streams from recordings: a recorded SSE body (``read_sse``), a log saved by ``Stream.save``
(``load``), either one by what the file holds (``read_file``), or a store's events
(``from_events``). Each is a finished :class:`~nito_nb.Stream` fed through its producer, a
``StreamSource``, as the client feeds a live one, so a recording gives the same results as the
live stream it came from.
"""

from __future__ import annotations

import errno
import io
import os
import pickle
import zlib
from pathlib import Path
from typing import Any

from ._core import errors
from ._core.errors import (
    BodyTooLargeError,
    ConfigurationError,
    ConnectionLost,
    EventTooLargeError,
    NitoError,
    StreamTimeoutError,
    TotalTimeoutError,
)
from ._core.file_kinds import first_line_is_log, is_sse_text, looks_like_error_body, not_sse
from ._core.http_errors import error_details
from ._core.log import HTTP_ERROR, ChunkLog, LogFormatError, read_log
from ._core.state import StreamState
from ._core.status import Status
from ._stream import Stream
from ._stream_results import announce_end
from ._stream_source import StreamSource

__all__ = ["from_events", "load", "read_file", "read_sse"]


def read_sse(
    source: bytes | str | os.PathLike[str],
    *,
    request: dict[str, Any] | None = None,
    status_code: int | None = None,
) -> Stream:
    """A Stream from a recorded SSE body: bytes, the body as text, or a path to a file.

    A recorded HTTP error body (``status_code`` >= 400, or a JSON object with an ``error`` key)
    gives a Stream with status ``failed`` and its ``error`` and ``exception`` set.

    A str is the body itself when it reads as SSE text (it has a line break, or starts with an SSE
    field such as ``data:``, a ``:`` comment, or ``{`` as an error body does); any other str is a
    path, and a missing file is a FileNotFoundError. A file that holds no server-sent event at all
    (a CSV, a saved log, an HTML
    page) is a LogFormatError that says what it looks like and what reads it. Otherwise never
    raises for a mid-stream error or a truncated body: ``error``, ``done`` and ``status`` say what
    happened. The recording has no arrival times: ``timed`` is False, and ``ttft``, ``ttfb`` and
    ``elapsed`` are None (in a frame, ``t`` and ``gap`` are NaN).
    """
    path: Path | None = None
    if isinstance(source, (bytes, bytearray, memoryview)):
        body = bytes(source)
    elif isinstance(source, os.PathLike) or (isinstance(source, str) and not is_sse_text(source)):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(
                errno.ENOENT,
                "No such file (read_sse reads a str that is not SSE text as a path)",
                str(source),
            )
        body = path.read_bytes()
    elif isinstance(source, str):
        body = source.encode("utf-8")
    else:
        raise TypeError(f"read_sse takes bytes, str or a path, not {type(source).__name__}")
    producer = StreamSource(request, log=ChunkLog(request, t0_ns=0), raise_errors=False)
    stream = producer.stream
    stream.log.timed = False
    if (status_code is not None and status_code >= 400) or looks_like_error_body(body):
        # A recorded HTTP error (the gateway refused before streaming): keep the body, say why.
        if status_code is None:  # a bare body: its own error code is the best guess of the status
            code = error_details(body.decode("utf-8", "replace"))[1]
            status_code = int(code) if str(code).isdigit() and 400 <= int(code) < 600 else 400
        producer.fail_http(status_code, {}, body, 0)
        return stream
    stream.log.status_code = status_code
    producer.feed(body, 0)
    producer.end(0)
    if path is not None and not len(stream.log) and body.strip():
        raise LogFormatError(not_sse(path, body))
    return stream


def read_file(path: str | os.PathLike[str]) -> Stream:
    """A Stream from a file: a log saved by ``Stream.save`` (its first line says so, whatever the
    file's name), else a recorded SSE body. The one rule for ``frame(path)`` and ``--replay``."""
    path = _file_path(path, "nito_nb.read_file")
    with open(path, "rb") as f:
        head = f.readline(64 * 1024)
    return load(path) if first_line_is_log(head) else read_sse(Path(path))


def load(path: str | os.PathLike[str]) -> Stream:
    """A Stream from a log written by ``Stream.save``: the same events, times and results.

    ``path`` is the file's path (str or ``os.PathLike``); anything else, the log's text itself,
    or a folder is one ConfigurationError that says what to pass instead."""
    log, events = read_log(_file_path(path, "nito_nb.load"))
    return from_events(log, events)


def _file_path(value: Any, who: str) -> str | os.PathLike[str]:
    """``value`` when it names a file to open, else one line saying what ``who`` takes.

    An int would reach ``open()`` as a file descriptor, read and then closed (``load(0)`` closed
    stdin); bytes as a path; and a log's own text as a file name, whose error message echoed it
    (prompts and answers) in full. Neither is ever meant as a path here."""
    if isinstance(value, (bytes, bytearray, memoryview)) or (
        isinstance(value, str) and _is_text(value)
    ):
        text = bytes(value) if not isinstance(value, str) else value.encode("utf-8", "replace")
        if isinstance(value, str) and os.path.isfile(value):
            return value  # an odd file name, but a file: read it
        what = "a saved log's text" if b'"nito_nb_log"' in text[:4096] else "a file's content"
        unit = "characters" if isinstance(value, str) else "bytes"
        raise ConfigurationError(  # its size, never the text: a log holds the prompts
            f"{who} takes the path of a file, not {what} ({len(value):,} {unit}): write it to "
            "a file and pass its path (pathlib.Path('run.jsonl').write_text(text)); a recorded SSE "
            "body as text or bytes is read by nito_nb.read_sse(text)"
        )
    if not isinstance(value, (str, os.PathLike)):
        raise ConfigurationError(
            f"{who} takes the path of a file (a str or pathlib.Path), not {type(value).__name__}"
        )
    if os.path.isdir(value):
        raise ConfigurationError(
            f"{os.fspath(value)!r} is a folder: {who} reads one file; nito_nb.frame(folder) reads "
            "every .jsonl and .sse file in it"
        )
    return value


def _is_text(value: str) -> bool:
    """A str that is a file's content rather than its name: more than one line, or JSON."""
    return "\n" in value or "\r" in value or value.lstrip().startswith("{")


def from_events(log: ChunkLog, events: list[tuple[int, int | None, bytes]]) -> Stream:
    """A finished Stream from a log's metadata (its ``end`` included) and its events as
    (t_ns, kind code or None, raw bytes): what ``load`` reads from a file, or a store from
    its tables."""
    end = dict(log.end)
    source = StreamSource(log.request, log=log, raise_errors=False)
    log.end = {}
    # Events of one read (one time) are fed together, as they arrived: the decoder reads any
    # split the same way (tests/test_sse.py), and one feed per read instead of per event made
    # rebuilding a worker's 269-event stream about three times cheaper.
    read, read_ns = bytearray(), 0
    for t_ns, kind, raw in events:
        if read and (kind == HTTP_ERROR or t_ns != read_ns):
            source.feed(bytes(read), read_ns)
            read.clear()
        if kind == HTTP_ERROR:
            log.append(t_ns, kind, raw)
        else:
            read += raw
            read_ns = t_ns
    if read:
        source.feed(bytes(read), read_ns)
    if log.cut is not None:  # what was complete is loaded; the stream says the file was cut
        source.note("cut-log", log.cut)
    last = events[-1][0] if events else log.t0_ns
    status = end.get("status")
    if status == Status.FAILED:
        _refail(source, end)
        return source.stream
    # Only statuses that the bytes alone cannot tell are taken from the file.
    exception: NitoError | None = None
    kind = end.get("exception")
    if status == Status.TRUNCATED and kind in (
        "ConnectionLost",
        "StreamTimeoutError",
        "TotalTimeoutError",
    ):
        cls = {"ConnectionLost": ConnectionLost, "StreamTimeoutError": StreamTimeoutError}.get(
            kind, TotalTimeoutError
        )
        exception = cls(end.get("message") or "")
    elif status == Status.TRUNCATED and kind == "EventTooLargeError":
        exception = EventTooLargeError(end.get("message") or "", size=None, limit=None)
    elif status == Status.TRUNCATED and kind == "BodyTooLargeError":
        exception = BodyTooLargeError(end.get("message") or "", size=None, limit=None)
    source.end(
        last,
        status=status if status in (Status.STOPPED, Status.TRUNCATED) else None,
        exception=exception,
    )
    return source.stream


def to_wire(stream: Any) -> StreamState | ChunkLog:
    """What of an ended Stream crosses to another process (a run's workers send it back): its state,
    when it ended without an exception (unpickling it is much cheaper than parsing every chunk again
    on the driver's loop: docs/BENCHMARKS.md), else its log, to be rebuilt (``from_log``) with the
    error its end records."""
    state = stream._state
    return state if state.portable else stream.log


def from_wire(sent: StreamState | ChunkLog) -> Stream:
    """The Stream of what ``to_wire`` sent: a request of this session, which ended in a worker
    (``nito_nb.otel.instrument()`` hears of it here)."""
    stream = (
        from_log(sent)
        if isinstance(sent, ChunkLog)
        else Stream(sent.log.request, raise_errors=False, state=sent)
    )
    announce_end(stream)
    return stream


def from_log(log: ChunkLog) -> Stream:
    """A finished Stream rebuilt from a whole log (a worker's, sent back as it is): what ``load``
    does with a file, without the file. ``log`` itself is left as it was."""
    events = [
        (
            t_ns,
            kind if kind == HTTP_ERROR else None,
            raw * log.repeat(seq),
        )  # a counted run: counted again
        for seq, (t_ns, kind, raw) in enumerate(
            zip(log.times_ns(), log.kind_codes(), log.raw_slices(), strict=True)
        )
    ]
    return from_events(log.without_events(), events)


def _refail(source: StreamSource, end: dict[str, Any]) -> None:
    """Rebuild the error of a request that failed before streaming, from its saved log."""
    log = source.stream.log
    body = next((e.raw for e in log if e.kind == "http-error"), None)
    status = log.status_code or 0
    if body is not None and status >= 400:
        source.fail_http(log.status_code or 400, log.headers, body, log.headers_ns or log.t0_ns)
    elif body is not None and 300 <= status < 400 and end.get("exception") == "RedirectError":
        # Its words say where it pointed (the body does not): kept as they were.
        error = errors.RedirectError(str(end.get("message") or "a redirect"), status_code=status)
        source.fail_http(status, log.headers, body, log.headers_ns or log.t0_ns, error)
    else:
        cls = getattr(errors, str(end.get("exception")), None)
        if not (isinstance(cls, type) and issubclass(cls, NitoError)):
            cls = NitoError
        source.fail(cls(str(end.get("message") or "the request failed")))
    log.end = end


class Frozen:
    """An ended Stream as a run keeps it without a store (``freeze_ended``): its log, then its
    state, pickled one after the other (the log packed already) and compressed; what a frame
    reads of it besides its log (``model``, ``status``, ``ttfb``); and what the Stream itself was
    given (its class, ``raise_errors``, the route ``reply()`` sends by, the schema, the
    attachments). A live ended Stream is some hundred small objects (state, accumulator, tool
    calls, headers, usage, their dicts): a run kept 13 KiB per ``sim/tools`` request, twice its
    6 KiB body (bench/bench_runs_floor.py). Each :meth:`thaw` makes a new Stream, and each
    :meth:`log` a new log, and keeps none: reading a run's frame or rescoring it never grows what
    the run keeps."""

    __slots__ = (
        "_consumed",
        "_kind",
        "_like",
        "_pickled",
        "_raise_errors",
        "_resend",
        "_route",
        "_schema",
        "model",
        "status",
        "ttfb",
    )

    def __init__(self, stream: Any, pickled: bytes, like: bytes, route: Any, model: Any) -> None:
        self._kind: type[Any] = type(stream)
        self._pickled = pickled
        self._like = like
        self.model: str | None = model
        self.status: Status = stream.status
        self.ttfb: float | None = stream.ttfb
        self._raise_errors: bool = stream.raise_errors
        self._consumed: bool = stream._consumed
        self._route = route
        self._schema = stream._schema
        self._resend = stream._resend or None  # most have none: no empty dict kept

    def _unpickler(self) -> pickle.Unpickler:
        unpacker = zlib.decompressobj(-zlib.MAX_WBITS, self._like)
        return pickle.Unpickler(io.BytesIO(unpacker.decompress(self._pickled) + unpacker.flush()))

    def log(self) -> ChunkLog:
        """A new copy of the Stream's log, thawed alone (what a frame reads: a fourth of the time
        of a whole Stream)."""
        log: ChunkLog = self._unpickler().load()
        return log

    def thaw(self) -> Any:
        """A new Stream with the results, request and timings of the one frozen."""
        unpickler = self._unpickler()
        unpickler.load()  # the log, which the state refers to
        state = unpickler.load()
        stream = self._kind(state.log.request, raise_errors=self._raise_errors, state=state)
        stream._consumed = self._consumed
        stream._route, stream._schema = self._route, self._schema
        stream._resend = {} if self._resend is None else dict(self._resend)
        # Sent by this process, and its end heard of already (when it ended): never twice.
        stream._sent_here = stream._announced = True
        return stream


#: A run freezes the ended Streams whose log held less than this (bytes, before it was packed).
#: A live ended Stream's objects weigh about 10 KiB whatever its body (its state, accumulator,
#: headers, usage and their dicts): more than a short answer's body (``sim/tools``: 13 KiB kept
#: for a 6 KiB body), a fifth of a long one's (``sim/chat``: 0.46x its 51.6 KiB body in all, its
#: log packed). Freezing costs the writer's thread about 0.1 ms a request (8% of a ``sim/chat``
#: request's CPU, on 2 cores shared with the server), paid only where the memory needs it.
FREEZE_BELOW = 32 * 1024


def freeze_ended(streams: list[Any]) -> list[Any]:
    """What a run keeps of each of a batch of ended Streams: a :class:`Frozen` one, with its log
    packed; the Stream itself, its log packed, when its log held ``FREEZE_BELOW`` bytes or more,
    or when its state cannot be pickled (it ended with an exception, whose ``.stream`` is the
    Stream; or its request holds an object pickle refuses: rare).

    The requests of a run are alike (the same model, parameters and response headers, the same
    chunk layouts: a pickled ``sim/tools`` state differs from the next one in its ids, times and
    arguments), so each pickle is compressed with the batch's first one as zlib's preset
    dictionary: 3.1 KB become 0.8 KB, in 40 µs that let go of the GIL (without the dictionary,
    2.2 KB). The dictionary is kept once per batch, shared by its Frozen Streams; so are each
    route (``reply()``'s client, URL and key) and model name, the same for most requests of a
    run."""
    kept: list[Any] = []
    like: bytes | None = None
    shared: dict[Any, Any] = {}
    for stream in streams:
        held = stream.log.nbytes
        stream.log.pack()
        state = stream._state
        if held >= FREEZE_BELOW or not state.portable:
            kept.append(stream)
            continue
        out = io.BytesIO()
        pickler = pickle.Pickler(out, pickle.HIGHEST_PROTOCOL)
        try:
            # Under the state's lock: a reader in another thread (an on_done callback kept the
            # Stream) joins the text's pieces meanwhile.
            with state.lock:
                pickler.dump(state.log)  # first: a frame thaws it alone (``Frozen.log``)
                pickler.dump(state)  # the same pickler: its log is a reference to the one above
        except (pickle.PicklingError, TypeError, AttributeError):
            kept.append(stream)
            continue
        pickled = out.getvalue()
        if like is None:
            like = pickled
        packer = zlib.compressobj(1, zlib.DEFLATED, -zlib.MAX_WBITS, zdict=like)
        route, model = stream._route, stream.model
        try:
            route = shared.setdefault(route, route)
        except TypeError:  # a timeout= that does not hash: its own
            pass
        model = shared.setdefault(model, model)
        kept.append(Frozen(stream, packer.compress(pickled) + packer.flush(), like, route, model))
    return kept


def thaw(kept: Any) -> Any:
    """The Stream of what ``freeze_ended`` gave: a new one for a :class:`Frozen`, else ``kept`` itself."""
    return kept.thaw() if isinstance(kept, Frozen) else kept
