"""What one request says in OpenTelemetry's words: a :class:`Call` per stream of a frame, with the
GenAI semantic conventions' span attributes, its chunk events and its metric values (docs/OTEL.md).

No OpenTelemetry here (``_emit.py`` makes the spans and records the metrics): this module reads a
frame, so that every source (Streams, a Run, a Store, a frame) is read one way, and every figure
is the one ``df.nito.metrics()`` and ``df.nito.usage()`` compute (docs/METRICS.md). What a frame
does not keep (the messages, the name of the exception that ended a stream) comes beside it, per
stream, from the source that has it (``Extra``).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .._client.endpoint import is_nito
from .._core.errors import ConfigurationError
from .._core.metrics import token_gaps
from .._core.status import Status
from .._core.units import to_ns

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Call", "Extra", "calls_of", "provider_of"]

OPERATION = "chat"  # the conventions' name for a chat completion (OpenAI's Chat API)

#: Hosts whose provider the conventions name (``gen_ai.provider.name``'s well-known values).
PROVIDERS = {
    "api.openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral_ai",
    "api.deepseek.com": "deepseek",
    "api.x.ai": "x_ai",
    "api.perplexity.ai": "perplexity",
    "api.cohere.com": "cohere",
    "api.cohere.ai": "cohere",
    "generativelanguage.googleapis.com": "gcp.gen_ai",
    "aiplatform.googleapis.com": "gcp.vertex_ai",
}

#: Request parameters the conventions name, and how each is read (a number, a count, a list of
#: strings). Nothing else of the body goes out: it could hold anything.
NUMBERS = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
}
COUNTS = {
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "seed": "gen_ai.request.seed",
}


@dataclass
class Extra:
    """What a frame does not keep of a stream, from the source that has it (None: unknown)."""

    messages: list[Any] | None = None
    exception: str | None = None  # the class name of the error that ended it
    message: str | None = None  # and its words


@dataclass
class Call:
    """One request as OpenTelemetry shows it: a span (name, wall-clock start and end in ns since
    the epoch, attributes, chunk events, error) and the values of the client metrics."""

    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    #: (wall-clock ns, event name, attributes): the response's headers, then each token-bearing chunk.
    events: list[tuple[int, str, dict[str, Any]]]
    error_type: str | None
    error_message: str | None
    #: The attributes every metric of this request carries (the conventions' list for metrics).
    metric_attributes: dict[str, Any]
    duration: float
    time_to_first_chunk: float | None
    chunk_gaps: list[float] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None


def provider_of(request: Mapping[str, Any]) -> str:
    """``gen_ai.provider.name`` of a request: the conventions' name for a host they know, ``nito``
    for Nito's gateway, ``nito_nb.sim`` for the simulator, else ``openai`` (the API spoken: OpenAI's
    chat completions, as OpenAI's own instrumentation reports any server its client talks to)."""
    model = request.get("model")
    if isinstance(model, str) and model.startswith("sim/"):
        return "nito_nb.sim"
    host = _host(request.get("base_url"))[0]
    if host is None:
        return "openai"
    if host in PROVIDERS:
        return PROVIDERS[host]
    if host.endswith(".openai.azure.com"):
        return "azure.ai.openai"
    if is_nito(str(request.get("base_url"))):
        return "nito"
    return "openai"


def _host(base_url: Any) -> tuple[str | None, int | None]:
    """(host, port) of a base URL: never its path, query or credentials."""
    if not isinstance(base_url, str) or not base_url:
        return None, None
    try:
        parts = urlsplit(base_url)
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:
        return None, None
    return parts.hostname, port


def calls_of(
    df: pd.DataFrame, extras: Mapping[str, Extra] | None = None, *, content: bool = False
) -> list[Call]:
    """One :class:`Call` per stream of ``df`` (a frame with its ``df.attrs["nito"]``)."""
    attrs = df.attrs.get("nito") or {}
    if df.empty:
        return []
    metrics = df.nito.metrics()
    usage = df.nito.usage()
    texts = df.nito.text() if content else None
    reasoning = df.nito.reasoning() if content else None
    tool_calls = df.nito.tool_calls() if content else None
    per = _per_stream(df)
    calls = []
    usages = usage.to_dict("index")
    for label, row in metrics.to_dict("index").items():
        described = attrs.get(label)
        if described is None or not described.get("t0_wall"):
            raise ConfigurationError(
                f"stream {label!r} has no start time: its frame lost df.attrs['nito'] (pandas drops it in some "
                "operations); export the Streams, the Run or the Store, or a frame made by nito_nb.frame()"
            )
        extra = (extras or {}).get(label) or Extra()
        calls.append(
            _call(
                label,
                row,
                usages[label],
                described,
                per.get(label, {}),
                extra,
                _content(label, extra, texts, reasoning, tool_calls, row) if content else None,
            )
        )
    return calls


