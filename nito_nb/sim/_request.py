"""A chat request as the scenarios see it: validated like a gateway would, a 400 otherwise."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._core.strict_schema import strict_problem
from ._attachments import check_parts
from ._capacity import SERVER_MODEL
from ._logprobs import MAX_TOP_LOGPROBS
from ._options import OptionError, SimOptions, parse_options
from ._reply import ErrorReply, dumps, error_reply
from ._schema import SchemaError, check, instance

MAX_CHOICES = 8  # the most choices (`n`) one request may ask for
_SCHEMA_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # OpenAI's rule for json_schema.name


@dataclass(frozen=True)
class JsonFormat:
    """A `response_format` that asks for JSON: `json_object` (no schema), or `json_schema` with
    its name and schema (a JSON schema as an object, or `true`)."""

    schema: Any = None
    name: str | None = None


@dataclass(frozen=True)
class SimRequest:
    """The parts of a chat request that the scenarios use."""

    model: str
    messages: list[dict[str, Any]]
    stream: bool = True
    include_usage: bool = False
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = None
    reasoning_exclude: bool = False
    parallel_tool_calls: bool = True
    n: int = 1  # choices to generate, streamed interleaved
    options: SimOptions = field(default_factory=SimOptions)
    response_format: JsonFormat | None = None  # None: text
    top_logprobs: int | None = (
        None  # logprobs: true asked for them (0: no alternatives); None: not asked
    )


def parse_request(body: Any, env: Mapping[str, str] | None = None) -> SimRequest | ErrorReply:
    """Validate a decoded JSON body like a gateway would: a 400 with a JSON error when it is wrong."""

    def bad(message: str) -> ErrorReply:
        return error_reply(400, message)

    if not isinstance(body, dict):
        return bad("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return bad("`model` is required: a model name such as 'sim/chat'.")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return bad("`messages` is required: a non-empty list of {role, content} objects.")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return bad(f"messages[{i}] must be an object with a string `role`.")
    wrong_part = check_parts(messages)
    if wrong_part:
        return bad(wrong_part)
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        return bad("`stream_options` must be an object.")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        return bad(f"`max_tokens` must be a positive integer, got {max_tokens!r}.")
    stop = body.get("stop")
    if stop is None:
        stops: tuple[str, ...] = ()
    elif isinstance(stop, str):
        stops = (stop,)
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        stops = tuple(stop)
    else:
        return bad("`stop` must be a string or a list of strings.")
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        return bad("`tools` must be a list of function tool objects.")
    reasoning = body.get("reasoning")
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        return bad(f"`parallel_tool_calls` must be true or false, got {parallel!r}.")
    n = body.get("n", 1)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
        return bad(f"`n` must be an integer from 1 to {MAX_CHOICES}, got {n!r}.")
    try:
        options = parse_options(
            body.get("sim"), env or {}, body.get("seed"), capped=model == SERVER_MODEL
        )
    except OptionError as exc:
        return bad(f"{exc}.")  # a sentence of its own: the client's hint follows it
    if options.capacity is not None and model == "sim/replay":
        return bad(
            "sim/replay sends a recording at its recorded pace: sim.capacity does not apply to it."
        )
    logprobs, top_logprobs = body.get("logprobs", False), body.get("top_logprobs")
    if logprobs is not None and not isinstance(logprobs, bool):
        return bad(f"`logprobs` must be true or false, got {logprobs!r}.")
    if top_logprobs is not None and (
        isinstance(top_logprobs, bool)
        or not isinstance(top_logprobs, int)
        or not 0 <= top_logprobs <= MAX_TOP_LOGPROBS
    ):
        return bad(
            f"`top_logprobs` must be an integer from 0 to {MAX_TOP_LOGPROBS}, got {top_logprobs!r}."
        )
    if top_logprobs is not None and not logprobs:
        return bad("`top_logprobs` needs `logprobs: true`.")
    response_format = parse_response_format(body.get("response_format"), options.seed, n)
    if isinstance(response_format, str):
        return bad(response_format)
    return SimRequest(
        model=model,
        messages=messages,
        stream=body.get("stream") is True,
        include_usage=stream_options.get("include_usage") is True,
        max_tokens=max_tokens,
        stop=tuple(s for s in stops if s),
        tools=tools,
        tool_choice=body.get("tool_choice"),
        reasoning_exclude=isinstance(reasoning, dict) and reasoning.get("exclude") is True,
        parallel_tool_calls=parallel,
        n=n,
        options=options,
        response_format=response_format,
        top_logprobs=(top_logprobs or 0) if logprobs else None,
    )


def parse_response_format(value: Any, seed: int, n: int = 1) -> JsonFormat | str | None:
    """The request's `response_format`, checked like a gateway: a JsonFormat, None for text, or
    what is wrong with it (a sentence). A schema is tried once for each choice's seed, so that
    a value the simulator cannot make is a 400 now rather than a stream cut later."""
    if value is None:
        return None
    example = '{"type": "json_schema", "json_schema": {"name": "answer", "schema": {...}}}'
    if not isinstance(value, dict):
        return f"`response_format` must be an object such as {example}, got {value!r}."
    kind = value.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return JsonFormat()
    if kind != "json_schema":
        return (
            f'`response_format.type` must be "text", "json_object" or "json_schema", got {kind!r}.'
        )
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        return f"`response_format.json_schema` is required with type json_schema: {example}."
    name = spec.get("name")
    if not isinstance(name, str) or not _SCHEMA_NAME.fullmatch(name):
        return (
            f"`response_format.json_schema.name` must be 1 to 64 letters, digits, _ or -, "
            f"got {name!r}."
        )
    if not isinstance(spec.get("strict", False), bool):
        return (
            f"`response_format.json_schema.strict` must be true or false, got {spec['strict']!r}."
        )
    schema = spec.get("schema")
    if schema is None:
        return JsonFormat(name=name)  # any JSON object, as json_object
    if spec.get("strict") is True:  # what OpenAI's strict mode refuses, refused with its words
        problem = strict_problem(schema)
        if problem:
            return f"Invalid schema for response_format {name!r}: {problem}"
    try:
        check(schema)
        for index in range(n):
            instance(schema, random.Random(seed + index))
    except SchemaError as exc:
        return f"`response_format.json_schema.schema` cannot be answered: {exc}."
    return JsonFormat(schema, name)


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a message: a string content, or the text parts of a list content."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def request_digest(request: SimRequest) -> str:
    """What identifies a request for the faults: its model, messages and seed."""
    return hashlib.sha256(
        dumps([request.model, request.messages, request.options.seed])
    ).hexdigest()
