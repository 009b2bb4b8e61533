"""OpenTelemetry set-up: one trace per tool call, edge → bus → service → SQL.

Spans are exported over OTLP only when OTEL_EXPORTER_OTLP_ENDPOINT is set; tests attach an
in-memory exporter instead. FastStream's middleware carries the context in NATS headers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Span

TRACER_NAME = "echo-memory"


def setup_tracing(service_name: str) -> TracerProvider:
    """Install the global tracer provider for this process (idempotent per process)."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    provider = TracerProvider(resource=Resource.create({"service.name": f"echo-memory-{service_name}"}))
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def bus_middleware() -> NatsTelemetryMiddleware:
    """The FastStream middleware that propagates trace context through NATS headers."""
    return NatsTelemetryMiddleware(tracer_provider=trace.get_tracer_provider())


@contextmanager
def db_span(name: str, *, org: str | None = None) -> Iterator[Span]:
    """A span around one named SQL step (the statement's constant name, never its values)."""
    tracer = trace.get_tracer(TRACER_NAME)
    with tracer.start_as_current_span(f"db {name}", kind=trace.SpanKind.CLIENT) as span:
        span.set_attribute("db.system", "postgresql")
        span.set_attribute("db.operation.name", name)
        if org:
            span.set_attribute("echo.org", org)
        yield span
