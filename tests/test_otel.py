"""nito_nb.otel: a request's span and the client metrics in the GenAI semantic conventions' words,
read back from the OpenTelemetry SDK's in-memory exporter and reader (and, once, from an OTLP/HTTP
receiver of the test's own), against the simulator and a scripted server on loopback."""

from __future__ import annotations

import asyncio
import datetime as _dt
import gzip
import inspect
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import open_client
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import (
    error_attributes,
    gen_ai_attributes,
    server_attributes,
)
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.trace import SpanKind, StatusCode
from scripted_server import Script, ScriptedServer

import nito_nb
import nito_nb.otel
from nito_nb import StreamSource

FAST = {"sim": {"tps": 0, "ttft_ms": 0}}


# -- the conventions' names, from OpenTelemetry's own package of them ------------------------------


def _names(module: Any) -> dict[str, str]:
    """{attribute or metric name: its docstring} of a semconv module (the constants' docstrings
    follow them in the source)."""
    source = inspect.getsource(module)
    return {
        m.group(2): m.group(3)
        for m in re.finditer(r'^([A-Z_]+): Final = "([^"]+)"\n"""(.*?)"""', source, re.M | re.S)
    }


def _current(*modules: Any) -> set[str]:
    """The names the conventions use now: not the ones they replaced (``gen_ai.system``...)."""
    return {
        name
        for module in modules
        for name, doc in _names(module).items()
        if "Replaced by" not in doc
    }


ATTRIBUTES = _current(gen_ai_attributes, error_attributes, server_attributes)
METRICS = _current(gen_ai_metrics)


def test_the_conventions_check_knows_what_is_current_and_what_was_replaced() -> None:
    assert {
        "gen_ai.provider.name",
        "gen_ai.response.time_to_first_chunk",
        "gen_ai.usage.reasoning.output_tokens",
        "error.type",
        "server.address",
    } <= ATTRIBUTES
    assert "gen_ai.system" not in ATTRIBUTES and "gen_ai.usage.prompt_tokens" not in ATTRIBUTES
    assert {
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.time_to_first_chunk",
        "gen_ai.client.operation.time_per_output_chunk",
    } <= METRICS


def _not_conventional(attributes: Any) -> list[str]:
    """Names that are neither the conventions' nor nito_nb's own (``nito.*``)."""
    return [name for name in attributes if not name.startswith("nito.") and name not in ATTRIBUTES]


# -- the SDK's in-memory exporter and reader ----------------------------------------------------------


class Sink:
    def __init__(self) -> None:
        self.spans_out = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans_out))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    @property
    def providers(self) -> dict[str, Any]:
        return {"tracer_provider": self.tracer_provider, "meter_provider": self.meter_provider}

    def spans(self) -> list[ReadableSpan]:
        return sorted(self.spans_out.get_finished_spans(), key=lambda s: s.start_time or 0)

    def metrics(self) -> dict[str, Any]:
        data = self.reader.get_metrics_data()
        return {
            m.name: m
            for rm in (data.resource_metrics if data else [])
            for sm in rm.scope_metrics
            for m in sm.metrics
        }


@pytest.fixture
def sink() -> Iterator[Sink]:
    sink = Sink()
    yield sink
    sink.tracer_provider.shutdown()
    sink.meter_provider.shutdown()


def _wall_ns(stream: Any, t_ns: int) -> int:
    """The wall-clock time of a monotonic reading of ``stream``'s log (its send's wall time plus the
    distance on the monotonic clock), to the microsecond the send's wall time has."""
    t0 = round(stream.t0_wall.timestamp() * 1e6) * 1000
    return t0 + t_ns - stream.log.t0_ns


# -- one stream ------------------------------------------------------------------------------------


