"""Python functions as tools of a request: a function's signature, type hints and docstring to an
OpenAI function tool, and a request's ``tools`` made of functions and JSON tools, mixed. No I/O.

The one schema builder of every way a request is made: ``stream(tools=[...])`` and the clients
(``_client/request_check.py``), runs, ``%%nito --tools`` and ``ChatWidget(tools=...)``; public as
``nito_nb.tools.tool_schemas`` and ``nito_nb.tools.function_tool``.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ["function_tool", "tool_schemas"]

_JSON_TYPES: dict[Any, str] = {
    int: "integer",
    float: "number",
    str: "string",
    bool: "boolean",
    list: "array",
    tuple: "array",
    set: "array",
    dict: "object",
    type(None): "null",
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


def tool_schemas(items: Iterable[Any], where: str | None = None) -> list[dict[str, Any]]:
    """The request's ``tools`` for ``items``: Python functions (schema from the signature and
    docstring), OpenAI tools (``{"type": "function", "function": {...}}``), bare function specs
    (``{"name": ..., "parameters": ...}``) and tools of other types (``{"type": "custom", ...}``),
    sent as they are. ``where`` names the item in the error message (a ValueError)."""
    tools: list[dict[str, Any]] = []
    for item in items:
        if (
            isinstance(item, dict)
            and item.get("type") == "function"
            and isinstance(item.get("function"), dict)
        ):
            tools.append(item)
        elif isinstance(item, dict) and "name" in item:
            tools.append({"type": "function", "function": item})
        elif callable(item):
            tools.append(function_tool(item))
        elif (
            isinstance(item, dict)
            and isinstance(item.get("type"), str)
            and item["type"] != "function"
        ):
            # a tool of another kind (OpenAI's custom and built-in tools): as it is
            tools.append(item)
        else:
            raise ValueError(
                f"{where or f'tools: {item!r:.60}'} is a {type(item).__name__}; give a function, or a dict like "
                '{"name": ..., "description": ..., "parameters": {...}}'
            )
    return tools
