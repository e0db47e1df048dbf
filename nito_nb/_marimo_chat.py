"""``nito_nb.marimo_chat``: a chat model for marimo's chat element, streaming through nito_nb.

    chat = mo.ui.chat(nito_nb.marimo_chat("sim/chat", system="Be brief.", tools=[get_weather]))

marimo calls the model with the conversation (its ``ChatMessage`` list) and the element's
settings (``ChatModelConfig``) and streams whatever an async generator yields. Each turn is an
``AsyncStream`` of nito_nb's client on marimo's own event loop (its reader stamps every read as it
comes off the socket), kept in ``streams`` for frames and metrics; what it yields is what has
arrived since the last chunk, read from the Stream's answer (the accumulator's rules: reasoning
source, redaction), in the chunk types marimo's chat understands (the Vercel AI SDK's):
reasoning as ``reasoning-*`` chunks, the answer as text (marimo keeps it as the message's
content), each tool call as ``tool-input-available`` and, with ``run_tools=True``, its result as
``tool-output-available`` before the next round. marimo's Stop cancels the turn: the Stream is
closed (``stopped``) and keeps what arrived. The element shows no timings, usage or cost; the model
itself, as a cell's output, shows each turn's status line (``_display_``).

The parameters are the ChatWidget's (``nito_nb/_widget/chat.py``), with the same tools
(``nito_nb.tools``) and the same limit on tool rounds.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from ._client import AsyncClient
from ._core.errors import NitoError, one_line
from ._core.status import Status
from ._stream import AsyncStream
from .tools import python_tools, tool_round, tool_schemas

__all__ = ["MarimoChat", "marimo_chat"]

#: The settings of marimo's chat element that are request parameters (``top_k`` is not one of
#: the OpenAI-compatible API's).
CONFIG_PARAMS = ("max_tokens", "temperature", "top_p", "frequency_penalty", "presence_penalty")


def message_text(message: Any) -> str:
    """The text of one of marimo's chat messages: its content when it is text, else its text parts
    (an answer that marimo's front end assembled from streamed chunks)."""
    content = getattr(message, "content", None)
    if isinstance(content, str) and content:
        return content
    texts = []
    for part in getattr(message, "parts", None) or []:
        kind = part.get("type") if isinstance(part, dict) else getattr(part, "type", None)
        text = part.get("text") if isinstance(part, dict) else getattr(part, "text", None)
        if kind == "text" and isinstance(text, str):
            texts.append(text)
    return "".join(texts) if texts else ("" if content is None else str(content))


class MarimoChat:
    """A model for ``mo.ui.chat``; every turn's Stream is in ``streams`` (a tool round is a turn)."""

    def __init__(
        self,
        model: str = "sim/chat",
        *,
        system: str | None = None,
        tools: Iterable[Any] | None = None,
        run_tools: bool = False,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: Any = None,
        **params: Any,
    ) -> None:
        items = [tools] if callable(tools) or isinstance(tools, dict) else list(tools or [])
        schemas = tool_schemas(items)
        self._functions: dict[str, Callable[..., Any]] = python_tools(items) if run_tools else {}
        if run_tools and not self._functions:
            raise ValueError(
                "run_tools=True runs the Python functions among tools=: give at least one"
            )
        self.model = model
        self.system = system
        self.params = dict(params)
        if tools is not None:
            self.params["tools"] = schemas
        self._connection = {"api_key": api_key, "base_url": base_url, "timeout": timeout}
        AsyncClient(**self._connection)  # a bad base URL or timeout is refused here, not mid-chat
        #: Every turn's Stream, oldest first (``nito_nb.frame(chat.streams)``).
        self.streams: list[AsyncStream] = []

    def messages(self, chat_messages: Iterable[Any]) -> list[dict[str, Any]]:
        """The request's messages for marimo's conversation: the system prompt, then each message's
        role and text."""
        out = [{"role": "system", "content": self.system}] if self.system else []
        for message in chat_messages:
            role = str(getattr(message, "role", "user"))
            if role == "system" and self.system:
                continue  # this chat's own system prompt stands
            out.append({"role": role, "content": message_text(message)})
        return out

    def request_params(self, config: Any) -> dict[str, Any]:
        """This chat's parameters, and the element's settings that are set (they are the user's
        latest choice)."""
        params = dict(self.params)
        for name in CONFIG_PARAMS:
            value = getattr(config, name, None)
            if value is not None:
                params[name] = value
        return params

    async def __call__(self, messages: list[Any], config: Any) -> AsyncIterator[Any]:
        """One answer to marimo's conversation, streamed as marimo's chat chunks."""
        history = self.messages(messages)
        params = self.request_params(config)
        # A client (its connection pool) per answer, closed when it ends: two chat elements may
        # share this model, and one answer's end must not close the pool of another.
        client = AsyncClient(**self._connection)
        try:
            for rounds_done in itertools.count():  # tool_round ends it (MAX_TOOL_ROUNDS)
                stream = client.stream(history, model=self.model, raise_errors=False, **params)
                self.streams.append(stream)
                async for chunk in self._follow(stream):
                    yield chunk
                runs = tool_round(stream, self._functions, rounds_done)
                if not runs:
                    return
                for call, run in zip(stream.tool_calls, runs, strict=True):
                    yield {
                        "type": "tool-output-available",
                        "toolCallId": str(call.id),
                        "output": run.result,
                    }
                history = [*history, stream.message, *(run.message for run in runs)]
        finally:
            await client.aclose()

    async def _follow(self, stream: AsyncStream) -> AsyncIterator[Any]:
        """What arrives on ``stream``, as marimo's chat chunks; Stop closes the stream."""
        reasoning_id: str | None = None
        reasoning_open = False
        shown_reasoning = shown_content = 0
        try:
            try:
                async for _chunk in stream:
                    reasoning, content = stream.reasoning or "", stream.content or ""
                    if len(reasoning) > shown_reasoning and not shown_content:
                        if reasoning_id is None:
                            reasoning_id = f"reasoning_{uuid.uuid4().hex}"
                            reasoning_open = True
                            yield {"type": "reasoning-start", "id": reasoning_id}
                        yield {
                            "type": "reasoning-delta",
                            "id": reasoning_id,
                            "delta": reasoning[shown_reasoning:],
                        }
                        shown_reasoning = len(reasoning)
                    if len(content) > shown_content:
                        if reasoning_open:
                            reasoning_open = False
                            yield {"type": "reasoning-end", "id": reasoning_id}
                        yield content[shown_content:]  # text: marimo keeps it as the answer
                        shown_content = len(content)
            except NitoError:
                pass  # an HTTP error before the body: the stream is failed, its status says why
            # The end releases what the stream held back while it ran (a tail that could start
            # the key): without this, an answer lost its last characters whenever the end came
            # in a read of its own.
            reasoning, content = stream.reasoning or "", stream.content or ""
            if reasoning_open and len(reasoning) > shown_reasoning:
                yield {
                    "type": "reasoning-delta",
                    "id": reasoning_id,
                    "delta": reasoning[shown_reasoning:],
                }
            if reasoning_open:
                yield {"type": "reasoning-end", "id": reasoning_id}
            if len(content) > shown_content:
                yield content[shown_content:]
            for call in stream.tool_calls:
                yield {
                    "type": "tool-input-available",
                    "toolCallId": str(call.id),
                    "toolName": str(call.name),
                    "input": call.parsed if call.valid_json else call.arguments,
                }
            if stream.status != Status.DONE and stream.exception is not None:
                yield f"\n\n✗ {stream.status}: {one_line(stream.exception, with_type=False)}"
        finally:
            if not stream.finished:  # Stop (marimo cancels the turn) or the generator closed
                await stream.aclose()

    def _display_(self) -> Any:
        """As a marimo cell's output: each turn's status line (timings, usage, cost), which the
        chat element does not show."""
        import marimo

        from ._render import render_parts

        lines = [
            next(p.html for p in render_parts(s, live=False) if p.key == "status")
            for s in self.streams
        ]
        return marimo.Html("".join(lines) or "<span>no turn yet</span>")

    def __repr__(self) -> str:
        return f"<nito_nb.marimo_chat {self.model!r}: {len(self.streams)} turn(s)>"


def marimo_chat(model: str = "sim/chat", **options: Any) -> MarimoChat:
    """A chat model for marimo's chat element: ``mo.ui.chat(nito_nb.marimo_chat("sim/chat"))``.
    Takes the ChatWidget's options (``system``, ``tools``, ``run_tools``, ``api_key``,
    ``base_url``, ``timeout``, request parameters); every turn's Stream is in ``.streams``."""
    return MarimoChat(model, **options)
