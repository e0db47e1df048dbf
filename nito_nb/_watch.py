"""``nito_nb.watch(source)``: a Stream from the chunk objects of a library whose bytes we cannot see.

    for chunk in nito_nb.watch(chain.stream(...)):     # LangChain, LiteLLM, the openai SDK...
        ...                                           # each item, unchanged and at once
    nito_nb.last()                                    # the Stream, complete once the source ended

Each item is stamped with ``time.perf_counter_ns()`` the moment the source hands it over, turned
into the JSON of a ``chat.completion.chunk`` (:func:`to_chunk`) and fed to a Stream as one SSE
event, so the accumulator, the frame and the live view work as for a stream read from the wire.
Such a log is *re-serialised*: its bytes are nito_nb's JSON of the library's objects, not what the
server sent, and its times are when the library produced each item (a library that buffers shows
as bursts). ``request["capture"] == "watch"`` and ``request["reserialised"]`` say so in the saved
log; t0 is the first request for an item (the request itself is not seen: ``ttfb`` is unknown).
For the exact bytes, give the library a capturing client instead (``httpx_client``).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ._capture import VIEWERS, Views, open_views, register
from ._core.errors import StreamTruncatedError
from ._core.status import Status
from ._display.throttle import MAX_RATE
from ._stream_source import StreamSource

__all__ = ["Watch", "to_chunk", "watch"]

#: Types of the openai SDK's ``chat.completions.stream()`` events that are derived from a chunk
#: (the chunk itself comes as a ``chunk`` event): recording them would count every delta twice.
DERIVED_EVENTS = frozenset(
    {
        "content.delta",
        "content.done",
        "refusal.delta",
        "refusal.done",
        "logprobs.content.delta",
        "logprobs.content.done",
        "logprobs.refusal.delta",
        "logprobs.refusal.done",
        "tool_calls.function.arguments.delta",
        "tool_calls.function.arguments.done",
    }
)


def watch(
    source: Any, *, show: bool = True, format: str = "markdown", max_rate: float = MAX_RATE
) -> Watch:
    """Wrap an iterator (or async iterator) of chat-completion chunks: every item is passed on
    unchanged while a Stream records it and, with ``show``, a live view shows it.

    Items may be the openai SDK's ``ChatCompletionChunk`` (or its ``stream()`` helper's events),
    LiteLLM's ``ModelResponseStream``, LangChain's ``AIMessageChunk``, plain dicts or strings.
    Inside ``nito_nb.live()`` the block's view is used instead of a view of its own.
    """
    if not (hasattr(source, "__iter__") or hasattr(source, "__aiter__")):
        raise TypeError(
            f"watch() takes an iterator of chunks (a stream), not {type(source).__name__}: "
            "pass the result of a stream=True call"
        )
    return Watch(source, show=show, format=format, max_rate=max_rate)


class Watch:
    """The wrapper :func:`watch` returns: iterate it (``for`` or ``async for``) as you would the
    source; ``.stream`` is the Stream. Other attributes are the source's."""

    def __init__(
        self,
        source: Any,
        *,
        show: bool = True,
        format: str = "markdown",
        max_rate: float = MAX_RATE,
    ) -> None:
        if show:
            from ._render import check_format  # the renderer is needed only to show

            check_format(format)
        kind = type(source)
        self.source = source
        self.show = show
        self.format = format
        self.max_rate = max_rate
        # What fills the Stream (``.stream``): the library's items, re-serialised. Not ``source``,
        # which is the library's iterator.
        self._recording = StreamSource(
            {
                "model": None,
                "messages": [],
                "params": {},
                "capture": "watch",
                "reserialised": True,  # the bytes are nito_nb's JSON of the library's objects
                "source": f"{kind.__module__}.{kind.__qualname__}",
            },
            raise_errors=False,
        )
        self.stream = self._recording.stream
        self._views: Views | None = None
        self._n_items = 0

    def __getattr__(self, name: str) -> Any:
        # Only called for names Watch lacks: the source's own API (close(), response...) stays.
        try:
            source = self.__dict__["source"]
        except KeyError:
            raise AttributeError(name) from None
        return getattr(source, name)

    def __repr__(self) -> str:
        return f"<nito_nb.watch of {self.stream.request['source']}: {self.stream!r}>"

    # -- recording ---------------------------------------------------------------------------

    def _begin(self) -> None:
        if self._views is not None:
            raise RuntimeError(
                "this watch() was already iterated: watch the next stream with a new watch()"
            )
        self._recording.start()
        register(self.stream)
        if VIEWERS.get() or not self.show:
            self._views = open_views(self.stream)
        else:
            from ._display.notebook import live_display

            view = live_display(self.stream, format=self.format, max_rate=self.max_rate)
            self._views = Views(self.stream, [view])

    def _take(self, item: Any, t_ns: int) -> None:
        try:
            chunk = to_chunk(item)
            if chunk is None:
                return
            self._n_items += 1
            if chunk.get("model") and not self.stream.request.get("model"):
                self.stream.request["model"] = chunk["model"]
            unmapped = chunk.get("unmapped")
            data = json.dumps(chunk, ensure_ascii=False, separators=(",", ":"), default=str)
            self._recording.feed(b"data: " + data.encode("utf-8") + b"\n\n", t_ns)
            if unmapped is not None:
                self._recording.note(
                    "watch-unmapped", f"an item nito_nb does not map was kept as is: {unmapped}"
                )
            assert self._views is not None
            self._views.update()
        except Exception as exc:  # recording must never break the caller's iteration
            self._recording.note(
                "watch-failed", f"an item could not be recorded: {type(exc).__name__}: {exc}"
            )

    def _finish(
        self, t_ns: int, *, closed: bool = False, error: BaseException | None = None
    ) -> None:
        stream, recording = self.stream, self._recording
        if stream.finished:
            return
        try:
            if error is not None:
                import asyncio

                if isinstance(error, (KeyboardInterrupt, asyncio.CancelledError)):
                    recording.end(t_ns, status=Status.STOPPED)
                else:
                    recording.end(
                        t_ns,
                        status=Status.TRUNCATED,
                        exception=StreamTruncatedError(
                            f"The source raised {type(error).__name__} after {self._n_items} items. "
                            "What arrived is kept in .stream."
                        ),
                    )
            elif closed:
                recording.end(t_ns, status=Status.STOPPED)
            else:
                # The source ended: its library saw the end of the stream (there is no [DONE] to
                # see here). An error chunk still says error.
                recording.end(t_ns, status=None if stream.error else Status.DONE)
        finally:
            if self._views is not None:
                self._views.finish()

    # -- iteration ---------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        return self._iterate()

    def _iterate(self) -> Iterator[Any]:
        clock = time.perf_counter_ns
        self._begin()
        try:
            for item in self.source:
                self._take(item, clock())
                yield item
        except GeneratorExit:  # the caller stopped early
            self._finish(clock(), closed=True)
            raise
        except BaseException as exc:
            self._finish(clock(), error=exc)
            raise
        self._finish(clock())

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._aiterate()

    async def _aiterate(self) -> AsyncIterator[Any]:
        clock = time.perf_counter_ns
        self._begin()
        try:
            async for item in self.source:
                self._take(item, clock())
                yield item
        except GeneratorExit:
            self._finish(clock(), closed=True)
            raise
        except BaseException as exc:
            self._finish(clock(), error=exc)
            raise
        self._finish(clock())


