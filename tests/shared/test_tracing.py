"""Spans are recorded only when something takes them (shared.tracing.make_provider), and
``tracing.start``'s shortcut for spans that record nothing behaves as the SDK does."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest
from opentelemetry import context, propagate, trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared import tracing

SAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
UNSAMPLED = SAMPLED[:-2] + "00"


def sampled(traceparent: str) -> bool:
    return bool(int(traceparent.split("-")[3], 16) & 1)  # other bits: the random-id flag


Start = Callable[[tracing.TracerProvider, context.Context], AbstractContextManager[trace.Span]]


def through_sdk(
    provider: tracing.TracerProvider, parent: context.Context
) -> AbstractContextManager[trace.Span]:
    return provider.get_tracer("test").start_as_current_span("POST /", context=parent)


def through_start(
    provider: tracing.TracerProvider, parent: context.Context
) -> AbstractContextManager[trace.Span]:
    return tracing.start("POST /", parent=parent, provider=provider)


WAYS = pytest.mark.parametrize("way", [through_sdk, through_start], ids=["sdk", "start"])


def traceparent_inside(
    provider: tracing.TracerProvider, incoming: str | None, way: Start = through_start
) -> tuple[bool, str]:
    """Whether a server span for a request with ``incoming`` records, and the
    ``traceparent`` it sends on."""
    parent = propagate.extract({"traceparent": incoming} if incoming else {})
    with way(provider, parent) as span:
        assert trace.get_current_span() is span
        return span.is_recording(), tracing.inject({})["traceparent"]


@WAYS
def test_without_a_processor_spans_are_ids_only(way: Start) -> None:
    provider = tracing.make_provider("edgecore-test")
    recording, sent = traceparent_inside(provider, None, way)
    assert not recording
    assert not sampled(sent)  # a trace id goes on, unsampled
    recording, sent = traceparent_inside(provider, UNSAMPLED, way)
    assert not recording and sent.split("-")[1] == UNSAMPLED.split("-")[1]
    assert sent.split("-")[2] != UNSAMPLED.split("-")[2]  # a span of its own


@WAYS
def test_a_callers_sampled_trace_stays_sampled(way: Start) -> None:
    provider = tracing.make_provider("edgecore-test")
    recording, sent = traceparent_inside(provider, SAMPLED, way)
    assert recording
    assert sent.split("-")[1] == SAMPLED.split("-")[1] and sampled(sent)


@WAYS
def test_spans_are_recorded_once_a_processor_takes_them(way: Start) -> None:
    exporter = InMemorySpanExporter()
    provider = tracing.make_provider("edgecore-test")
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # as a test's use() does later
    recording, sent = traceparent_inside(provider, None, way)
    assert recording and sampled(sent)
    assert [s.name for s in exporter.get_finished_spans()] == ["POST /"]
    given = tracing.make_provider("edgecore-test", [SimpleSpanProcessor(InMemorySpanExporter())])
    assert traceparent_inside(given, None, way)[0]


def test_a_nested_span_continues_its_parents_trace_and_ends_with_its_block() -> None:
    provider = tracing.make_provider("edgecore-test")
    outer_before = trace.get_current_span()
    with tracing.start("outer", provider=provider) as outer:
        with tracing.start("inner", provider=provider) as inner:
            assert trace.get_current_span() is inner
            ids = inner.get_span_context(), outer.get_span_context()
        assert trace.get_current_span() is outer
    assert trace.get_current_span() is outer_before
    assert ids[0].trace_id == ids[1].trace_id and ids[0].span_id != ids[1].span_id