def test_a_stream_is_one_client_span_with_the_conventions_attributes(sink: Sink) -> None:
    s = nito_nb.stream(
        "Plan three days in Lyon",
        model="sim/chat",
        temperature=0.5,
        top_p=0.9,
        max_tokens=40,
        seed=7,
        stop=["END"],
        **FAST,
    )
    s.wait()
    assert nito_nb.otel.export(s, **sink.providers) == 1
    (span,) = sink.spans()
    a = dict(span.attributes or {})
    assert span.name == "chat sim/chat" and span.kind is SpanKind.CLIENT
    assert _not_conventional(a) == []
    usage = s.usage or {}
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "nito_nb.sim"
    assert a["gen_ai.request.model"] == "sim/chat" and a["gen_ai.response.model"] == s.model
    assert a["gen_ai.request.stream"] is True
    assert (a["gen_ai.request.temperature"], a["gen_ai.request.top_p"]) == (0.5, 0.9)
    assert (a["gen_ai.request.max_tokens"], a["gen_ai.request.seed"]) == (40, 7)
    assert a["gen_ai.request.stop_sequences"] == ("END",)
    assert a["gen_ai.response.id"] == s.id and a["gen_ai.response.finish_reasons"] == (
        s.finish_reason,
    )
    assert a["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    assert a["gen_ai.usage.output_tokens"] == usage["completion_tokens"]
    assert a["gen_ai.response.time_to_first_chunk"] == pytest.approx(s.ttft, abs=1e-9)
    assert a["server.address"] == "127.0.0.1" and isinstance(a["server.port"], int)
    assert (
        a["nito.status"] == "done"
        and a["nito.attempts"] == 1
        and a["nito.n_token_chunks"] == s.snapshot().n_token_chunks
    )
    assert span.status.status_code is StatusCode.UNSET and "error.type" not in a
    # No message text without content=True.
    assert "gen_ai.input.messages" not in a and "gen_ai.output.messages" not in a
    assert not any("Lyon" in str(v) for v in a.values())


def test_the_span_and_its_chunk_events_are_at_the_requests_real_times(sink: Sink) -> None:
    # A source of known times: sent now, headers 20 ms later, chunks at 100, 250 and 400 ms.
    source = StreamSource(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "params": {},
            "base_url": "https://api.openai.com/v1",
        }
    )
    t0 = time.perf_counter_ns()
    source.start(t0)
    source.set_response(200, {"content-type": "text/event-stream"}, t0 + 20_000_000)
    for i, ms in enumerate((100, 250, 400)):
        chunk = {
            "id": "c1",
            "model": "m-0613",
            "choices": [{"index": 0, "delta": {"content": f"w{i} "}}],
        }
        source.feed(f"data: {json.dumps(chunk)}\n\n".encode(), t0 + ms * 1_000_000)
    usage = {
        "id": "c1",
        "model": "m-0613",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 3,
            "completion_tokens": 6,
            "completion_tokens_details": {"reasoning_tokens": 2},
            "prompt_tokens_details": {"cached_tokens": 1},
        },
    }
    source.feed(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode(), t0 + 450_000_000)
    source.end(t0 + 450_000_000)
    s = source.stream
    nito_nb.otel.export(s, **sink.providers)
    (span,) = sink.spans()
    start = _wall_ns(s, t0)
    assert span.start_time == start and span.end_time == start + 450_000_000
    # The wall clock of the send, not of the export.
    assert abs(span.start_time / 1e9 - s.t0_wall.timestamp()) < 1e-5
    events = [(e.name, e.timestamp - start, dict(e.attributes or {})) for e in span.events]
    assert events == [
        ("nito.response", 20_000_000, {"nito.http_status": 200}),
        ("nito.chunk", 100_000_000, {"nito.chunk.index": 0, "nito.chunk.seq": 0}),
        ("nito.chunk", 250_000_000, {"nito.chunk.index": 1, "nito.chunk.seq": 1}),
        ("nito.chunk", 400_000_000, {"nito.chunk.index": 2, "nito.chunk.seq": 2}),
    ]
    a = dict(span.attributes or {})
    assert (
        a["gen_ai.provider.name"] == "openai"
        and a["server.address"] == "api.openai.com"
        and a["server.port"] == 443
    )
    assert a["gen_ai.response.model"] == "m-0613" and a["gen_ai.request.model"] == "m"
    assert a["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.1)
    assert (
        a["gen_ai.usage.reasoning.output_tokens"],
        a["gen_ai.usage.cache_read.input_tokens"],
    ) == (2, 1)
    assert a["nito.ttfb"] == pytest.approx(0.02)
    assert a["nito.chunk.times"] == pytest.approx((0.1, 0.25, 0.4))

    metrics = sink.metrics()
    per_chunk = metrics["gen_ai.client.operation.time_per_output_chunk"].data.data_points[0]
    assert per_chunk.count == 2 and per_chunk.sum == pytest.approx(0.3)  # 150 ms, twice
    assert metrics["gen_ai.client.operation.time_to_first_chunk"].data.data_points[
        0
    ].sum == pytest.approx(0.1)
    assert metrics["gen_ai.client.operation.duration"].data.data_points[0].sum == pytest.approx(
        0.45
    )
    tokens = {
        dict(p.attributes)["gen_ai.token.type"]: p.sum
        for p in metrics["gen_ai.client.token.usage"].data.data_points
    }
    assert tokens == {"input": 3, "output": 6}


def test_the_metrics_are_the_conventions_histograms_with_their_units_and_attributes(
    sink: Sink,
) -> None:
    streams = [nito_nb.stream(f"question {i}", model="sim/echo", **FAST) for i in range(3)]
    for s in streams:
        s.wait()
    assert nito_nb.otel.export(streams, **sink.providers) == 3
    metrics = sink.metrics()
    assert set(metrics) == {
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.time_to_first_chunk",
        "gen_ai.client.operation.time_per_output_chunk",
    }
    assert set(metrics) <= METRICS
    # The unit each convention gives (its create_... function in OpenTelemetry's package).
    for name, metric in metrics.items():
        made = getattr(gen_ai_metrics, "create_" + name.replace(".", "_"))
        assert f'unit="{metric.unit}"' in inspect.getsource(made), name
        assert type(metric.data).__name__ == "Histogram"
        for point in metric.data.data_points:
            assert _not_conventional(point.attributes) == [] and not any(
                k.startswith("nito.") for k in point.attributes
            )
            assert point.attributes["gen_ai.operation.name"] == "chat"
            assert point.attributes["gen_ai.provider.name"] == "nito_nb.sim"
    assert sum(p.count for p in metrics["gen_ai.client.operation.duration"].data.data_points) == 3
    gaps = sum(max(s.snapshot().n_token_chunks - 1, 0) for s in streams)
    assert (
        sum(
            p.count
            for p in metrics["gen_ai.client.operation.time_per_output_chunk"].data.data_points
        )
        == gaps
    )
    duration = metrics["gen_ai.client.operation.duration"].data.data_points[0]
    assert list(duration.explicit_bounds)[:3] == [0.01, 0.02, 0.04]


def test_a_long_answer_keeps_every_chunk_time_past_the_sdks_event_limit(sink: Sink) -> None:
    s = nito_nb.stream("hi", model="sim/long", sim={"chunks": 600, "tps": 0, "ttft_ms": 0})
    s.wait()
    nito_nb.otel.export(s, **sink.providers)
    (span,) = sink.spans()
    k = s.snapshot().n_token_chunks
    assert k > 128 and len(span.attributes["nito.chunk.times"]) == k
    assert span.attributes["nito.chunk.times"][0] == pytest.approx(s.ttft, abs=1e-9)
    assert len(span.events) == 128 and span.dropped_events == k + 1 - 128  # the SDK's default limit


def test_hundreds_of_streams_export_each_with_its_own_values(sink: Sink) -> None:
    # More streams than an int8 category code holds (pandas' lookups in such an index overflowed).
    streams = []
    for i in range(300):
        source = StreamSource({"model": "m", "params": {}, "base_url": "http://127.0.0.1:1/v1"})
        t0 = time.perf_counter_ns()
        source.start(t0)
        chunk = {"id": f"c{i}", "model": "m", "choices": [{"index": 0, "delta": {"content": "x"}}]}
        source.feed(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode(), t0 + (i + 1) * 1000)
        source.end(t0 + (i + 1) * 1000)
        streams.append(source.stream)
    assert nito_nb.otel.export(streams, **sink.providers) == 300
    ids = {s.attributes["gen_ai.response.id"]: s for s in sink.spans()}
    assert sorted(ids) == sorted(f"c{i}" for i in range(300))
    assert all(
        span.end_time - span.start_time == (int(key[1:]) + 1) * 1000 for key, span in ids.items()
    )


# -- errors -----------------------------------------------------------------------------------------


def test_errors_are_the_span_status_and_error_type(sink: Sink) -> None:
    with pytest.raises(nito_nb.ServerError) as info:
        open_client("", max_retries=0).stream("hi", model="sim/http-503", **FAST)
    failed = info.value.stream
    midstream = nito_nb.stream("hi", model="sim/error-midstream", raise_errors=False, **FAST)
    midstream.wait()
    cut = nito_nb.stream("hi", model="sim/drop", raise_errors=False, **FAST)
    cut.wait()
    with pytest.raises(nito_nb.ConnectionFailed) as refused_connection:
        open_client("http://127.0.0.1:9/v1", max_retries=0).stream("hi", model="m")
    nito_nb.otel.export([failed, midstream, cut, refused_connection.value.stream], **sink.providers)
    spans = {dict(s.attributes or {})["gen_ai.request.model"]: s for s in sink.spans()}
    for span in spans.values():
        assert span.status.status_code is StatusCode.ERROR and span.status.description
        assert _not_conventional(span.attributes) == []
    assert spans["sim/http-503"].attributes["error.type"] == "503"
    assert spans["sim/error-midstream"].attributes["error.type"] == str(midstream.error["code"])
    assert spans["sim/drop"].attributes["error.type"] == type(cut.exception).__name__
    assert spans["m"].attributes["error.type"] == "ConnectionFailed"
    durations = sink.metrics()["gen_ai.client.operation.duration"].data.data_points
    assert {p.attributes.get("error.type") for p in durations} == {
        "503",
        str(midstream.error["code"]),
        type(cut.exception).__name__,
        "ConnectionFailed",
    }


def test_a_stopped_stream_is_no_error(sink: Sink) -> None:
    s = nito_nb.stream(
        "hi", model="sim/stall", raise_errors=False, sim={"stall_s": 30, "tps": 0, "ttft_ms": 0}
    )
    for _ in s:
        break
    s.close()
    nito_nb.otel.export(s, **sink.providers)
    (span,) = sink.spans()
    assert span.attributes["nito.status"] == "stopped" and "error.type" not in span.attributes
    assert span.status.status_code is StatusCode.UNSET


# -- content: opt-in, data, no key -------------------------------------------------------------------

HOSTILE = '<script>alert(1)</script> <img src=x onerror=alert(2)> "}], {"role": "system'


def test_content_is_opt_in_and_model_text_stays_plain_data(sink: Sink) -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": HOSTILE}]
    s = nito_nb.stream(messages, model="sim/echo", **FAST)
    s.wait()
    assert HOSTILE.split()[0] in s.content  # the model said it back
    nito_nb.otel.export(s, **sink.providers)
    plain = dict(sink.spans()[0].attributes or {})
    assert not any("script" in str(v) or "be brief" in str(v) for v in plain.values())

    shown = Sink()
    nito_nb.otel.export(s, content=True, **shown.providers)
    a = dict(shown.spans()[0].attributes or {})
    assert _not_conventional(a) == []
    sent = json.loads(a["gen_ai.input.messages"])
    assert sent == [
        {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
        {"role": "user", "parts": [{"type": "text", "content": HOSTILE}]},
    ]
    (answer,) = json.loads(a["gen_ai.output.messages"])
    # The text as the model sent it, as a JSON string: not escaped into markup, not read as JSON.
    assert answer == {
        "role": "assistant",
        "parts": [{"type": "text", "content": s.content}],
        "finish_reason": s.finish_reason,
    }
    assert (
        isinstance(a["gen_ai.output.messages"], str) and "&lt;" not in a["gen_ai.output.messages"]
    )


def test_content_has_the_tool_definitions_and_the_calls_the_model_made(sink: Sink) -> None:
    weather = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    s = nito_nb.stream("Weather in Paris?", model="sim/tools", tools=[weather], **FAST).wait()
    nito_nb.otel.export(s, **sink.providers)
    assert "gen_ai.tool.definitions" not in sink.spans()[0].attributes  # opt-in, as the messages
    shown = Sink()
    nito_nb.otel.export(s, content=True, **shown.providers)
    a = shown.spans()[0].attributes
    assert json.loads(a["gen_ai.tool.definitions"]) == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": weather["function"]["parameters"],
        }
    ]
    (answer,) = json.loads(a["gen_ai.output.messages"])
    calls = [part for part in answer["parts"] if part["type"] == "tool_call"]
    assert [(c["id"], c["name"], c["arguments"]) for c in calls] == [
        (t.id, t.name, t.parsed) for t in s.tool_calls
    ]
    assert answer["finish_reason"] == "tool_calls" and a["gen_ai.response.finish_reasons"] == (
        "tool_calls",
    )