# -- items to chunks ---------------------------------------------------------------------------


def to_chunk(item: Any) -> dict[str, Any] | None:
    """The ``chat.completion.chunk`` JSON of one item; None for an item that repeats another.

    An item of a shape nito_nb does not know is kept under ``unmapped`` (its type and repr), so
    that it is in the log and reported as an anomaly, never dropped silently.
    """
    if isinstance(item, dict):
        return item
    if isinstance(item, str):  # a chain ending in a string parser
        return {
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": item}}],
        }
    event_type = getattr(item, "type", None)  # the openai stream() helper's events
    if event_type == "chunk" and hasattr(item, "chunk"):
        return to_chunk(item.chunk)
    if isinstance(event_type, str) and event_type in DERIVED_EVENTS:
        return None
    if _is_langchain_message(item):
        return _from_langchain(item)
    if hasattr(item, "message") and _is_langchain_message(item.message):  # ChatGenerationChunk
        return _from_langchain(item.message)
    dumped = _dump(item)
    if isinstance(dumped, dict):
        return dumped
    return {
        "unmapped": {
            "type": f"{type(item).__module__}.{type(item).__qualname__}",
            "repr": repr(item)[:500],
        }
    }


def _dump(item: Any) -> Any:
    """A pydantic model's fields as sent (v2 ``model_dump``, v1 ``dict``), or None."""
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json", exclude_unset=True)
        except TypeError:
            return dump()
    legacy = getattr(item, "dict", None)
    if callable(legacy) and hasattr(item, "__fields__"):
        return legacy(exclude_unset=True)
    return None


