"""Spans are recorded only when something takes them (shared.tracing.make_provider)."""

from __future__ import annotations

from opentelemetry import propagate
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared import tracing

SAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
UNSAMPLED = SAMPLED[:-2] + "00"


def sampled(traceparent: str) -> bool:
    return bool(int(traceparent.split("-")[3], 16) & 1)  # other bits: the random-id flag


def traceparent_inside(provider: tracing.TracerProvider, incoming: str | None) -> tuple[bool, str]:
    """Whether a server span for a request with ``incoming`` records, and the
    ``traceparent`` it sends on."""
    parent = propagate.extract({"traceparent": incoming} if incoming else {})
    with provider.get_tracer("test").start_as_current_span("POST /", context=parent) as span:
        return span.is_recording(), tracing.inject({})["traceparent"]


def test_without_a_processor_spans_are_ids_only() -> None:
    provider = tracing.make_provider("edgecore-test")
    recording, sent = traceparent_inside(provider, None)
    assert not recording
    assert not sampled(sent)  # a trace id goes on, unsampled
    recording, sent = traceparent_inside(provider, UNSAMPLED)
    assert not recording and sent.split("-")[1] == UNSAMPLED.split("-")[1]


def test_a_callers_sampled_trace_stays_sampled() -> None:
    provider = tracing.make_provider("edgecore-test")
    recording, sent = traceparent_inside(provider, SAMPLED)
    assert recording
    assert sent.split("-")[1] == SAMPLED.split("-")[1] and sampled(sent)


def test_spans_are_recorded_once_a_processor_takes_them() -> None:
    exporter = InMemorySpanExporter()
    provider = tracing.make_provider("edgecore-test")
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # as a test's use() does later
    recording, sent = traceparent_inside(provider, None)
    assert recording and sampled(sent)
    assert [s.name for s in exporter.get_finished_spans()] == ["POST /"]
    given = tracing.make_provider("edgecore-test", [SimpleSpanProcessor(InMemorySpanExporter())])
    assert traceparent_inside(given, None)[0]
