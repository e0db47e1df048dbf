"""Python functions as tools: a function's signature and docstring to an OpenAI tool schema,
and running the tool calls a model made (``%%nito --tools/--run-tools``; shared by every shell).

A failing tool is a result the model reads ("Error: ..."), never an exception in the caller.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["function_tool", "run_tool", "tool_functions", "tools_from"]


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


def tools_from(names: str, namespace: dict[str, Any]) -> list[dict[str, Any]]:
    """``--tools a,b``: each name is a JSON schema (dict), a list of them, or a Python function."""
    tools: list[dict[str, Any]] = []
    for name in filter(None, (n.strip() for n in names.split(","))):
        if name not in namespace:
            raise ValueError(f"--tools: no variable named {name!r} in the namespace")
        value = namespace[name]
        values = value if isinstance(value, (list, tuple)) else [value]
        for item in values:
            if isinstance(item, dict) and item.get("type") == "function" and isinstance(item.get("function"), dict):
                tools.append(item)
            elif isinstance(item, dict) and "name" in item:
                tools.append({"type": "function", "function": item})
            elif callable(item):
                tools.append(function_tool(item))
            else:
                raise ValueError(
                    f"--tools: {name!r} is a {type(item).__name__}; give a function, or a dict like "
                    '{"name": ..., "description": ..., "parameters": {...}}'
                )
    return tools


def tool_functions(names: str, namespace: dict[str, Any]) -> dict[str, Callable[..., Any]]:
    """The Python functions among ``--tools`` names, by tool name (schemas have nothing to run)."""
    functions: dict[str, Callable[..., Any]] = {}
    for name in filter(None, (n.strip() for n in names.split(","))):
        value = namespace.get(name)
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if callable(item) and not isinstance(item, dict):
                functions[getattr(item, "__name__", name)] = item
    return functions


def run_tool(functions: dict[str, Callable[..., Any]], call: Any) -> dict[str, Any]:
    """Run one tool call (``--run-tools``) and return its ``tool`` message; a failure is the result.

    Each run is printed on one line, so the notebook shows what was executed.
    """
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
    shown = ", ".join(f"{k}={v!r}" for k, v in (arguments or {}).items())
    print(f"→ ran {call.name}({shown[:200]}) → {result[:200]}")
    return {"role": "tool", "tool_call_id": call.id, "content": result}