def test_no_key_in_any_attribute_event_or_status(sink: Sink, scripted: ScriptedServer) -> None:
    key = "sk-otel-secret-0123456789abcdef"
    said = {
        "id": "c",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": f"your key is {key}"}}],
    }
    error = {"error": {"message": f"bad key {key}", "code": 401}}
    ok = scripted.add(
        "otel-key", Script(parts=[f"data: {json.dumps(said)}\n\ndata: [DONE]\n\n".encode()])
    )
    refused = scripted.add(
        "otel-key-401",
        Script(status=401, parts=[json.dumps(error).encode()], content_type="application/json"),
    )
    base = ok.replace("http://", f"http://user:{key}@")  # a credential in the base URL too
    s = open_client(base).stream("hi", model="m", api_key=key)
    s.wait()
    with pytest.raises(nito_nb.AuthenticationError) as info:
        open_client(refused).stream("hi", model="m", api_key=key)
    nito_nb.otel.export([s, info.value.stream], content=True, **sink.providers)
    spans = sink.spans()
    assert len(spans) == 2
    for span in spans:
        everything = json.dumps(
            {
                "a": dict(span.attributes or {}),
                "e": [dict(e.attributes or {}) for e in span.events],
                "s": span.status.description,
                "n": span.name,
            },
            default=str,
        )
        assert key not in everything and key[:12] not in everything


