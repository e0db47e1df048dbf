"""The Stream: one streamed chat completion, live while it arrives, then inspected whole.

A Stream is a shell over a :class:`~nito_nb._core.state.StreamState` (the SSE decoder, the
accumulator, the chunk log, under one lock) and a byte source: it feeds the state the bytes its
source hands it, stamping each read with ``time.perf_counter_ns()``. Whoever makes a Stream holds
its producer (``_stream_source.py``: ``StreamSource``, ``AsyncStreamSource``) and gives it a
source through that: the client (``_client/``) a live body, ``read_sse`` and ``load``
(``_recordings.py``) recorded bytes. What a user reads is in ``_stream_results.py``; this module
adds the iteration, ``wait`` and ``close`` of each kind. Everything a Stream knows is therefore a
function of (bytes, arrival times): a loaded log is the same Stream.

Arrival times are the moment the bytes reached the process, whatever the caller does. So a live
body is read as soon as the response has started, by a reader of its own: a daemon thread for a
sync Stream, a task on the event loop for an AsyncStream. The reader stamps each read as it comes
off the socket, folds it into the Stream and hands the parsed chunks to whoever iterates, through
a queue. The alternative, sending the request only when the Stream is first iterated, would still
time every chunk by the consumer's pace (a consumer that sleeps between chunks, a cell that
displays slowly), so it was not chosen. The reader holds only a weak reference to a sync Stream:
a Stream nobody holds any more is closed by the garbage collector (its status says ``stopped``).
"""

from __future__ import annotations

import functools
import queue
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from ._core.attachments import DEFAULT_IMAGES_BACK
from ._core.state import StreamState
from ._core.status import RUNNING, Status
from ._core.waiting import wait_timeout
from ._stream_results import StreamResults
from ._watchdog import BodyWatchdog, uncancel

__all__ = ["AsyncStream", "Stream"]

_RUNNING = RUNNING
_END = object()  # the reader's last item in a Stream's queue


