"""The body of a captured response, as the library reads it (either stack).

:class:`SyncBody` and :class:`AsyncBody` are mixins: a stack's module puts them over its own
``SyncByteStream`` / ``AsyncByteStream`` (``_capture_httpx.py``, ``_capture_httpx2.py``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ._capture import Recorder, Stack

__all__ = ["AsyncBody", "SyncBody"]


class SyncBody:
    def __init__(self, inner: Any, recorder: Recorder, stack: Stack, response: Any) -> None:
        self._inner = inner
        self._recorder = recorder
        self._stack = stack

    def __iter__(self) -> Iterator[bytes]:
        clock, recorder = time.perf_counter_ns, self._recorder
        try:
            for data in self._inner:
                recorder.take(data, clock())  # stamped as it came off the inner transport
                yield data
        except GeneratorExit:  # the caller dropped the iterator: close() says how it ended
            raise
        except BaseException as exc:
            recorder.finish(clock(), error=self._stack.as_httpx_error(exc))
            raise
        recorder.finish(clock())

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._recorder.finish(time.perf_counter_ns(), closed_early=True)


class AsyncBody:
    def __init__(self, inner: Any, recorder: Recorder, stack: Stack, response: Any) -> None:
        self._inner = inner
        self._recorder = recorder
        self._stack = stack

    async def __aiter__(self) -> AsyncIterator[bytes]:
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
            await self._inner.aclose()
        finally:
            self._recorder.finish(time.perf_counter_ns(), closed_early=True)