# -- a run, a store, a frame ----------------------------------------------------------------------------


@pytest.mark.spawns  # the store's helper process writes the events
def test_a_run_and_its_store_export_one_span_per_request(sink: Sink, tmp_path: Path) -> None:
    store = tmp_path / "run.duckdb"
    run = nito_nb.run(
        ["one", "two", "three"], model="sim/echo", store=str(store), progress=False, **FAST
    ).wait()
    assert nito_nb.otel.export(run, content=True, **sink.providers) == 3
    spans = sink.spans()
    results = run.results().set_index("key")
    assert sorted(
        json.loads(s.attributes["gen_ai.input.messages"])[0]["parts"][0]["content"] for s in spans
    ) == ["one", "three", "two"]
    for span in spans:
        assert _not_conventional(span.attributes) == []
        assert span.attributes["gen_ai.response.time_to_first_chunk"] in set(
            results["ttft"].round(12)
        ) or any(
            abs(span.attributes["gen_ai.response.time_to_first_chunk"] - t) < 1e-6
            for t in results["ttft"]
        )
    stored = Sink()
    with nito_nb.open_store(store) as opened:
        assert nito_nb.otel.export(opened, **stored.providers) == 3
    assert sorted(s.start_time for s in stored.spans()) == sorted(s.start_time for s in spans)
    assert sorted(s.end_time for s in stored.spans()) == sorted(s.end_time for s in spans)