class Stream(StreamResults):
    """One streamed chat completion.

    Iterate it to receive each chunk (a dict) as it arrives; read ``content``, ``reasoning``,
    ``tool_calls``, ``usage``... at any time for what has arrived so far. The body is read in the
    background from the moment the response starts, so arrival times never depend on when the
    chunks are iterated. Results of a sync Stream that was never iterated wait for its end when
    first asked for; if it ended in an error or a truncation, the first such read raises what
    ``wait()`` raises (with ``raise_errors=True``), after which the results are what arrived.
    """

    def __init__(self, request: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(request, **kwargs)
        # The background reader (a live body): its thread, the queue of chunk lists it hands the
        # iterating caller, and how to cut its socket read from another thread.
        self._reader: threading.Thread | None = None
        self._queue: queue.SimpleQueue[Any] | None = None
        self._abort_source: Callable[[], None] | None = None
        self._live: Iterator[dict[str, Any]] | None = None
        self._stop_requested = False  # close() was called, maybe from another thread

    def _results(self) -> StreamState:
        # A sync Stream that nobody iterates or waits for: its results are those of the whole
        # answer (`s = stream(...); s.content`), so wait for its end.
        # Waiting here is not reading: the Stream stays unread, so that the first result of its
        # answer still raises how it ended (``_answer``).
        if not self._consumed and self._reader is not None:
            if self._state.status in _RUNNING:
                self._wait_for_end(None)
            else:
                self._discard_queued()
        return self._state

    def _reads_in_background(self) -> bool:
        return self._reader is not None

    # -- the background reader (sync) --------------------------------------------------------

    def _start_reader(
        self, reads: Iterator[bytes], close: Callable[[], None], abort: Callable[[], None] | None
    ) -> None:
        """Read the body in a daemon thread from now on (its producer's ``read_body``, once the
        response has started): ``reads`` yields the body's bytes, ``close`` releases the response
        (only the reader calls it: httpx would make another thread wait for the read in
        progress), ``abort`` cuts a read in progress from another thread. The chunks wait in the
        queue until someone iterates; a Stream that is only waited for lets them go when it ends."""
        self._queue = queue.SimpleQueue()
        self._abort_source = abort
        self._reader = threading.Thread(
            target=_read_body,
            args=(weakref.ref(self), reads, close, self._queue),
            name="nito_nb-stream-reader",
            daemon=True,
        )
        self._reader.start()

    def _stop(self, status: str | None) -> None:
        """Stop the reader (its socket read is cut, it closes the response) and end the stream."""
        self._stop_requested = True
        reader, abort = self._reader, self._abort_source
        if (
            reader is not None
            and abort is not None
            and reader.is_alive()
            and reader is not threading.current_thread()
        ):
            abort()
        self._end(time.perf_counter_ns(), status=status)
        if self._queue is not None:
            self._queue.put(_END)  # wakes a caller blocked on the next chunk in another thread

    def _discard_queued(self) -> None:
        # Nobody iterates a finished Stream's live chunks any more (iterating it again replays the
        # log): let the parsed chunks go.
        q, self._queue = self._queue, None
        if q is not None and self._live is None:
            while not q.empty():
                q.get_nowait()

    # -- live iteration (sync) ---------------------------------------------------------------

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._live is not None:
            return self._live  # continue where a `break` left off
        if self._queue is None:  # finished and iterated (or waited for) once, or no live body
            return self._replay()
        self._consumed = True
        self._live = self._iterate(self.raise_errors)
        return self._live

    def _iterate(self, raise_errors: bool) -> Iterator[dict[str, Any]]:
        # The chunks the reader parsed, in order; the reader's items are the chunks of a read
        # (``Chunks``, each built as it is read), then _END. A KeyboardInterrupt lands here, in
        # the blocking get().
        assert self._queue is not None
        get = self._queue.get
        try:
            while True:
                item = get()
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise item  # not a transport failure: a bug, passed on as it is
                yield from item
        except GeneratorExit:  # the consumer closed us (close(), or a with-block ended)
            self._stop(status=None if self._state.acc.done else Status.STOPPED)  # [DONE] came: done
            raise
        except KeyboardInterrupt:  # the kernel's stop button: keep what arrived, then stop
            self._stop(status=Status.STOPPED)
            raise
        finally:
            self._live = None
            self._queue = None  # iterating it again replays the log
        self._settle()
        self._raise_failure(raise_errors)

    def _settle(self, timeout: float | None = None) -> bool:
        """Wait until the stream has ended and its callbacks have run (not from a callback)."""
        if self._callback_thread == threading.get_ident() or self._reader is None:
            return self.finished
        return self._settled.wait(timeout)

    def wait(self, *, raise_errors: bool | None = None, timeout: float | None = None) -> Stream:
        """Block until the stream has finished; raise its error if ``raise_errors`` (default: the
        Stream's). With ``timeout`` (seconds), return after that long even if it has not finished:
        the Stream goes on in the background and its status is unchanged (check ``finished``).
        A KeyboardInterrupt meanwhile stops it (status ``stopped``, what arrived is kept)."""
        raise_errors = self.raise_errors if raise_errors is None else raise_errors
        timeout = wait_timeout(timeout)
        self._consumed = True
        if self._wait_for_end(timeout):
            self._raise_failure(raise_errors)
        return self

    def _wait_for_end(self, timeout: float | None) -> bool:
        """Wait until the stream has ended (False: ``timeout`` passed first); a KeyboardInterrupt
        meanwhile stops it."""
        try:
            if not self._settle(timeout):
                return False
        except KeyboardInterrupt:
            self._stop(status=Status.STOPPED)
            raise
        self._discard_queued()
        return True

    def close(self) -> None:
        """Stop reading: the connection closes, what arrived stays, the status becomes ``stopped``
        (``done`` if ``[DONE]`` had already arrived).

        Safe from any thread, also while another one iterates (a Stop button): the background
        reader's socket read is cut, and the iterating thread ends quietly.
        """
        live = self._live
        if live is not None:
            try:
                live.close()  # type: ignore[attr-defined]
            except ValueError:  # "generator already executing": another thread is iterating it
                pass
        if not self.finished:
            self._stop(status=None if self._state.acc.done else Status.STOPPED)

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # Collected while its body is still being read (a `break` and nothing else holds it): stop
        # the reader and release the connection. The status (in callbacks, or a log kept
        # elsewhere) says stopped.
        try:
            if self._reader is not None and self.status in _RUNNING:
                self._stop(status=Status.STOPPED)
        except Exception:  # never raise from the collector (e.g. at interpreter exit)
            pass

    def reply(
        self,
        prompt_or_messages: str | list[dict[str, Any]],
        *,
        images_back: int = DEFAULT_IMAGES_BACK,
        **params: Any,
    ) -> Stream:
        """Continue the conversation: this Stream's messages, then the new ones, same model and
        parameters unless overridden. Pass tool results as ``[{"role": "tool", ...}]``.

        It is sent the way this Stream's request was: by the same client (its retries, timeouts
        and httpx client), to the same base URL, with the same key, ``timeout`` and
        ``max_event_size``. A ``base_url=`` given here sends it elsewhere, without this Stream's
        key. A recorded Stream (``load``, ``read_sse``) was made by no client: it continues as
        ``nito_nb.stream`` would.

        ``images_back``: how many turns back images are sent again (1, the default: this Stream's
        own turn's; 0: none); older ones become a note of what was sent. ``images=`` attaches
        new ones to the new turn (docs/IMAGES.md).
        """
        return self._reply(prompt_or_messages, params, images_back)


class AsyncStream(StreamResults):
    """The async sibling of :class:`Stream`: ``async for chunk in stream``. It connects on first use (``async for``,
    ``await stream.wait()``, ``async with``); from then on a task on the event loop reads the body
    as it arrives, whatever the consumer awaits meanwhile. Results are never read implicitly (use
    ``await stream.wait()``)."""

    def __init__(self, request: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(request, **kwargs)
        self._is_async = True
        # Set by its producer (``_stream_source.AsyncStreamSource``): the coroutine function that
        # connects (and gives the body), run on first use; the body, a coroutine function that
        # reads it to its end, calling deliver(data, arrival_ns) per read; what closing it
        # releases; and the time the request is sent (the loop's clock, see ``send_at``).
        self._opener: Callable[[AsyncStream], Any] | None = None
        self._body: Callable[[Callable[[bytes, int], None]], Awaitable[None]] | None = None
        self._aclose_source: Callable[[], Any] | None = None
        self._send_at: float | None = None
        self._alive: AsyncIterator[dict[str, Any]] | None = None
        # The reader task (connects, then reads the body), the queue of chunk lists it hands the
        # consumer, the future of its connecting (None, or the error that refused it), and an
        # error that ended it (raised to whoever iterates or waits).
        self._task: Any = None
        self._aqueue: Any = None
        self._opened: Any = None
        self._task_error: BaseException | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self.finished:
            return self._replay()
        raise TypeError("an AsyncStream is iterated with `async for` (or `await stream.wait()`)")

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        if self._alive is None:
            self._alive = self._aiterate(self.raise_errors)
        return self._alive

    def _astart(self) -> Any:
        """Start the reader task once, on the running loop; return it (None: nothing to read)."""
        import asyncio

        if self._task is None:
            if self.finished or (self._opener is None and self._body is None):
                return None
            loop = asyncio.get_running_loop()
            self._aqueue = asyncio.Queue()
            self._opened = loop.create_future()
            self._task = loop.create_task(
                self._arun(self._aqueue, self._opened), name="nito_nb-stream-reader"
            )
            self._task.add_done_callback(
                functools.partial(_never_started, self._aqueue, self._opened)
            )
        return self._task

    async def _arun(self, out: Any, opened: Any) -> None:
        try:
            if self._body is None and self._opener is not None:
                try:
                    await self._open()  # raises typed HTTP errors, with .stream set
                except Exception as exc:  # refused: whoever connects, iterates or waits raises it
                    self._task_error = exc
                    opened.set_result(exc)
                    return
            opened.set_result(None)
            if self._body is not None:
                await self._aread(out)
        except Exception as exc:  # not a transport failure: handed to the consumer as it is
            self._task_error = exc
        finally:
            if not opened.done():  # cancelled while connecting
                opened.set_result(None)
            out.put_nowait(_END)
            # Read to its end: let go of the body (its network stream, socket, buffers and
            # futures) and, once the Stream has finished, of this task (a finished Stream starts
            # none again: ``_astart``). An ended Stream kept them all, about 4 KiB each, and a
            # run keeps thousands (bench/bench_runs_floor.py's memory per kept request).
            self._body = self._opener = None
            if self.finished:
                self._task = self._opened = None

    async def _aread(self, out: Any) -> None:
        """Read the body to its end; the chunks of each read go to ``out`` (the reader task's
        queue), or nowhere (None: ``_wait_alone``, nobody iterates)."""
        assert self._body is not None
        clock, state = time.perf_counter_ns, self._state
        feed = state.feed  # under the state's lock: a display thread may take a snapshot meanwhile

        def deliver(data: bytes, t_ns: int) -> None:
            chunks = feed(data, t_ns)
            if chunks:
                out.put_nowait(chunks)

        watch = None if self._deadlines is None else BodyWatchdog(self._deadlines, self._body)
        try:
            try:
                await self._body(deliver if out is not None else feed)  # type: ignore[arg-type]
            finally:
                if watch is not None:
                    watch.stop()
        except (
            KeyboardInterrupt,
            _cancelled_error(),
        ) as stop:  # stopped by the consumer or the loop's end
            if (
                watch is not None
                and watch.passed is not None
                and isinstance(stop, _cancelled_error())
                and uncancel(watch.task) == 0
            ):  # a deadline, and nobody else cancelled meanwhile
                await self._astop_source()
                self._end(clock(), status=Status.TRUNCATED, exception=watch.passed)
                return
            await self._astop_source()
            self._end(clock(), status=None if state.acc.done else Status.STOPPED)
            raise
        except Exception as exc:
            error = self._transport_error(exc)
            await self._astop_source()
            if error is None:
                self._end(clock(), status=Status.TRUNCATED)
                raise
            self._end(clock(), status=Status.TRUNCATED, exception=error)
        else:
            await self._astop_source()
            self._end(clock())

    async def _aiterate(self, raise_errors: bool) -> AsyncIterator[dict[str, Any]]:
        task = self._astart()
        out = self._aqueue
        if task is None or out is None:  # finished (and iterated once), or nothing to read
            for chunk in self._replay():
                yield chunk
            return
        self._consumed = True
        try:
            while True:
                item = await out.get()
                if item is _END:
                    break
                for chunk in item:
                    yield chunk
        except GeneratorExit:  # aclose(), or an `async with` ended
            await self._astop()
            raise
        except (KeyboardInterrupt, _cancelled_error()):
            await self._astop()
            raise
        finally:
            self._alive = None
            self._aqueue = None  # iterating it again replays the log
        if self._task_error is not None:
            raise self._task_error
        self._raise_failure(raise_errors)

    async def _open(self) -> None:
        assert self._opener is not None
        try:
            await self._opener(self)
        except (KeyboardInterrupt, _cancelled_error()):  # cancelled while connecting
            self._end(time.perf_counter_ns(), status=Status.STOPPED)
            raise

    async def _astop_source(self) -> None:
        close, self._aclose_source = self._aclose_source, None
        if close is not None:
            await close()

    async def _astop(self) -> None:
        """Cancel the reader (it closes the response and says stopped) and wait for it."""
        import asyncio

        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})
        if not self.finished:
            await self._astop_source()
            self._end(time.perf_counter_ns(), status=Status.STOPPED)

    async def wait(
        self, *, raise_errors: bool | None = None, timeout: float | None = None
    ) -> AsyncStream:
        """Connect if needed and wait until the stream has finished; raise its error if
        ``raise_errors`` (an HTTP error when connecting always raises). With ``timeout`` (seconds),
        return after that long even if it has not finished: it goes on, its status is unchanged
        (check ``finished``). Cancelling the wait stops the stream."""
        import asyncio

        raise_errors = self.raise_errors if raise_errors is None else raise_errors
        timeout = wait_timeout(timeout)
        task = self._astart()
        if task is not None:
            self._consumed = True
            try:
                done, _ = await asyncio.wait({task}, timeout=timeout)
            except (KeyboardInterrupt, asyncio.CancelledError):
                await self._astop()
                raise
            if not done:
                return self
            if self._alive is None:
                self._aqueue = None  # nobody iterates its live chunks: let them go
            if self._task_error is not None:
                raise self._task_error
        self._raise_failure(raise_errors)
        return self

    async def _wait_alone(self) -> None:
        """``wait(raise_errors=False)`` for the one user of a Stream that nobody else iterates,
        waits for or closes meanwhile (a run's sender: ``AsyncStreamSource.wait_alone``): it
        connects and reads the body in the calling task, without the reader task, its queue, its
        future and the ``asyncio.wait`` for it (13 µs of each request of a run, whose fixed cost
        per request kept it under its floor: issue 32). What a cancellation, a deadline or an error
        does is the reader task's own code (``_open``, ``_aread``): cancelling the caller stops the
        stream (what arrived is kept) and goes on up, an HTTP error of connecting is raised."""
        if self._task is not None or self._alive is not None:  # a reader already: as wait()
            await self.wait(raise_errors=False)
            return
        self._consumed = True
        try:
            if self._body is None and self._opener is not None:
                await self._open()  # raises typed HTTP errors, with .stream set
            if self._body is not None:
                await self._aread(None)
        finally:
            self._body = self._opener = None  # as the reader task lets go of them (_arun)

    def __await__(self) -> Any:
        return self.wait().__await__()

    async def aclose(self) -> None:
        """Stop reading: the connection closes, what arrived stays, the status becomes ``stopped``."""
        alive = self._alive
        if alive is not None:
            try:
                await alive.aclose()  # type: ignore[attr-defined]
            except RuntimeError:  # another task is iterating it: cancelling the reader ends it
                pass
        await self._astop()

    def close(self) -> None:
        raise TypeError("use `await stream.aclose()` on an AsyncStream")

    async def __aenter__(self) -> AsyncStream:
        import asyncio

        if self._astart() is not None:
            try:
                error = await asyncio.shield(self._opened)
            except (KeyboardInterrupt, asyncio.CancelledError):
                await self._astop()
                raise
            if error is not None:
                raise error
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    def reply(
        self,
        prompt_or_messages: str | list[dict[str, Any]],
        *,
        images_back: int = DEFAULT_IMAGES_BACK,
        **params: Any,
    ) -> AsyncStream:
        """The async twin of :meth:`Stream.reply` (same client, base URL, key and timeout)."""
        stream: AsyncStream = self._reply(prompt_or_messages, params, images_back)
        return stream


