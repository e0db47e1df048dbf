"""The producer side of a Stream: what a byte source tells it, apart from what a user reads.

A :class:`~nito_nb.Stream` shows a user its results and what to do with them
(``_stream_results.py``, ``_stream.py``); the calls that fill it (``feed`` per read, ``end``,
``set_response``, ``fail_http``, retried attempts, a live body, an AsyncStream's opener and send
time...) are here, on a producer that whoever makes the Stream holds: the clients, capture and
watch, the replay, the recordings, the runs and the tests. openai-python keeps its ``Stream``
(iterate, close) apart from the ``ChatCompletionStreamState`` that accumulates in the same way.

- :class:`SourceBase`: what every producer tells its Stream, one line each over the Stream's
  :class:`~nito_nb._core.state.StreamState` (which does the work, under its lock), so that the
  sync and async producers share it as the two Streams share ``StreamResults``.
- :class:`StreamSource` (public: ``nito_nb.StreamSource``, docs/ENGINE_API.md): a
  :class:`~nito_nb.Stream` and the ways to fill it, fed bytes (``feed``) or given a live body
  that its reader thread reads (``read_body``). The one entry for a byte source of a user's.
- :class:`AsyncStreamSource`: an :class:`~nito_nb.AsyncStream` and the ways of the async client
  (an opener run on first use, a body read by the Stream's task, a send time).

A producer holds its Stream (``.stream``), never the other way round: a Stream nobody holds is
freed at once and closed (its reader thread holds it weakly), and an ended one leaves no cycle
(tests/test_gc.py). :func:`source_of` gives the producer of a Stream one already holds (a run's
schedule, the client's opener): it holds nothing else, so it is made on demand. The fields of a
Stream written here (``_route``, ``_deadlines``, an AsyncStream's ``_opener``, ``_body``,
``_aclose_source``, ``_send_at``) are written nowhere else.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, overload

from ._core.attachments import resend_key
from ._core.deadlines import Deadlines
from ._core.errors import APIError, NitoError, Secret
from ._core.log import ChunkLog
from ._stream import AsyncStream, Stream

__all__ = ["AsyncStreamSource", "SourceBase", "StreamSource", "source_of"]


class SourceBase:
    """What a byte source tells its Stream, for a Stream and an AsyncStream alike. I/O-free and
    thread-safe: each call takes the Stream's lock (a display thread may take snapshots
    meanwhile). Not made directly: :class:`StreamSource` or :class:`AsyncStreamSource`."""

    __slots__ = ("__weakref__", "_state", "stream")
    stream: Any  # the Stream filled (Stream or AsyncStream: each subclass says which)

    def __init__(
        self,
        request: dict[str, Any] | None = None,
        *,
        raise_errors: bool = True,
        max_event_size: int | None = None,
        max_body_size: int | None = None,
        log: ChunkLog | None = None,
        transport_errors: Callable[[BaseException, Any], NitoError | None] | None = None,
    ) -> None:
        self.stream = self._made(
            request,
            log=log,
            raise_errors=raise_errors,
            max_event_size=max_event_size,
            max_body_size=max_body_size,
            transport_errors=transport_errors,
        )
        self._state = self.stream._state

    @staticmethod
    def _made(request: dict[str, Any] | None, **options: Any) -> Any:
        raise NotImplementedError  # each producer makes its own kind of Stream

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self.stream!r}>"

    def start(self, t_ns: int | None = None) -> None:
        """The request leaves now (or left at ``t_ns``, a ``time.perf_counter_ns()`` reading): the
        origin of every timing (``ttfb``, ``ttft``...). Without it, the moment the Stream was made.
        A started Stream is a request of this process: ``nito_nb.otel.instrument()`` hears of its end."""
        self._state.log.start(t_ns)
        self.stream._sent_here = True

    def feed(self, data: bytes, t_ns: int) -> Sequence[dict[str, Any]]:
        """Fold one read of the body, arrived at ``t_ns`` (``time.perf_counter_ns()``), into the
        Stream: decode its events, log them, accumulate them; return the chunks it completed (a
        sequence whose chunks are built as they are read: none when nobody reads them).

        What the background reader does for each read, and what a replay, a capture or any other
        source of SSE bytes calls. Raises :class:`EventTooLargeError` when an event goes past
        ``max_event_size``, and :class:`BodyTooLargeError` when the body decodes past
        ``max_body_size`` or is a compression bomb (the events before either are kept)."""
        return self._state.feed(data, t_ns)

    def end(
        self,
        t_ns: int | None = None,
        *,
        status: str | None = None,
        exception: NitoError | None = None,
    ) -> None:
        """The body ended (or was cut) at ``t_ns`` (now if None): settle the status from what
        arrived (``done``, ``error`` or ``truncated``, unless ``status`` says otherwise), keep
        everything, run the ``on_done`` callbacks. A second call does nothing, but after
        :meth:`fail` or :meth:`fail_http` it says the failure is final (no retry follows): the
        callbacks that waited run then."""
        self.stream._end(t_ns, status=status, exception=exception)

    def protect(self, secret: Secret | str | None) -> None:
        """The key the request carried: from now on it is taken out of everything the server
        sends back (body events, error body, headers), and out of the Stream's errors."""
        self._state.protect(secret)

    @property
    def protected(self) -> bool:
        """A key is being redacted from what the server sends back (see :meth:`protect`)."""
        return self._state.secret is not None

    def set_response(self, status_code: int, headers: Any, t_ns: int) -> None:
        """The response's status and headers arrived at ``t_ns`` (none that carries a credential
        or echoes the key is kept)."""
        self._state.set_response(status_code, headers, t_ns)

    def set_encoding(self, content_encoding: str | None) -> None:
        """The body comes with this ``Content-Encoding`` (gzip, deflate): :meth:`feed` takes its
        bytes as they came and decodes them, in bounded pieces; a coding it cannot decode raises
        ``nito_nb._core.encoding.UnsupportedEncoding``."""
        self._state.set_encoding(content_encoding)

    def fail_http(
        self, status_code: int, headers: Any, body: bytes, t_ns: int, error: APIError | None = None
    ) -> APIError:
        """The server refused with an HTTP error: the body is logged (redacted), the Stream is
        ``failed``; returns the typed error (not raised): ``error`` if given, else the one of
        the status and body."""
        return self._state.fail_http(status_code, headers, body, t_ns, error)

    def fail(self, error: NitoError) -> NitoError:
        """The request failed before any body: the Stream is ``failed`` with ``error`` (returned)."""
        return self._state.fail(error)

    def note(self, kind: str, message: str) -> None:
        """Record an anomaly at the current event (the same kind again only counts)."""
        self._state.note(kind, message)

    # -- what only nito_nb's clients tell (their retries, deadlines and route) -----------------

    def new_attempt(self) -> None:
        """The attempt failed before any body and is tried again (the client's retries)."""
        self._state.new_attempt()

    def set_connect(self, duration_ns: int) -> None:
        """The attempt under way took ``duration_ns`` to open its connection (``connect``)."""
        self._state.set_connect(duration_ns)

    def set_deadlines(
        self, first_byte: float, between_chunks: float, total: float | None
    ) -> Deadlines:
        """The call's deadlines, read off this Stream (``_core/deadlines.py``), returned for the byte
        source to keep to (the sync client's reads); an AsyncStream keeps them itself: its body is
        stopped once one passes (status ``truncated``, the error names it), whatever reads it."""
        deadlines = Deadlines(self._state, first_byte, between_chunks, total)
        self.stream._deadlines = deadlines
        return deadlines

    def set_route(self, route: Any) -> None:
        """How the request was made (its client, base URL, key, timeout), for ``reply()``."""
        self.stream._route = route

    def set_schema(self, schema: Any) -> None:
        """The call's ``schema=`` (``_structured.Schema``): ``parsed`` and the live view read the
        answer with it (without one, with the schema of the request's ``response_format``)."""
        self.stream._schema = schema

    def set_attachments(self, attachments: list[Any]) -> None:
        """The images and files sent with the last user message (``_core/attachments.py``), kept on
        the Stream only, never in its request metadata: ``reply()`` sends them again. Those sent
        again from earlier turns (``resent``) are among them, held for the next turn."""
        self.stream._resend = {resend_key(a): a for a in attachments}