def test_a_frame_exports_and_one_without_its_attrs_says_what_to_do(sink: Sink) -> None:
    s = nito_nb.stream("hi", model="sim/echo", **FAST)
    s.wait()
    df = s.frame()
    assert nito_nb.otel.export(df, **sink.providers) == 1
    assert sink.spans()[0].start_time == _wall_ns(s, s.log.t0_ns)
    # Rows of two streams interleaved (a frame put together by hand): each stream is still read whole.
    other = nito_nb.stream("ho", model="sim/echo", **FAST).wait()
    both = nito_nb.frame({"a": s, "b": other})
    position = both.groupby("stream", observed=True).cumcount().to_numpy()
    mixed = both.iloc[position.argsort(kind="stable")]
    assert (mixed["stream"].to_numpy()[1:] != mixed["stream"].to_numpy()[:-1]).sum() > 1
    twice = Sink()
    nito_nb.otel.export(mixed, **twice.providers)
    events = sorted(len(span.events) for span in twice.spans())
    assert events == sorted([s.snapshot().n_token_chunks + 1, other.snapshot().n_token_chunks + 1])
    bare = df.copy()
    bare.attrs = {}
    with pytest.raises(
        nito_nb.ConfigurationError,
        match=r"lost df.attrs\['nito'\].*export the Streams, the Run or the Store",
    ):
        nito_nb.otel.export(bare, **sink.providers)