def _read_body(
    ref: weakref.ReferenceType[Stream],
    reads: Iterator[bytes],
    close: Callable[[], None],
    out: queue.SimpleQueue[Any],
) -> None:
    """The background reader of a sync Stream: fold each read into the Stream as it arrives and
    pass its chunks on. It holds the Stream only while folding a read, so that a Stream nobody
    holds can be collected (and closed) while this thread waits for the socket."""
    clock = time.perf_counter_ns
    try:
        try:
            for data in reads:
                t_ns = clock()  # the moment the bytes came off the socket
                stream = ref()
                if stream is None:
                    return
                chunks = stream._state.feed_live(data, t_ns)
                del stream
                if chunks is None:  # closed meanwhile: stop reading
                    return
                if chunks:
                    out.put(chunks)
        except Exception as exc:
            stream = ref()
            if stream is None or stream._stop_requested:  # close() cut the read under us
                return
            error = stream._transport_error(exc)
            if error is None:  # not a transport failure: end the stream, hand the error over
                stream._end(clock(), status=Status.TRUNCATED)
                out.put(exc)
            else:
                stream._end(clock(), status=Status.TRUNCATED, exception=error)
        else:
            stream = ref()
            if stream is not None:
                stopped = stream._stop_requested and not stream._state.acc.done
                stream._end(clock(), status=Status.STOPPED if stopped else None)
    finally:
        stream = ref()
        if stream is not None and not stream._stop_requested and not stream.finished:
            # this thread died of something unexpected
            stream._end(clock(), status=Status.TRUNCATED)
        stream = None
        try:
            close()
        except Exception:  # a connection already cut: nothing left to release
            pass
        out.put(_END)


def _never_started(out: Any, opened: Any, task: Any) -> None:
    # A reader task cancelled before it ran never reached its `finally`: release its waiters.
    if not opened.done():
        opened.set_result(None)
        out.put_nowait(_END)


def _cancelled_error() -> type[BaseException]:
    import asyncio

    return asyncio.CancelledError