class StreamSource(SourceBase):
    """A :class:`~nito_nb.Stream` (``.stream``, what a user reads) and the ways to fill it, for a
    source of SSE bytes of your own: a recording, a socket, another library's iterator.

        source = nito_nb.StreamSource({"model": "m", "messages": [...]})
        source.start()                           # the request leaves: timings count from here
        for data in reads:                       # each read as it arrived
            source.feed(data, time.perf_counter_ns())
        source.end()
        source.stream.content, source.stream.ttft, source.stream.frame()

    Or give it a live body with :meth:`read_body`: the Stream then reads it in a thread of its
    own, and ``for chunk in source.stream`` yields each chunk as it arrives.
    """

    __slots__ = ()
    stream: Stream

    @staticmethod
    def _made(request: dict[str, Any] | None, **options: Any) -> Stream:
        return Stream(request, **options)

    def read_body(
        self,
        reads: Iterator[bytes],
        close: Callable[[], None] | None = None,
        abort: Callable[[], None] | None = None,
    ) -> None:
        """Read a live body from now on, in a daemon thread, whatever the consumer does: ``reads``
        yields the body's bytes as they arrive (each stamped as it comes), ``close`` releases it
        at the end (only the reader calls it), ``abort`` cuts a read in progress from another
        thread (``stream.close()``: a Stop button). Call it once the response has started."""
        self.stream._start_reader(reads, close or _nothing, abort)