def test_what_cannot_be_exported_says_so_in_one_line(
    sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(
        nito_nb.ConfigurationError,
        match="takes a Stream, a list of Streams, a Run, a Store or a frame",
    ):
        nito_nb.otel.export("runs/", **sink.providers)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if the extra were not installed
    monkeypatch.delitem(sys.modules, "nito_nb.otel._emit", raising=False)
    with pytest.raises(nito_nb.ConfigurationError) as info:
        nito_nb.otel.export([])
    assert str(info.value) == (
        "nito_nb.otel needs OpenTelemetry: pip install 'nito_nb[otel]' "
        "(opentelemetry-api and opentelemetry-sdk)"
    )


# -- the session's requests, as each ends ------------------------------------------------------------


def test_live_exports_every_request_of_the_block_as_it_ends_and_no_recording(
    sink: Sink, scripted: ScriptedServer
) -> None:
    limited = Script(
        status=429,
        parts=[b'{"error": {"message": "slow down"}}'],
        content_type="application/json",
        headers={"retry-after": "0"},
    )
    said = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "ok"}}]}
    fine = Script(parts=[f"data: {json.dumps(said)}\n\ndata: [DONE]\n\n".encode()])
    retried = scripted.add("otel-retried", limited, fine)
    down = scripted.add("otel-down", Script(status=503, parts=[b"down"], content_type="text/plain"))
    with nito_nb.otel.live(**sink.providers):
        nito_nb.stream("sync", model="sim/echo", **FAST).wait()

        async def twin() -> None:
            await nito_nb.AsyncClient().stream("async", model="sim/echo", **FAST).wait()

        asyncio.run(twin())
        open_client(retried, max_retries=2).stream("retried", model="m").wait()
        with pytest.raises(nito_nb.ServerError):
            open_client(down, max_retries=1).stream("down", model="m")
        captured = nito_nb.httpx_client()
        with captured.stream(
            "POST",
            f"{retried}/chat/completions",
            json={"model": "captured", "stream": True, "messages": []},
        ) as response:
            response.read()
        captured.close()
        recorded = nito_nb.stream("recorded", model="sim/echo", **FAST).wait()
        nito_nb.read_sse(recorded.log.body)  # a recording: sent nothing
    spans = sink.spans()
    models = sorted(str(s.attributes["gen_ai.request.model"]) for s in spans)
    assert models == ["captured", "m", "m", "sim/echo", "sim/echo", "sim/echo"]
    by_status = {
        (s.attributes["gen_ai.request.model"], s.attributes["nito.status"]): s for s in spans
    }
    # Retried after a 429, then answered: one span over both attempts; given up after a retry: one.
    assert by_status[("m", "done")].attributes["nito.attempts"] == 2
    assert by_status[("m", "failed")].attributes["error.type"] == "503"
    assert by_status[("m", "failed")].attributes["nito.attempts"] == 2
    for span in spans:
        assert _not_conventional(span.attributes) == []
    # Nothing is exported after the block.
    nito_nb.stream("after", model="sim/echo", **FAST).wait()
    assert len(sink.spans()) == 6


def test_instrument_exports_the_magics_streams(sink: Sink, ip: Any) -> None:
    nito_nb.otel.instrument(**sink.providers)
    try:
        ip.run_cell_magic(
            "nito", "-m sim/echo,sim/chat --param sim.tps=0 --param sim.ttft_ms=0", "from the magic"
        )
    finally:
        nito_nb.otel.uninstrument()
    spans = sink.spans()
    assert sorted(s.attributes["gen_ai.request.model"] for s in spans) == ["sim/chat", "sim/echo"]