def _per_stream(df: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """What the metrics table does not say of each stream: its token-bearing chunks' (time, seq),
    the first chunk's ``id`` and ``model``, the last error code. Rows are in stream order
    (docs/METRICS.md), so each stream is one slice of the columns."""
    import numpy as np

    labels = df["stream"].astype(object).to_numpy()
    if len(labels) and np.count_nonzero(labels[1:] != labels[:-1]) + 1 != len(set(labels)):
        # A frame put together by hand (a concat, a sort by time): each stream's rows together,
        # in their order.
        df = df.iloc[np.argsort(df["stream"].cat.codes.to_numpy(), kind="stable")]
        labels = df["stream"].astype(object).to_numpy()
    t = df["t"].to_numpy(dtype=float, na_value=math.nan)
    seq = df["seq"].to_numpy()
    token = (
        df["token"].to_numpy(dtype=bool)
        & ~df["ignored"].to_numpy(dtype=bool)
        & (df["part"].to_numpy() == 0)
    )
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    ends = np.r_[starts[1:], len(labels)]
    chunks = df[df["kind"] == "chunk"]
    # Plain dicts: a lookup in a categorical index of more than 127 streams overflows in pandas.
    first = chunks.groupby("stream", observed=True, sort=False)[["id", "model"]].first()
    first_of = dict(zip(first.index.astype(object), first.to_dict("records"), strict=True))
    codes = df["error_code"].dropna()
    last = codes.groupby(df.loc[codes.index, "stream"], observed=True, sort=False).last()
    last_code = dict(zip(last.index.astype(object), last.astype(object), strict=True))
    per: dict[str, dict[str, Any]] = {}
    for start, end in zip(starts, ends, strict=True):
        label = labels[start]
        rows = np.flatnonzero(token[start:end]) + start
        one = per[label] = {
            "tokens": list(zip(t[rows].tolist(), seq[rows].tolist(), strict=True)),
            "id": None,
            "model": None,
            "error_code": _value(last_code.get(label)),
        }
        seen = first_of.get(label)
        if seen is not None:
            one["id"] = _value(seen["id"])
            model = _value(seen["model"])
            one["model"] = str(model) if model is not None else None
    return per


def _value(x: Any) -> Any:
    """A pandas cell as a plain value: NA and NaN as None."""
    if x is None:
        return None
    try:
        if x != x:  # NaN
            return None
    except (TypeError, ValueError):  # pd.NA
        return None
    if hasattr(x, "item"):
        return x.item()
    return x


def _call(
    label: str,
    row: Any,
    usage: Any,
    described: Mapping[str, Any],
    seen: Mapping[str, Any],
    extra: Extra,
    content: dict[str, Any] | None,
) -> Call:
    request = described.get("request") or {}
    params = request.get("params") or {}
    model = request.get("model")
    t0 = _dt.datetime.fromisoformat(described["t0_wall"])
    if t0.tzinfo is None:
        t0 = t0.replace(tzinfo=_dt.timezone.utc)
    # Wall clock of the send, then every arrival as its distance from the send on the monotonic
    # clock (the frame's ``t``): a wall clock read at each arrival would jump with NTP.
    start_ns = round(t0.timestamp() * 1e6) * 1000
    e2e = _value(row["e2e"])
    ttfb = _value(row["ttfb"])
    duration = e2e if e2e is not None else ttfb if ttfb is not None else 0.0
    end_ns = start_ns + to_ns(duration)

    provider = provider_of(request)
    host, port = _host(request.get("base_url"))
    response_model = seen.get("model")
    common: dict[str, Any] = {"gen_ai.operation.name": OPERATION, "gen_ai.provider.name": provider}
    if isinstance(model, str):
        common["gen_ai.request.model"] = model
    if response_model:
        common["gen_ai.response.model"] = response_model
    if host:
        common["server.address"] = host
        if port:
            common["server.port"] = port

    attributes = dict(common)
    attributes["gen_ai.request.stream"] = True  # nito_nb reads streams only
    attributes.update(_parameters(params))
    if seen.get("id"):
        attributes["gen_ai.response.id"] = str(seen["id"])
    finish = _value(row["finish_reason"])
    if finish is not None:
        attributes["gen_ai.response.finish_reasons"] = [str(finish)]
    ttft = _value(row["ttft"])
    if ttft is not None:
        attributes["gen_ai.response.time_to_first_chunk"] = float(ttft)
    tokens = {
        "gen_ai.usage.input_tokens": _value(usage["prompt_tokens"]),
        "gen_ai.usage.output_tokens": _value(usage["completion_tokens"]),
        "gen_ai.usage.reasoning.output_tokens": _value(usage["reasoning_tokens"]),
        "gen_ai.usage.cache_read.input_tokens": _value(usage["cached_tokens"]),
    }
    attributes.update({k: int(v) for k, v in tokens.items() if v is not None})
    # nito_nb's own figures, under its own name (docs/METRICS.md says what each is).
    status = str(_value(row["status"]) or "")
    attributes["nito.status"] = status
    for name in ("ttfb", "connect", "itl", "itl_p99", "tpot", "output_tps"):
        value = _value(row.get(name))
        if value is not None:
            attributes[f"nito.{name}"] = float(value)
    for name in ("n_token_chunks", "attempts", "http_status"):
        value = _value(row[name])
        if value is not None:
            attributes[f"nito.{name}"] = int(value)
    cost = _value(usage["cost"])
    if cost is not None:
        attributes["nito.cost"] = float(cost)
    if content:
        attributes.update(content)
        tools = _tool_definitions(params.get("tools"))
        if tools:
            attributes["gen_ai.tool.definitions"] = json.dumps(
                tools, ensure_ascii=False, default=str
            )

    error_type, error_message = _error(status, row, seen.get("error_code"), extra)
    if error_type is not None:
        attributes["error.type"] = error_type

    events: list[tuple[int, str, dict[str, Any]]] = []
    if ttfb is not None:
        http = _value(row["http_status"])
        events.append(
            (
                start_ns + to_ns(ttfb),
                "nito.response",
                {} if http is None else {"nito.http_status": int(http)},
            )
        )
    token_times = seen.get("tokens") or []
    if token_times:
        # Every chunk's arrival in one attribute as well: an SDK keeps at most its span limit of
        # events (128 by default, the last ones), and a long answer has thousands of chunks.
        attributes["nito.chunk.times"] = [round(t, 9) for t, _ in token_times]
    for index, (t, seq) in enumerate(token_times):
        if not math.isnan(t):
            events.append(
                (
                    start_ns + to_ns(t),
                    "nito.chunk",
                    {"nito.chunk.index": index, "nito.chunk.seq": seq},
                )
            )
    # the K - 1 gaps of itl_p50...itl_max (docs/METRICS.md)
    gaps = token_gaps([t for t, _ in token_times])
    return Call(
        name=f"{OPERATION} {model}" if isinstance(model, str) and model else OPERATION,
        start_ns=start_ns,
        end_ns=end_ns,
        attributes=attributes,
        events=events,
        error_type=error_type,
        error_message=error_message,
        metric_attributes=common,
        duration=float(duration),
        time_to_first_chunk=None if ttft is None else float(ttft),
        chunk_gaps=[g for g in gaps if not math.isnan(g)],
        input_tokens=None
        if tokens["gen_ai.usage.input_tokens"] is None
        else int(tokens["gen_ai.usage.input_tokens"]),
        output_tokens=None
        if tokens["gen_ai.usage.output_tokens"] is None
        else int(tokens["gen_ai.usage.output_tokens"]),
    )


def _parameters(params: Mapping[str, Any]) -> dict[str, Any]:
    """The request parameters the conventions name, each of the type they say."""
    out: dict[str, Any] = {}
    for key, name in NUMBERS.items():
        value = params.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
    for key, name in COUNTS.items():
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            out[name] = value
    n = params.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and n != 1:
        out["gen_ai.request.choice.count"] = n
    stop = params.get("stop")
    if isinstance(stop, str):
        out["gen_ai.request.stop_sequences"] = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        out["gen_ai.request.stop_sequences"] = list(stop)
    response_format = params.get("response_format")
    if isinstance(response_format, Mapping):
        kind = response_format.get("type")
        if kind in ("json_object", "json_schema"):
            out["gen_ai.output.type"] = "json"
        elif kind == "text":
            out["gen_ai.output.type"] = "text"
    return out


def _error(status: str, row: Any, error_code: Any, extra: Extra) -> tuple[str | None, str | None]:
    """(``error.type``, the span status's description) of a request that ended in an error; a
    stopped one (the caller's choice) is none. The type is the HTTP status of a refused request
    (the conventions' own example: ``500``), the error code of a mid-stream error chunk, else the
    name of nito_nb's exception (``ConnectionFailed``, ``StreamTruncatedError``...)."""
    if status not in (Status.FAILED, Status.ERROR, Status.TRUNCATED):
        return None, None
    http = _value(row["http_status"])
    code = None
    if status == Status.FAILED and http is not None and int(http) >= 300:
        code = str(int(http))
    elif status == "error":
        code = error_code
    fallback = {
        "failed": "NitoError",
        "error": "MidStreamError",
        "truncated": "StreamTruncatedError",
    }[status]
    error_type = str(code) if code is not None else extra.exception or fallback
    message = _value(row["error"]) or extra.message or status
    return error_type, " ".join(str(message).split())  # one line, as nito_nb shows an error


def _content(
    label: str, extra: Extra, texts: Any, reasoning: Any, tool_calls: Any, row: Any
) -> dict[str, Any]:
    """The opt-in attributes (``content=True``): the conversation sent and the answer, in the
    conventions' message shape, as JSON text. Model text is data here: a string, never markup."""
    out: dict[str, Any] = {}
    if extra.messages is not None:
        out["gen_ai.input.messages"] = json.dumps(
            [_message(m) for m in extra.messages], ensure_ascii=False
        )
    parts: list[dict[str, Any]] = []
    said = reasoning.get(label, "") if reasoning is not None else ""
    if said:
        parts.append({"type": "reasoning", "content": said})
    text = texts.get(label, "") if texts is not None else ""
    if text:
        parts.append({"type": "text", "content": text})
    if tool_calls is not None and len(tool_calls):
        for _, call in tool_calls[tool_calls["stream"] == label].iterrows():
            parts.append(
                {
                    "type": "tool_call",
                    "id": _value(call["id"]),
                    "name": _value(call["name"]),
                    "arguments": call["parsed"] if call["valid_json"] else call["arguments"],
                }
            )
    answer: dict[str, Any] = {"role": "assistant", "parts": parts}
    finish = _value(row["finish_reason"])
    if finish is not None:
        answer["finish_reason"] = str(finish)
    out["gen_ai.output.messages"] = json.dumps([answer], ensure_ascii=False, default=str)
    return out


def _tool_definitions(tools: Any) -> list[dict[str, Any]]:
    """The request's ``tools`` in the conventions' shape: a type, a name, and for a function its
    description and JSON schema (OpenAI nests them under ``function``)."""
    out = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, Mapping):
            continue
        inner = (
            tool.get("function")
            if isinstance(tool.get("function"), Mapping)
            else tool.get("custom")
        )
        inner = inner if isinstance(inner, Mapping) else tool
        definition = {"type": str(tool.get("type") or "function"), "name": inner.get("name")}
        for key in ("description", "parameters"):
            if inner.get(key) is not None:
                definition[key] = inner[key]
        out.append(definition)
    return out


def _message(message: Any) -> dict[str, Any]:
    """An OpenAI chat message in the conventions' shape: a role and its parts."""
    if not isinstance(message, Mapping):
        return {"role": "user", "parts": [{"type": "text", "content": str(message)}]}
    role = str(message.get("role") or "user")
    parts: list[dict[str, Any]] = []
    body = message.get("content")
    if role == "tool":
        parts.append(
            {"type": "tool_call_response", "id": message.get("tool_call_id"), "response": body}
        )
    elif isinstance(body, str):
        parts.append({"type": "text", "content": body})
    elif isinstance(body, list):
        for piece in body:
            if isinstance(piece, Mapping) and piece.get("type") == "text":
                parts.append({"type": "text", "content": piece.get("text")})
            elif isinstance(piece, Mapping):
                # an image or a file: its kind only
                parts.append({"type": str(piece.get("type") or "unknown")})
    for call in message.get("tool_calls") or []:
        if isinstance(call, Mapping):
            function = call.get("function") or {}
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": function.get("name"),
                    "arguments": function.get("arguments"),
                }
            )
    return {"role": role, "parts": parts}
