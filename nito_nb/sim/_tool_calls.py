"""sim/tools: parallel tool calls built from the request's `tools`, and the answer to their results.

The arguments are made from each tool's JSON schema (`_schema.instance`, seeded), then cut into
small pieces as providers stream them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from typing import Any

from ._reply import Event, round_robin
from ._request import message_text
from ._schema import SchemaError, instance
from ._structured import answer_text
from ._writer import ChunkWriter, some

_DEFAULT_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Local time in a time zone.",
            "parameters": {
                "type": "object",
                "properties": {"timezone": {"type": "string"}},
                "required": ["timezone"],
            },
        },
    },
]


def _arguments(parameters: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """Arguments that conform to the tool's parameters (`_schema.instance`); `{}` for a tool
    without parameters, or with a schema the simulator cannot answer (a tool is not refused)."""
    try:
        value = instance(parameters, rng) if parameters else {}
    except SchemaError:
        return {}
    return value if isinstance(value, dict) else {}


def _tool_function(tool: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    assert isinstance(function, dict)
    name = function.get("name")
    parameters = function.get("parameters")
    return (
        name if isinstance(name, str) and name else "tool",
        parameters if isinstance(parameters, dict) else {},
    )


def _split_arguments(arguments: str, rng: random.Random) -> list[str]:
    """Cut a JSON string into pieces of 1 to 6 characters, as providers stream them."""
    pieces = []
    i = 0
    while i < len(arguments):
        n = rng.randint(1, 6)
        pieces.append(arguments[i : i + n])
        i += n
    return pieces


def tool_calls(w: ChunkWriter) -> Iterator[Event]:
    request = w.request
    if request.messages[-1].get("role") == "tool":
        yield from _answer_tool_results(w)
        return
    if request.tool_choice == "none":
        yield from w.contents(
            answer_text(request, "I will answer without calling a tool: no tool was needed.")
        )
        yield from w.finish("stop")
        return
    tools = request.tools or _DEFAULT_TOOLS
    choice = request.tool_choice
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        wanted = choice["function"].get("name")
        tools = [t for t in tools if _tool_function(t)[0] == wanted] or tools[:1]
    count = request.options.tool_calls or min(len(tools), 4)
    if not request.parallel_tool_calls:
        count = 1  # the request forbids several calls in one answer
    rng = random.Random(request.options.seed)
    calls = []
    for index in range(count):
        name, parameters = _tool_function(tools[index % len(tools)])
        arguments = json.dumps(_arguments(parameters, rng), ensure_ascii=False)
        call_id = f"call_sim_{w.id[-8:]}_{index}"
        calls.append((index, call_id, name, _split_arguments(arguments, rng)))

    def one_call(index: int, call_id: str, name: str, pieces: list[str]) -> Iterator[Event]:
        yield from some([w.tool_call_start(index, call_id, name)])
        for piece in pieces:
            event = w.tool_call_arguments(index, piece)
            if event is None:
                return
            yield event

    streams = [one_call(*call) for call in calls]
    if request.options.interleave:
        # Round-robin over the calls: docs/PROTOCOL.md allows the fragments of parallel calls to mix.
        yield from round_robin(streams)
    else:
        for s in streams:
            yield from s
    yield from w.finish("tool_calls")


def _answer_tool_results(w: ChunkWriter) -> Iterator[Event]:
    results = []
    for message in reversed(w.request.messages):
        if message.get("role") != "tool":
            break
        text = message_text(message)
        results.append(f"- `{message.get('tool_call_id', '?')}`: {text[:200]}")
    lines = "\n".join(reversed(results))
    yield from w.contents(
        answer_text(w.request, f"Here is what the tools returned:\n\n{lines}\n\nAll done.")
    )
    yield from w.finish("stop")