def test_an_end_listener_that_fails_is_reported_and_the_stream_is_unharmed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from nito_nb._stream_results import listen_to_ends

    heard: list[Any] = []

    def broken(stream: Any) -> None:
        raise RuntimeError("listener bug")

    stops = [listen_to_ends(broken), listen_to_ends(heard.append)]
    try:
        s = nito_nb.stream("hi", model="sim/echo", **FAST).wait()
    finally:
        for stop in stops:
            stop()
    assert heard == [s] and s.status == "done"
    assert "the end listener" in capsys.readouterr().err


@pytest.mark.spawns
def test_live_hears_a_runs_worker_processes(sink: Sink) -> None:
    with nito_nb.otel.live(**sink.providers):
        run = nito_nb.run(
            ["a", "b", "c", "d"],
            model="sim/echo",
            engine="processes",
            workers=2,
            progress=False,
            **FAST,
        ).wait()
    assert len(run.results()) == 4
    spans = sink.spans()
    assert len(spans) == 4 and all(s.attributes["nito.status"] == "done" for s in spans)
    # Each at its worker's send: within the run, on this process's wall clock.
    started = _dt.datetime.now(_dt.timezone.utc).timestamp() * 1e9
    assert all(0 < started - s.start_time < 120e9 for s in spans)


@pytest.mark.spawns
def test_what_ended_just_before_the_interpreter_exits_is_still_exported(tmp_path: Path) -> None:
    # The providers are made before instrument(), as a user makes them: the SDK shuts them down
    # at exit, and the requests waiting for the export thread go out before that.
    out = tmp_path / "spans.txt"
    code = f"""
import nito_nb, nito_nb.otel
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

class ToFile(SpanExporter):
    def export(self, spans):
        with open({str(out)!r}, "a") as f:
            f.writelines(span.name + "\\n" for span in spans)
        return SpanExportResult.SUCCESS

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ToFile()))
nito_nb.otel.instrument(tracer_provider=provider)
for i in range(3):
    nito_nb.stream("hi", model="sim/echo", sim={{"tps": 0, "ttft_ms": 0}}).wait()
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert out.read_text().splitlines() == ["chat sim/echo"] * 3


# -- an OTLP/HTTP receiver of the test's own -------------------------------------------------------


class _Receiver(BaseHTTPRequestHandler):
    received: list[bytes]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        type(self).received.append(body)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_a_runs_spans_reach_an_otlp_http_receiver_and_read_back(tmp_path: Path) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    handler = type("Receiver", (_Receiver,), {"received": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        # every chunk an event
        provider = TracerProvider(span_limits=SpanLimits(max_events=100_000))
        provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=f"http://127.0.0.1:{server.server_port}/v1/traces")
            )
        )
        run = nito_nb.run(["one", "two"], model="sim/chat", progress=False, **FAST).wait()
        assert (
            nito_nb.otel.export(run, tracer_provider=provider, meter_provider=MeterProvider()) == 2
        )
        provider.force_flush()
        provider.shutdown()
    finally:
        server.shutdown()
        server.server_close()
    spans = []
    for body in handler.received:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans += [
            span
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
            if ss.scope.name == "nito_nb"
        ]
    assert len(spans) == 2
    results = run.results()
    for span in spans:
        attributes = {a.key: a.value for a in span.attributes}
        assert span.name == "chat sim/chat" and span.kind == span.SPAN_KIND_CLIENT
        assert attributes["gen_ai.operation.name"].string_value == "chat"
        assert attributes["gen_ai.request.stream"].bool_value is True
        assert attributes["gen_ai.usage.output_tokens"].int_value in set(results["n_output_tokens"])
        chunks = [e for e in span.events if e.name == "nito.chunk"]
        assert len(chunks) == attributes["nito.n_token_chunks"].int_value
        times = [v.double_value for v in attributes["nito.chunk.times"].array_value.values]
        assert [
            (e.time_unix_nano - span.start_time_unix_nano) / 1e9 for e in chunks
        ] == pytest.approx(times, abs=2e-6)
        assert (
            span.start_time_unix_nano
            < chunks[0].time_unix_nano
            <= chunks[-1].time_unix_nano
            <= span.end_time_unix_nano
        )
        ttft = attributes["gen_ai.response.time_to_first_chunk"].double_value
        assert (chunks[0].time_unix_nano - span.start_time_unix_nano) / 1e9 == pytest.approx(
            ttft, abs=2e-6
        )
