"""Non-streaming requests: the `chat.completion` object a buffering gateway makes of the chunks."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ._reply import DONE, ErrorReply, Event, error_reply, split_sse
from ._request import SimRequest


def collect_completion(events: Iterable[Event], request: SimRequest) -> ErrorReply | dict[str, Any]:
    """A `chat.completion` object made from a scenario's chunks (for `stream: false`).

    A mid-stream error or a dropped connection becomes a 502 JSON error, as a gateway that
    buffers the upstream stream would answer.
    """
    # Per choice index (several when the request asked for `n`): content, details, calls, finish.
    choices: dict[int, dict[str, Any]] = {}
    first: dict[str, Any] = {}
    usage = None
    extras: dict[str, Any] = {}
    for event in events:
        if event.kind == "drop":
            return error_reply(502, "Upstream connection dropped (simulated fault).")
        for piece in split_sse(event.data):
            line = piece.strip()
            if not line.startswith(b"data: ") or line == DONE.strip():
                continue
            try:
                chunk = json.loads(line[6:])
            except ValueError:
                continue
            if chunk.get("error"):
                return error_reply(502, str(chunk["error"].get("message")))
            first = first or chunk
            usage = chunk.get("usage") or usage
            for key in ("web_search", "free_tier"):
                if key in chunk:
                    extras[key] = chunk[key]
            for choice in chunk.get("choices") or []:
                state = choices.setdefault(
                    choice.get("index", 0),
                    {"content": [], "details": [], "calls": {}, "finish": None},
                )
                delta = choice.get("delta") or {}
                content = delta.get("content") or ""
                if isinstance(content, list):  # sim/mistral's parts: kept as parts
                    state["content"].extend(content)
                else:
                    state["content"].append(content)
                state["details"].extend(delta.get("reasoning_details") or [])
                for fragment in delta.get("tool_calls") or []:
                    call = state["calls"].setdefault(
                        fragment["index"],
                        {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                    )
                    call["id"] = fragment.get("id") or call["id"]
                    function = fragment.get("function") or {}
                    call["function"]["name"] += function.get("name") or ""
                    call["function"]["arguments"] += function.get("arguments") or ""
                state["finish"] = choice.get("finish_reason") or state["finish"]
    out = []
    for index in sorted(choices):
        state = choices[index]
        pieces = state["content"]
        if all(isinstance(p, str) for p in pieces):
            text: Any = "".join(pieces) or None
        else:  # Mistral's non-streamed message keeps the parts too
            text = [p if isinstance(p, dict) else {"type": "text", "text": p} for p in pieces if p]
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if state["calls"]:
            message["tool_calls"] = [state["calls"][i] for i in sorted(state["calls"])]
        if state["details"]:
            message["reasoning_details"] = state["details"]
        out.append({"index": index, "message": message, "finish_reason": state["finish"]})
    completion = {
        "id": first.get("id"),
        "object": "chat.completion",
        "created": first.get("created"),
        "model": request.model,
        "choices": out,
        **extras,
    }
    if usage is not None:
        completion["usage"] = usage
    return completion
