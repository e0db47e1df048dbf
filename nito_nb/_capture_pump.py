"""The body of a captured response: read from the network as it arrives, handed to the library
when it asks (either stack).

A timing is the moment bytes reached the process, whatever the caller does. A library reads a
streamed body only when its user asks for the next chunk: stamped at that read, a loop that spends
200 ms on each chunk of a 50 ms stream made every gap 200 ms (issue 31). So the body of a captured
stream is read by a pump, as nito_nb's own Stream reads its body (``_stream.py``): a daemon thread
(sync) or a task on the running event loop (async) iterates the inner transport's body from the
moment the headers are in, stamps and records each read as it comes off the inner transport, and
puts it in a queue; the library's iteration takes the reads from the queue, the same bytes
objects in the same order, and the inner transport's exception, the same object, at the point
where it happened. Nothing is merged, split or changed.

Bounded: at most ``READ_AHEAD`` bytes wait for a library that reads slower than the stream comes.
Past it the pump stops reading until the library has taken half of them: the server's further
bytes wait in the socket (TCP's flow control holds the server), and are stamped when the pump
reads them, later than they came. The Stream says so (a ``capture-read-ahead`` anomaly): its
times from there on are the reader's pace, not the wire's. A chat answer is far below it (a long
one is a few hundred KB).

Closing the body early (``break``, or an SDK's ``close()``) stops the pump: a read in progress is
cut by shutting the socket down (as ``nito_nb.Stream.close()`` does: the connection would not
be reused anyway, its body being unread), the pump is waited for, then the inner body is closed,
in the caller's thread. A transport of the user's that gives no socket (``network_stream``) is
waited for until its read in progress returns. An async pump needs an asyncio loop; on another
(trio), the body is read as the library reads it and the Stream says its times are read times
(a ``capture-read-times`` anomaly).

:class:`SyncBody` and :class:`AsyncBody` are mixins: a stack's module puts them over its own
``SyncByteStream`` / ``AsyncByteStream`` (``_capture_httpx.py``, ``_capture_httpx2.py``). An error
body (not a stream) is read as the library reads it (its timing is no metric), and a library that
closes it unread is recorded as such (``Recorder.finish``).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ._capture import Recorder, Stack

__all__ = ["READ_AHEAD", "AsyncBody", "AsyncPump", "SyncBody", "SyncPump"]

#: Bytes read ahead of a library that reads slower than the stream arrives, at most (the module's
#: docstring says what happens past it). As much as the engine's socket keeps for a slow consumer
#: (``_transport/streams.py`` ``HIGH_WATER``).
READ_AHEAD = 4 * 1024 * 1024


class _Ended:
    """The pump's last item: the body ended (``error`` None) or failed with ``error``."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def _read_ahead_note(recorder: Recorder) -> None:
    recorder.source.note(
        "capture-read-ahead",
        f"the application read slower than the stream came: {READ_AHEAD >> 20} MiB waited for it, so "
        "reading paused until it caught up; later times are when it caught up, not when the bytes came",
    )


def _socket_of(response: Any) -> socket.socket | None:
    network_stream = response.extensions.get("network_stream")
    sock = network_stream.get_extra_info("socket") if network_stream is not None else None
    return sock if isinstance(sock, socket.socket) else None


class SyncPump:
    """A daemon thread that reads ``inner`` (a body's iterator) to its end as it arrives."""

    def __init__(
        self, inner: Any, recorder: Recorder, stack: Stack, sock: socket.socket | None
    ) -> None:
        self.out: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # Bytes put by the pump and taken by the library: each written by one thread only.
        self._put = 0
        self._taken = 0
        self._paused = False
        self._resume = threading.Event()
        self._stopping = False
        self._reading = True  # until the inner body has ended
        self._sock = sock
        self._thread = threading.Thread(
            target=self._run,
            args=(inner, recorder, stack),
            name="nito_nb-capture-pump",
            daemon=True,
        )
        self._thread.start()

    def _run(self, inner: Any, recorder: Recorder, stack: Stack) -> None:
        clock, out = time.perf_counter_ns, self.out
        reads = iter(inner)
        error: BaseException | None = None
        try:
            for data in reads:
                recorder.take(data, clock())  # stamped as it came off the inner transport
                if self._stopping:
                    break
                out.put(data)
                self._put += len(data)
                if self._put - self._taken > READ_AHEAD:
                    self._wait_for_reader(recorder)
                    if self._stopping:
                        break
        except BaseException as exc:  # the inner transport's: the library gets it where it happened
            error = exc
        finally:
            self._reading = False
            close = getattr(reads, "close", None)  # a generator left at a read: let go of it here
            if close is not None:
                with contextlib.suppress(Exception):
                    close()
        if not self._stopping:  # the end as it arrived (a library that stopped says so in close())
            recorder.finish(
                clock(), error=None if error is None else stack.as_httpx_error(error), show=False
            )
        out.put(_Ended(error))

    def _wait_for_reader(self, recorder: Recorder) -> None:
        if not self._paused:
            _read_ahead_note(recorder)
        self._paused = True
        self._resume.clear()
        # Checked again after clear(): the library may have taken enough in between (it updates
        # what it took before it looks at _paused, so one of the two sees the other).
        if self._put - self._taken > READ_AHEAD // 2 and not self._stopping:
            self._resume.wait()
        self._paused = False

    def took(self, n: int) -> None:
        """The library took ``n`` bytes (its thread)."""
        self._taken += n
        if self._paused and self._put - self._taken <= READ_AHEAD // 2:
            self._resume.set()

    def stop(self, *, wait: bool = True) -> None:
        """Stop reading: a read in progress is cut (the socket shut down), and the pump is waited
        for (``wait``), so that the caller may close the inner body."""
        self._stopping = True
        self._resume.set()
        if self._reading and self._thread.is_alive() and self._sock is not None:
            with contextlib.suppress(OSError):  # already closed: nothing to cut
                self._sock.shutdown(socket.SHUT_RDWR)
        if wait and self._thread is not threading.current_thread():
            self._thread.join()


