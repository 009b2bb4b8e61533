"""Spans are recorded only while something takes them; the trace context travels either way."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from echo_memory.libs.server import telemetry


@pytest.fixture(autouse=True)
def no_processors(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process with no exporter yet (the session's own processor and providers are set aside)."""
    monkeypatch.setattr(telemetry, "_processors", [])
    monkeypatch.setattr(telemetry, "_providers", {})


def test_without_a_processor_spans_are_not_recorded_but_carry_a_trace() -> None:
    tracer = telemetry.tracer_provider("sampler-test").get_tracer("t")
    with tracer.start_as_current_span("outer") as outer, tracer.start_as_current_span("inner") as inner:
        assert not outer.is_recording() and not inner.is_recording()
        assert outer.get_span_context().is_valid
        assert inner.get_span_context().trace_id == outer.get_span_context().trace_id


def test_once_a_processor_is_attached_spans_are_recorded() -> None:
    provider = telemetry.tracer_provider("sampler-test-later")
    exporter = InMemorySpanExporter()
    telemetry.export_spans_to(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("kept") as span:
        assert span.is_recording()
    assert [s.name for s in exporter.get_finished_spans()] == ["kept"]
