"""OpenTelemetry for nito_nb's requests: spans and client metrics in the GenAI semantic
conventions' words, for Arize Phoenix, Langfuse or any OTLP collector (docs/OTEL.md).

    nito_nb.otel.export(run)                  # a Stream, a list of them, a Run, a Store or a frame
    nito_nb.otel.instrument()                 # from now on, every request of the session as it ends
    with nito_nb.otel.live(): ...             # the same, for a block

One span per request (``chat {model}``, kind CLIENT, from the send to the last event, on the wall
clock), its arrival times as span events (``nito.chunk``: the conventions leave streaming chunks
open), the four client metrics as histograms. Message content only with ``content=True`` (the
conventions' opt-in attributes); never the key, nor a header.

Needs the ``otel`` extra (``pip install 'nito_nb[otel]'``: opentelemetry-api and -sdk); exporters
are the user's choice (``opentelemetry-exporter-otlp-proto-http`` for an OTLP/HTTP collector).
OpenTelemetry is imported on first use: ``import nito_nb.otel`` works without it.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._core.errors import ConfigurationError, one_line
from .._core.printable import printable
from .._stream_results import StreamResults, listen_to_ends
from ._calls import Call, Extra, calls_of

__all__ = ["export", "instrument", "live", "uninstrument"]

MISSING = (
    "nito_nb.otel needs OpenTelemetry: pip install 'nito_nb[otel]' "
    "(opentelemetry-api and opentelemetry-sdk)"
)


def _emitter(tracer_provider: Any, meter_provider: Any) -> Any:
    try:
        from ._emit import Emitter
    except ImportError:
        raise ConfigurationError(MISSING) from None
    return Emitter(tracer_provider, meter_provider)


def export(
    source: Any, *, tracer_provider: Any = None, meter_provider: Any = None, content: bool = False
) -> int:
    """Export the requests of ``source`` (a Stream, a list of Streams, a Run, a Store or a frame):
    one span each and the client metrics; returns the number of spans.

    ``tracer_provider`` / ``meter_provider``: where they go (the global providers when None). The
    spans are children of the span current where ``export`` is called, if any. Metrics are
    recorded now, whenever the requests were made. ``content=True`` adds the messages sent and
    the answer (``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.tool.definitions``):
    a frame, or a Run without a store, has no messages, only the answer."""
    emitter = _emitter(tracer_provider, meter_provider)
    calls = _calls_in(source, content)
    for call in calls:
        emitter.emit(call)
    return len(calls)


def _calls_in(source: Any, content: bool) -> list[Call]:
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        from .._frame import frame

        df = frame(source)
        if not df.attrs.get("nito") and source.attrs.get("nito"):
            df.attrs["nito"] = source.attrs["nito"]
        return calls_of(df, None, content=content)
    if isinstance(source, StreamResults):
        return _of_streams([source], content)
    if isinstance(source, (list, tuple)) and all(isinstance(s, StreamResults) for s in source):
        return _of_streams(list(source), content)
    from .._runs import Run, Store, open_store

    if isinstance(source, Run):
        if not source.done:
            raise ConfigurationError("this run is still running: export it once run.wait() returns")
        df = source.frame()
        if source.store_path is None:
            return calls_of(df, None, content=content)
        with open_store(source.store_path) as store:
            return calls_of(df, _store_extras(store), content=content)
    if isinstance(source, Store):
        return calls_of(source.frame(), _store_extras(source), content=content)
    raise ConfigurationError(
        f"nito_nb.otel.export takes a Stream, a list of Streams, a Run, a Store or a frame, not {type(source).__name__}"
    )


def _of_streams(streams: list[StreamResults], content: bool) -> list[Call]:
    from .._frame import frame

    running = [i for i, s in enumerate(streams) if not s.finished]
    if running:
        raise ConfigurationError(
            f"stream {running[0]} of {len(streams)} is still running: export it once it has ended (s.wait())"
        )
    labels = {str(i): s for i, s in enumerate(streams)}
    extras = {label: _stream_extra(s) for label, s in labels.items()}
    return calls_of(frame(labels), extras, content=content)


def _stream_extra(stream: StreamResults) -> Extra:
    error = stream.exception
    return Extra(
        messages=stream.request.get("messages"),
        exception=None if error is None else type(error).__name__,
        message=None if error is None else error.message,
    )


def _store_extras(store: Any) -> dict[str, Extra]:
    """What a store's requests table keeps beyond the frame: the messages, how each ended."""
    extras = {}
    for key, request, end_state in store.con.execute(
        "SELECT key, request, end_state FROM requests"
    ).fetchall():
        ended = json.loads(end_state or "{}")
        extras[key] = Extra(
            messages=json.loads(request or "{}").get("messages"),
            exception=ended.get("exception"),
            message=ended.get("message"),
        )
    return extras


