"""OpenTelemetry set-up: one trace per tool call, edge → bus → service → SQL.

Spans are exported over OTLP only when OTEL_EXPORTER_OTLP_ENDPOINT is set; tests attach an
in-memory exporter instead. FastStream's middleware carries the context in NATS headers.

Each component has its own tracer provider, so its spans carry its own `service.name` even when
several services share one process; every provider exports through the same processors. While no
processor is attached, spans are not recorded at all: building them cost ~0.25 ms of CPU on every
bus round trip, for nothing (the trace context still travels, so a later exporter sees whole traces
of new requests).
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, Span, SpanKind
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

TRACER_NAME = "echo-memory"

_processors: list[SpanProcessor] = []
_providers: dict[str, TracerProvider] = {}
_otlp_added = False
# The provider of the component whose request is being handled; unset, the process's global one.
_serving: ContextVar[trace.TracerProvider | None] = ContextVar("echo_tracer_provider", default=None)


class WhileExported(Sampler):
    """`recording`'s decision while some processor takes spans; without one, drop every span."""

    def __init__(self, recording: Sampler) -> None:
        self._recording = recording

    def should_sample(
        self, parent_context: Context | None, trace_id: int, name: str, kind: SpanKind | None = None,
        attributes: Attributes = None, links: Sequence[Link] | None = None, trace_state: TraceState | None = None,
    ) -> SamplingResult:
        if not _processors:
            parent = trace.get_current_span(parent_context).get_span_context()
            return SamplingResult(Decision.DROP, None, parent.trace_state if parent.is_valid else None)
        return self._recording.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return f"WhileExported{{{self._recording.get_description()}}}"


def _configured_sampler() -> Sampler:
    """The sampler the SDK would choose (OTEL_TRACES_SAMPLER, else parent-based always-on)."""
    return TracerProvider(shutdown_on_exit=False).sampler


def export_spans_to(processor: SpanProcessor) -> None:
    """Send every component's spans, of providers made before or after this call, to `processor`."""
    _processors.append(processor)
    for provider in _providers.values():
        provider.add_span_processor(processor)


def tracer_provider(component: str) -> TracerProvider:
    """The provider whose spans name `component` as their service (one per component per process)."""
    if component not in _providers:
        # Only the process's global provider shuts the shared processors down at exit.
        provider = TracerProvider(
            resource=Resource.create({"service.name": f"echo-memory-{component}"}), shutdown_on_exit=False,
            sampler=WhileExported(_configured_sampler()),
        )
        for processor in _processors:
            provider.add_span_processor(processor)
        _providers[component] = provider
    return _providers[component]


def setup_tracing(process_label: str) -> trace.TracerProvider:
    """Install the global tracer provider for this process, exporting over OTLP when configured.

    Idempotent: a process that already has an SDK provider keeps it. Returns the global provider.
    """
    global _otlp_added
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") and not _otlp_added:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        export_spans_to(BatchSpanProcessor(OTLPSpanExporter()))
        _otlp_added = True
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    provider = tracer_provider(process_label)
    atexit.register(provider.shutdown)  # flushes the shared processors once, for every component
    trace.set_tracer_provider(provider)
    return trace.get_tracer_provider()


def bus_middleware(provider: trace.TracerProvider | None = None) -> NatsTelemetryMiddleware:
    """The FastStream middleware that propagates trace context through NATS headers.

    Its spans come from `provider` (a component's own), else from the process's global one.
    """
    return NatsTelemetryMiddleware(tracer_provider=provider or trace.get_tracer_provider())


@contextmanager
def serving_as(provider: trace.TracerProvider) -> Iterator[None]:
    """Within this block, `db_span` records its spans under `provider`'s component."""
    token = _serving.set(provider)
    try:
        yield
    finally:
        _serving.reset(token)


@contextmanager
def db_span(name: str, *, org: str | None = None) -> Iterator[Span]:
    """A span around one named SQL step (the statement's constant name, never its values)."""
    tracer = (_serving.get() or trace.get_tracer_provider()).get_tracer(TRACER_NAME)
    with tracer.start_as_current_span(f"db {name}", kind=trace.SpanKind.CLIENT) as span:
        span.set_attribute("db.system", "postgresql")
        span.set_attribute("db.operation.name", name)
        if org:
            span.set_attribute("echo.org", org)
        yield span
