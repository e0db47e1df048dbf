"""What ``nito_nb.otel`` costs: the CPU of exporting a run, and what ``live()`` does to a run.

    .venv/bin/python bench/bench_otel.py              # 300 sim/chat requests (about 270 chunks each)
    .venv/bin/python bench/bench_otel.py --requests 1000

1. ``export(run)`` of a finished run, in its three steps: the run's frame, the frame read into
   calls (``otel/_calls.py``), and the OpenTelemetry SDK's spans, events and histograms
   (``otel/_emit.py``; a BatchSpanProcessor to an in-memory exporter, an in-memory metric reader).
   Per request, best of three.
2. The same run sent with and without ``nito_nb.otel.live()``, interleaved, best of two each: the
   export thread's CPU is taken from the run's (one GIL), so a CPU-bound run (the simulator in
   this process, ``tps=0``) shows the most it can cost.
"""

from __future__ import annotations

import argparse
import importlib
import time
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nito_nb
import nito_nb.otel
from nito_nb.otel._emit import Emitter

calls_module = importlib.import_module("nito_nb.otel._calls")
FAST = {"sim": {"tps": 0, "ttft_ms": 0}}


def providers() -> tuple[TracerProvider, MeterProvider]:
    tracer = TracerProvider()
    tracer.add_span_processor(BatchSpanProcessor(InMemorySpanExporter(), max_queue_size=1_000_000))
    return tracer, MeterProvider(metric_readers=[InMemoryMetricReader()])


def send(prompts: list[str]) -> Any:
    return nito_nb.run(prompts, model="sim/chat", progress=False, concurrency=16, **FAST).wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    n = parser.parse_args().requests
    prompts = [f"question {i} about streaming" for i in range(n)]
    run = send(prompts)
    best: dict[str, float] = {}
    for _ in range(3):
        tracer, meter = providers()
        t0 = time.perf_counter()
        df = run.frame()
        t1 = time.perf_counter()
        calls = calls_module.calls_of(df, None)
        t2 = time.perf_counter()
        emitter = Emitter(tracer, meter)
        for call in calls:
            emitter.emit(call)
        t3 = time.perf_counter()
        for step, seconds in (
            ("frame", t1 - t0),
            ("calls", t2 - t1),
            ("emit", t3 - t2),
            ("total", t3 - t0),
        ):
            best[step] = min(best.get(step, float("inf")), seconds)
        tracer.shutdown()
        meter.shutdown()
    chunks = sum(call.attributes.get("nito.n_token_chunks", 0) for call in calls)
    print(
        f"export of {n} requests ({chunks / n:.0f} token-bearing chunks each), per request: "
        + ", ".join(f"{step} {seconds / n * 1e3:.2f} ms" for step, seconds in best.items())
    )
    sent: dict[bool, float] = {}
    for live in (False, True, False, True):
        tracer, meter = providers()
        t0 = time.perf_counter()
        if live:
            with nito_nb.otel.live(tracer_provider=tracer, meter_provider=meter):
                send(prompts)
        else:
            send(prompts)
        sent[live] = min(sent.get(live, float("inf")), time.perf_counter() - t0)
        tracer.shutdown()
        meter.shutdown()
    print(
        f"the run: {sent[False]:.2f} s without live(), {sent[True]:.2f} s with it (until every span is exported)"
    )


if __name__ == "__main__":
    main()