# -- the session's requests, as each ends -----------------------------------------------------------


class _Exporter:
    """Exports the requests of this process as each ends: the Stream is handed to a thread of its
    own (the reader that ended it, or a run's loop, goes on at once), which exports whatever has
    ended meanwhile as one frame."""

    def __init__(self, emitter: Any, content: bool) -> None:
        self.emitter, self.content = emitter, content
        self.pid = os.getpid()  # a forked child inherits the listener, not the thread
        self.waiting: list[StreamResults] = []
        self.busy = 0  # streams taken by the thread and not exported yet
        self.cond = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._work, name="nito_nb-otel", daemon=True)
        self.thread.start()
        self.stop_listening = listen_to_ends(self.heard)
        # Registered now, after the providers were made: atexit runs the last registered first, so
        # what is waiting is exported before the SDK's own handler shuts its providers down.
        atexit.register(self.close, 5.0)

    def heard(self, stream: StreamResults) -> None:
        if os.getpid() != self.pid:
            return
        with self.cond:
            self.waiting.append(stream)
            self.cond.notify_all()

    def _work(self) -> None:
        while True:
            with self.cond:
                while not self.waiting and not self.closed:
                    self.cond.wait()
                if not self.waiting:
                    return
                batch, self.waiting = self.waiting, []
                self.busy = len(batch)
            try:
                for call in _of_streams(batch, self.content):
                    self.emitter.emit(call)
            except Exception as exc:  # never the session's problem: said once per batch
                print(
                    printable(
                        f"nito_nb.otel: {len(batch)} request(s) not exported: {one_line(exc)}"
                    ),
                    file=sys.stderr,
                )
            finally:
                with self.cond:
                    self.busy = 0
                    self.cond.notify_all()

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until every request heard of is exported (True), or ``timeout`` seconds (False)."""
        with self.cond:
            return self.cond.wait_for(lambda: not self.waiting and not self.busy, timeout)

    def close(self, timeout: float | None = 30.0) -> None:
        atexit.unregister(self.close)
        self.stop_listening()
        self.flush(timeout)
        with self.cond:
            self.closed = True
            self.cond.notify_all()


_session: list[_Exporter] = []  # the exporter in use last; live() stacks one over another
_session_lock = threading.Lock()


def instrument(
    *, tracer_provider: Any = None, meter_provider: Any = None, content: bool = False
) -> None:
    """From now on, export every request of this session as it ends (a span each and the client
    metrics): ``nito_nb.stream``, the magic, the chat widget, runs (their worker processes' too),
    captured and watched clients. A second call replaces the first; :func:`uninstrument` stops."""
    exporter = _Exporter(_emitter(tracer_provider, meter_provider), content)
    with _session_lock:
        previous = list(_session)
        _session[:] = [exporter]
    for old in previous:
        old.close()


def uninstrument() -> None:
    """Stop exporting the session's requests (those already ended are exported first)."""
    with _session_lock:
        previous = list(_session)
        _session.clear()
    for old in previous:
        old.close()


@contextmanager
def live(
    *, tracer_provider: Any = None, meter_provider: Any = None, content: bool = False
) -> Iterator[None]:
    """``with nito_nb.otel.live(): ...``: :func:`instrument` for the block. At its end, every
    request that ended inside it has been exported (handed to the providers' processors)."""
    exporter = _Exporter(_emitter(tracer_provider, meter_provider), content)
    with _session_lock:
        _session.append(exporter)
    try:
        yield
    finally:
        exporter.close()
        with _session_lock:
            if exporter in _session:
                _session.remove(exporter)
