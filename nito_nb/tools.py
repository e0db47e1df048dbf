"""Python functions as tools: a function's signature and docstring to an OpenAI tool schema,
and running the tool calls a model made. One implementation for every shell: the magic
(``%%nito --tools/--run-tools``) and the chat widget (``ChatWidget(tools=..., run_tools=True)``).

A failing tool is a result the model reads ("Error: ..."), never an exception in the caller; each
run is described by one line (``ToolRun.line``) that the shell shows: the magic prints it, the
widget puts it in its transcript (its worker thread never prints).
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ._core.printable import printable
from ._core.status import Status

__all__ = [
    "MAX_TOOL_ROUNDS",
    "ToolRun",
    "execute_tool",
    "function_tool",
    "python_tools",
    "tool_functions",
    "tool_round",
    "tool_schemas",
    "tools_from",
]

#: Running tools: at most this many rounds of (tool calls, results) before the answer is left as is.
MAX_TOOL_ROUNDS = 5


# -- tools ---------------------------------------------------------------------------------------

_JSON_TYPES: dict[Any, str] = {
    int: "integer", float: "number", str: "string", bool: "boolean",
    list: "array", tuple: "array", set: "array", dict: "object", type(None): "null",
}


def _json_schema(annotation: Any) -> dict[str, Any]:
    """A JSON schema for a parameter annotation; an unknown one accepts anything."""
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        options = [a for a in args if a is not type(None)]
        return _json_schema(options[0]) if len(options) == 1 else {}
    if origin in (list, tuple, set, Sequence):
        schema: dict[str, Any] = {"type": "array"}
        if args and args[0] is not Ellipsis:
            schema["items"] = _json_schema(args[0])
        return schema
    if origin is dict:
        return {"type": "object"}
    return {}


def function_tool(function: Callable[..., Any], name: str | None = None) -> dict[str, Any]:
    """An OpenAI function tool built from a Python function's signature and docstring."""
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # unresolvable string annotations: fall back to the raw ones
        hints = dict(getattr(function, "__annotations__", {}))
    properties: dict[str, Any] = {}
    required = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        schema = _json_schema(hints.get(parameter.name, parameter.empty))
        if parameter.default is parameter.empty:
            required.append(parameter.name)
        elif isinstance(parameter.default, (str, int, float, bool, type(None))):
            schema["default"] = parameter.default
        properties[parameter.name] = schema
    doc = inspect.getdoc(function) or ""
    spec: dict[str, Any] = {
        "name": name or function.__name__,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }
    description = doc.split("\n\n")[0].strip()
    if description:
        spec["description"] = description
    return {"type": "function", "function": spec}


def _items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def tool_schemas(items: Iterable[Any], where: str | None = None) -> list[dict[str, Any]]:
    """The request's ``tools`` for ``items``: Python functions (schema from the signature and
    docstring), OpenAI tools (``{"type": "function", "function": {...}}``) or bare function specs
    (``{"name": ..., "parameters": ...}``). ``where`` names the item in the error message."""
    tools: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, dict) and item.get("type") == "function" and isinstance(item.get("function"), dict):
            tools.append(item)
        elif isinstance(item, dict) and "name" in item:
            tools.append({"type": "function", "function": item})
        elif callable(item):
            tools.append(function_tool(item))
        else:
            raise ValueError(
                f"{where or f'tools: {item!r:.60}'} is a {type(item).__name__}; give a function, or a dict like "
                '{"name": ..., "description": ..., "parameters": {...}}'
            )
    return tools


def python_tools(items: Iterable[Any]) -> dict[str, Callable[..., Any]]:
    """The Python functions among ``items``, by tool name (schemas have nothing to run)."""
    return {
        getattr(item, "__name__", repr(item)): item
        for item in items
        if callable(item) and not isinstance(item, dict)
    }


def _named(names: str, namespace: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(name, namespace.get(name)) for name in filter(None, (n.strip() for n in names.split(",")))]


def tools_from(names: str, namespace: dict[str, Any]) -> list[dict[str, Any]]:
    """``--tools a,b``: each name is a JSON schema (dict), a list of them, or a Python function."""
    tools: list[dict[str, Any]] = []
    for name, value in _named(names, namespace):
        if name not in namespace:
            raise ValueError(f"--tools: no variable named {name!r} in the namespace")
        tools += tool_schemas(_items(value), where=f"--tools: {name!r}")
    return tools


def tool_functions(names: str, namespace: dict[str, Any]) -> dict[str, Callable[..., Any]]:
    """The Python functions among ``--tools`` names, by tool name."""
    functions: dict[str, Callable[..., Any]] = {}
    for _name, value in _named(names, namespace):
        functions.update(python_tools(_items(value)))
    return functions


@dataclass(frozen=True)
class ToolRun:
    """One tool call run: the ``tool`` message that goes back to the model, and its one line."""

    name: str
    arguments: dict[str, Any] | None
    result: str
    message: dict[str, Any]

    @property
    def line(self) -> str:
        """What was executed and what came back, on one line (long values cut at 200 characters;
        the model's name for the tool printable, as the result)."""
        shown = ", ".join(f"{k}={v!r}" for k, v in (self.arguments or {}).items())
        result = " ".join(self.result.split())
        return printable(f"→ ran {self.name}({shown[:200]}) → {result[:200]}")


def execute_tool(functions: dict[str, Callable[..., Any]], call: Any) -> ToolRun:
    """Run one tool call of a model; a failure (unknown name, bad arguments, an exception of the
    function) is the result the model reads, never an exception here."""
    function = functions.get(call.name)
    arguments = call.parsed if call.valid_json else None
    if function is None:
        result = f"Error: no function named {call.name!r} was offered to run."
    elif not isinstance(arguments, dict):
        result = f"Error: the arguments are not a JSON object: {call.arguments[:200]!r}"
    else:
        try:
            value = function(**arguments)
            result = value if isinstance(value, str) else json.dumps(value, default=str)
        except Exception as exc:  # the model sees the error and may try again
            result = f"Error: {type(exc).__name__}: {exc}"
    message = {"role": "tool", "tool_call_id": call.id, "content": result}
    return ToolRun(str(call.name), arguments if isinstance(arguments, dict) else None, result, message)


def tool_round(stream: Any, functions: dict[str, Callable[..., Any]], rounds_done: int) -> list[ToolRun] | None:
    """After a finished answer: run its tool calls if another round is due, else None.

    A round is due when there are functions to run, the answer ended normally (``done``: a stopped
    or broken answer's calls may be incomplete) with tool calls, and fewer than
    ``MAX_TOOL_ROUNDS`` rounds ran. The caller sends ``[stream.message, *(r.message for r in runs)]``
    back and shows each run's line.
    """
    if not functions or stream.status != Status.DONE or not stream.tool_calls or rounds_done >= MAX_TOOL_ROUNDS:
        return None
    return [execute_tool(functions, call) for call in stream.tool_calls]