class AsyncStreamSource(SourceBase):
    """An :class:`~nito_nb.AsyncStream` (``.stream``) and the ways of the async client: it connects
    on first use (``set_opener``), and its task reads the body that the opener gives
    (``set_body``, ``set_pushed_body``), at a send time if one is set (``send_at``)."""

    __slots__ = ()
    stream: AsyncStream

    @staticmethod
    def _made(request: dict[str, Any] | None, **options: Any) -> AsyncStream:
        return AsyncStream(request, **options)

    def set_opener(self, opener: Callable[[AsyncStreamSource], Awaitable[None]] | None) -> None:
        """A coroutine function that connects, run on the Stream's first use (``async for``,
        ``await``, ``async with``): it is given this producer, and gives the body with
        :meth:`set_body` or :meth:`set_pushed_body`. None lets go of the one set."""
        self.stream._opener = None if opener is None else functools.partial(_open_with, opener)

    def set_body(
        self,
        reads: AsyncIterator[bytes],
        close: Callable[[], Any],
        arrival: Callable[[], int] | None = None,
    ) -> None:
        """The body's reads, the coroutine function that closes the response, and ``arrival()``: the
        time (perf_counter ns) the bytes just yielded arrived (nito_nb/_transport), else now is taken."""
        self.stream._body = functools.partial(_pull, reads, arrival or time.perf_counter_ns)
        self.stream._aclose_source = close

    def set_pushed_body(
        self,
        body: Callable[[Callable[[bytes, int], None]], Awaitable[None]],
        close: Callable[[], Any],
    ) -> None:
        """A body that reads itself: ``await body(deliver)`` calls ``deliver(data, arrival_ns)`` for
        each read as it arrives and returns at the body's end (``_transport.pushed.PushedBody``);
        ``close`` as for :meth:`set_body`."""
        self.stream._body, self.stream._aclose_source = body, close

    def close_also(self, close: Callable[[], Any]) -> None:
        """Closing the body also awaits ``close()`` (after the response's own, even if it fails)."""
        first = self.stream._aclose_source

        async def close_both() -> None:
            try:
                if first is not None:
                    await first()
            finally:
                await close()

        self.stream._aclose_source = close_both

    def send_at(self, when: float) -> None:
        """Send the request no earlier than ``when`` (the running loop's ``time()``), with everything
        before the send (the request built, its client made) done as soon as it is started: a
        Run's open-loop schedule starts its streams a little ahead (``_runs/runner.py``)."""
        self.stream._send_at = when

    async def wait_alone(self) -> None:
        """Connect and read the whole stream in the calling task: ``await
        stream.wait(raise_errors=False)`` for a caller that is the Stream's one user (nobody else
        iterates it, waits for it or closes it meanwhile: a run's sender), without a reader task of
        its own. Cancelling the caller stops the stream, as cancelling ``wait()`` does."""
        await self.stream._wait_alone()

    @property
    def waiting_to_send(self) -> bool:
        """True while the stream waits for the time set by :meth:`send_at`: nothing was sent yet."""
        return self.stream._send_at is not None

    async def until_send_time(self) -> None:
        """Wait for the time set by :meth:`send_at` (at once without one); the client's opener
        calls it just before the first attempt's send."""
        import asyncio

        stream = self.stream
        if stream._send_at is not None:
            loop = asyncio.get_running_loop()
            if stream._send_at > loop.time():
                # At the time itself (call_at), not after sleep(time - now): that difference of two
                # clock readings jitters by microseconds, and requests due within them (a schedule
                # at a very high rate) left out of their order.
                woken: asyncio.Future[None] = loop.create_future()
                timer = loop.call_at(stream._send_at, _wake, woken)
                try:
                    await woken
                finally:
                    timer.cancel()
            stream._send_at = None


@overload
def source_of(stream: AsyncStream) -> AsyncStreamSource: ...
@overload
def source_of(stream: Stream) -> StreamSource: ...
def source_of(stream: Stream | AsyncStream) -> StreamSource | AsyncStreamSource:
    """The producer of a Stream already made (a client's, for a run to set its send time)."""
    source: StreamSource | AsyncStreamSource
    source = (
        AsyncStreamSource.__new__(AsyncStreamSource)
        if isinstance(stream, AsyncStream)
        else StreamSource.__new__(StreamSource)
    )
    source.stream = stream
    source._state = stream._state
    return source


async def _open_with(
    opener: Callable[[AsyncStreamSource], Awaitable[None]], stream: AsyncStream
) -> None:
    """An opener as the AsyncStream runs it (with itself), given the Stream's producer: the Stream
    never holds its producer, which holds it."""
    await opener(source_of(stream))


async def _pull(
    reads: AsyncIterator[bytes], arrival: Callable[[], int], deliver: Callable[[bytes, int], None]
) -> None:
    """A body of reads that something else yields (httpx's iterator), as a body for ``_aread``."""
    async for data in reads:
        deliver(data, arrival())  # stamped as the bytes came (arrival), not as consumed


def _wake(future: Any) -> None:
    """Resolve a waiter at its time, unless it was cancelled meanwhile."""
    if not future.done():
        future.set_result(None)


def _nothing() -> None:
    """A body that has nothing to release."""