class SyncBody:
    """A captured body (sync): a stream is pumped, anything else read as the library reads it."""

    def __init__(self, inner: Any, recorder: Recorder, stack: Stack, response: Any) -> None:
        self._inner = inner
        self._recorder = recorder
        self._stack = stack
        self._pump = (
            SyncPump(inner, recorder, stack, _socket_of(response)) if recorder.is_stream else None
        )

    def __iter__(self) -> Iterator[bytes]:
        if self._pump is None:
            yield from self._passed()
            return
        get, took = self._pump.out.get, self._pump.took
        while True:
            item = get()  # a KeyboardInterrupt lands here: the library's close() says stopped
            if type(item) is _Ended:
                self._recorder.close_views()  # the final render in the library's thread
                if item.error is not None:
                    raise item.error
                return
            took(len(item))
            yield item

    def _passed(self) -> Iterator[bytes]:
        clock, recorder = time.perf_counter_ns, self._recorder
        try:
            for data in self._inner:
                recorder.take(data, clock())
                yield data
        except GeneratorExit:  # the caller dropped the iterator: close() says how it ended
            raise
        except BaseException as exc:
            recorder.finish(clock(), error=self._stack.as_httpx_error(exc))
            raise
        recorder.finish(clock())

    def close(self) -> None:
        try:
            if self._pump is not None:
                self._pump.stop()
            self._inner.close()
        finally:
            self._recorder.finish(time.perf_counter_ns(), closed_early=True)

    def __del__(self) -> None:
        # Dropped unclosed (a response nobody holds): its pump stops at its next read.
        pump = getattr(self, "_pump", None)
        if pump is not None:
            with contextlib.suppress(Exception):
                pump.stop(wait=False)


class AsyncPump:
    """A task on the running loop that reads ``inner`` (an async body) to its end as it arrives."""

    def __init__(self, inner: Any, recorder: Recorder, stack: Stack) -> None:
        self.out: asyncio.Queue[Any] = asyncio.Queue()
        self._put = 0
        self._taken = 0
        self._resume = asyncio.Event()
        self._paused = False
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(
            self._run(inner, recorder, stack), name="nito_nb-capture-pump"
        )

    async def _run(self, inner: Any, recorder: Recorder, stack: Stack) -> None:
        clock, out = time.perf_counter_ns, self.out
        reads = inner.__aiter__()
        error: BaseException | None = None
        try:
            async for data in reads:
                recorder.take(data, clock())
                out.put_nowait(data)
                self._put += len(data)
                if self._put - self._taken > READ_AHEAD:
                    if not self._paused:
                        _read_ahead_note(recorder)
                    self._paused = True
                    self._resume.clear()
                    await self._resume.wait()
                    self._paused = False
        except asyncio.CancelledError:
            if self._stopping:  # the library closed the body: its aclose() says how it ended
                return
            error = asyncio.CancelledError()  # the loop is going away: the body ends here
        except Exception as exc:  # the inner transport's: the library gets it where it happened
            error = exc
        finally:
            close = getattr(reads, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
        recorder.finish(
            clock(), error=None if error is None else stack.as_httpx_error(error), show=False
        )
        out.put_nowait(_Ended(error))

    def took(self, n: int) -> None:
        self._taken += n
        if self._paused and self._put - self._taken <= READ_AHEAD // 2:
            self._resume.set()

    async def stop(self) -> None:
        """Stop reading (a read in progress is cancelled) and wait for the pump."""
        self._stopping = True
        task = self._task
        if not task.done():
            task.cancel()
            await asyncio.wait({task})


def _running_asyncio_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another async library's loop (trio)
        return False
    return True


class AsyncBody:
    """The async twin of :class:`SyncBody`."""

    def __init__(self, inner: Any, recorder: Recorder, stack: Stack, response: Any) -> None:
        self._inner = inner
        self._recorder = recorder
        self._stack = stack
        self._pump: AsyncPump | None = None
        if recorder.is_stream:
            if _running_asyncio_loop():
                self._pump = AsyncPump(inner, recorder, stack)
            else:
                recorder.source.note(
                    "capture-read-times",
                    "not an asyncio loop: the times are when the "
                    "library read each chunk, not when it arrived",
                )

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._pump is None:
            async for data in self._passed():
                yield data
            return
        get, took = self._pump.out.get, self._pump.took
        while True:
            item = await get()
            if type(item) is _Ended:
                self._recorder.close_views()
                if item.error is not None:
                    raise item.error
                return
            took(len(item))
            yield item

    async def _passed(self) -> AsyncIterator[bytes]:
        clock, recorder = time.perf_counter_ns, self._recorder
        try:
            async for data in self._inner:
                recorder.take(data, clock())
                yield data
        except GeneratorExit:
            raise
        except BaseException as exc:
            recorder.finish(clock(), error=self._stack.as_httpx_error(exc))
            raise
        recorder.finish(clock())

    async def aclose(self) -> None:
        try:
            if self._pump is not None:
                await self._pump.stop()
            await self._inner.aclose()
        finally:
            self._recorder.finish(time.perf_counter_ns(), closed_early=True)
