"""The OpenTelemetry calls: a span per :class:`~nito_nb.otel._calls.Call`, and the client metrics.
The only module of nito_nb that imports ``opentelemetry``; ``nito_nb.otel`` imports it on first
use, so that nito_nb works without the ``otel`` extra.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ._calls import Call

__all__ = ["Emitter"]

SCOPE = "nito_nb"

#: The conventions' bucket boundaries (seconds for the durations, tokens for the usage).
SECONDS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
TOKENS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]


class Emitter:
    """Spans and metrics of calls, to a tracer provider and a meter provider (the global ones when
    None: whatever ``opentelemetry.trace.set_tracer_provider`` set)."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        from .. import __version__

        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(
            SCOPE, __version__
        )
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(SCOPE, __version__)
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=SECONDS,
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKENS,
        )
        self.first_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_to_first_chunk",
            unit="s",
            description="Time to receive the first chunk, measured from when the client issues the generation "
            "request to when the first chunk is received in the response stream.",
            explicit_bucket_boundaries_advisory=SECONDS,
        )
        self.per_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_per_output_chunk",
            unit="s",
            description="Time per output chunk, recorded for each chunk received after the first one.",
            explicit_bucket_boundaries_advisory=SECONDS,
        )

    def emit(self, call: Call) -> None:
        span = self.tracer.start_span(
            call.name, kind=SpanKind.CLIENT, start_time=call.start_ns, attributes=call.attributes
        )
        for t_ns, name, attributes in call.events:
            span.add_event(name, attributes, timestamp=t_ns)
        if call.error_type is not None:
            span.set_status(Status(StatusCode.ERROR, call.error_message))
        span.end(end_time=call.end_ns)

        common = call.metric_attributes
        self.duration.record(
            call.duration,
            {**common, **({} if call.error_type is None else {"error.type": call.error_type})},
        )
        if call.input_tokens is not None:
            self.tokens.record(call.input_tokens, {**common, "gen_ai.token.type": "input"})
        if call.output_tokens is not None:
            self.tokens.record(call.output_tokens, {**common, "gen_ai.token.type": "output"})
        if call.time_to_first_chunk is not None:
            self.first_chunk.record(call.time_to_first_chunk, common)
        for gap in call.chunk_gaps:
            self.per_chunk.record(gap, common)
