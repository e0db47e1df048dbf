"""Python functions as tools: a function's signature and docstring to an OpenAI tool schema
(``schema(fn)``; ``tool_schemas`` for a list of functions and JSON tools: the one builder, in
``_core/tool_schemas.py``, which the clients use too, so that ``stream(tools=[fn])``,
``astream`` and ``run`` take functions), and running the tool calls a model made. One
implementation for every shell: the magic (``%%nito --tools/--run-tools``) and the chat widget
(``ChatWidget(tools=..., run_tools=True)``).

A failing tool is a result the model reads ("Error: ..."), never an exception in the caller; each
run is described by one line (``ToolRun.line``) that the shell shows: the magic prints it, the
widget puts it in its transcript (its worker thread never prints).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ._core.printable import printable
from ._core.status import Status
from ._core.tool_schemas import function_tool, tool_schemas

__all__ = [
    "MAX_TOOL_ROUNDS",
    "ToolRun",
    "execute_tool",
    "function_tool",
    "python_tools",
    "schema",
    "tool_functions",
    "tool_round",
    "tool_schemas",
    "tools_from",
]

#: Running tools: at most this many rounds of (tool calls, results) before the answer is left as is.
MAX_TOOL_ROUNDS = 5


# -- tools ---------------------------------------------------------------------------------------


def schema(function: Callable[..., Any], name: str | None = None) -> dict[str, Any]:
    """The OpenAI function tool of ``function``: its name (or ``name``), the first paragraph of its
    docstring as the description, its parameters' JSON schema from the signature and type hints
    (a default shown, those without one required). What ``stream(tools=[function])``,
    ``%%nito --tools`` and ``ChatWidget(tools=...)`` send for it."""
    return function_tool(function, name)


def _items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def python_tools(items: Iterable[Any]) -> dict[str, Callable[..., Any]]:
    """The Python functions among ``items``, by tool name (schemas have nothing to run)."""
    return {
        getattr(item, "__name__", repr(item)): item
        for item in items
        if callable(item) and not isinstance(item, dict)
    }


def _named(names: str, namespace: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        (name, namespace.get(name)) for name in filter(None, (n.strip() for n in names.split(",")))
    ]


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
    return ToolRun(
        str(call.name), arguments if isinstance(arguments, dict) else None, result, message
    )


def tool_round(
    stream: Any, functions: dict[str, Callable[..., Any]], rounds_done: int
) -> list[ToolRun] | None:
    """After a finished answer: run its tool calls if another round is due, else None.

    A round is due when there are functions to run, the answer ended normally (``done``: a stopped
    or broken answer's calls may be incomplete) with tool calls, and fewer than
    ``MAX_TOOL_ROUNDS`` rounds ran. The caller sends ``[stream.message, *(r.message for r in runs)]``
    back and shows each run's line.
    """
    if (
        not functions
        or stream.status != Status.DONE
        or not stream.tool_calls
        or rounds_done >= MAX_TOOL_ROUNDS
    ):
        return None
    return [execute_tool(functions, call) for call in stream.tool_calls]