def _is_langchain_message(item: Any) -> bool:
    return (
        hasattr(item, "tool_call_chunks")
        and hasattr(item, "response_metadata")
        and hasattr(item, "content")
    )


#: LangChain content blocks that carry reasoning, and the key of their text.
_REASONING_BLOCKS = {"reasoning": "reasoning", "thinking": "thinking"}


def _from_langchain(message: Any) -> dict[str, Any]:
    """An ``AIMessageChunk`` in the delta format: content, reasoning, tool-call fragments, usage."""
    delta: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    content = message.content
    if isinstance(content, str):
        if content:
            delta["content"] = content
    elif isinstance(content, list):
        texts, thoughts, others = [], [], []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if isinstance(block, str):
                texts.append(block)
            elif kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind in _REASONING_BLOCKS and isinstance(block.get(_REASONING_BLOCKS[kind]), str):
                thoughts.append(block[_REASONING_BLOCKS[kind]])
            elif kind == "reasoning" and isinstance(block.get("summary"), list):
                thoughts.extend(s.get("text", "") for s in block["summary"] if isinstance(s, dict))
            else:
                others.append(block)
        if texts:
            delta["content"] = "".join(texts)
        if thoughts:
            delta["reasoning"] = "".join(thoughts)
        if others:
            extra["unmapped"] = {"type": "content blocks", "repr": repr(others)[:500]}
    kwargs = getattr(message, "additional_kwargs", None) or {}
    for name in ("reasoning_content", "reasoning"):
        value = kwargs.get(name)
        if isinstance(value, str) and value and "reasoning" not in delta:
            delta[name] = value
    if isinstance(kwargs.get("reasoning_details"), list):
        delta["reasoning_details"] = kwargs["reasoning_details"]
    calls = []
    for position, fragment in enumerate(message.tool_call_chunks or []):
        call: dict[str, Any] = {
            "index": fragment.get("index") if fragment.get("index") is not None else position
        }
        if fragment.get("id"):
            call["id"] = fragment["id"]
            call["type"] = "function"
        function: dict[str, Any] = {"arguments": fragment.get("args") or ""}
        if fragment.get("name"):
            function["name"] = fragment["name"]
        call["function"] = function
        calls.append(call)
    if calls:
        delta["tool_calls"] = calls
    metadata = getattr(message, "response_metadata", None) or {}
    choice: dict[str, Any] = {
        "index": 0,
        "delta": delta,
        "finish_reason": metadata.get("finish_reason"),
    }
    chunk: dict[str, Any] = {"object": "chat.completion.chunk", "choices": [choice]}
    if getattr(message, "id", None):
        chunk["id"] = message.id
    if metadata.get("model_name"):
        chunk["model"] = metadata["model_name"]
    usage = _usage(getattr(message, "usage_metadata", None))
    if usage is not None:
        chunk["usage"] = usage
    chunk.update(extra)
    return chunk


def _usage(metadata: Any) -> dict[str, Any] | None:
    """LangChain's ``usage_metadata`` in the OpenAI usage shape."""
    if not isinstance(metadata, dict):
        return None
    usage: dict[str, Any] = {
        "prompt_tokens": metadata.get("input_tokens"),
        "completion_tokens": metadata.get("output_tokens"),
        "total_tokens": metadata.get("total_tokens"),
    }
    output = metadata.get("output_token_details") or {}
    if isinstance(output, dict) and output.get("reasoning") is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": output["reasoning"]}
    inputs = metadata.get("input_token_details") or {}
    if isinstance(inputs, dict) and inputs.get("cache_read") is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": inputs["cache_read"]}
    return usage
