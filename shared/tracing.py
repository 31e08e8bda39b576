"""OpenTelemetry traces for the edge and the core: W3C ``traceparent`` in, spans, and out.

    client -> edge (server span "POST /v1/chat/completions")
                 edge.cache.lookup, edge.cache.semantic, edge.route, edge.tier.core|edge
                 -> traceparent -> core (server span) -> core.admit, core.engine
                                     -> traceparent -> vLLM (--otlp-traces-endpoint)

Spans are always made (so ``traceparent`` goes on to the core and vLLM, and the access log
carries a trace id), but exported only when an OTLP endpoint is configured: the standard
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` (OTLP over HTTP,
``OTEL_EXPORTER_OTLP_*`` options apply). ``OTEL_SDK_DISABLED=true`` turns tracing off.
While no processor takes spans, they are ids only (not recorded), unless the caller's
``traceparent`` asked for its trace to be sampled.
One tracer provider per process: the first ``setup()`` (or a test's ``use()``) wins.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from opentelemetry import context, propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased, Sampler, SamplingResult
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("edgecore.tracing")

P = ParamSpec("P")
T = TypeVar("T")

tracer = trace.get_tracer("edgecore")  # a proxy until the provider is set
_provider: TracerProvider | None = None


def otlp_endpoint() -> str | None:
    return (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or None
    )


def use(provider: TracerProvider) -> TracerProvider:
    """Install ``provider`` for this process (first call wins; later ones are ignored)."""
    global _provider
    if _provider is None:
        _provider = provider
        trace.set_tracer_provider(provider)
    return _provider


def setup(service: str, processors: list[SpanProcessor] | None = None) -> TracerProvider | None:
    """The process's tracer provider for ``service``; None when tracing is disabled."""
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    if _provider is not None:
        return _provider
    return use(make_provider(service, processors))


class RecordWhenTaken(Sampler):
    """``recording`` (the SDK's sampler, ``OTEL_TRACES_SAMPLER``) once a span processor is
    there to take spans; until then spans are ids only: a caller's trace still goes on, with
    its sampled flag, and the access log still has the trace id, but the SDK's recording
    (attributes, events, the span's end) is skipped: two nested spans cost 26 us instead
    of 62 us here, and spans were about 9 % of a cache hit's CPU (py-spy).
    A root span, or a caller's unsampled one, is then left unsampled downstream too: an
    operator who exports the core's traces exports the edge's as well."""

    def __init__(self, recording: Sampler) -> None:
        self.recording = recording
        self.idle: Sampler = ParentBased(ALWAYS_OFF)
        self.taken = False

    def should_sample(
        self,
        parent_context: context.Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        sampler = self.recording if self.taken else self.idle
        return sampler.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        return f"RecordWhenTaken{{{self.recording.get_description()}}}"


class _Provider(TracerProvider):
    """A tracer provider that records spans only once it has a processor for them."""

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource=resource)
        self.sampler = self.when_taken = RecordWhenTaken(self.sampler)

    def add_span_processor(self, span_processor: SpanProcessor) -> None:
        super().add_span_processor(span_processor)
        self.when_taken.taken = True


def make_provider(service: str, processors: list[SpanProcessor] | None = None) -> TracerProvider:
    """A tracer provider whose spans go to ``processors``, and over OTLP only when an
    endpoint is configured; with neither, its spans are not recorded."""
    provider = _Provider(
        Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service)})
    )
    for processor in processors or []:
        provider.add_span_processor(processor)
    endpoint = otlp_endpoint()
    if endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        log.info("exporting traces over OTLP to %s", endpoint)
    return provider


def flush() -> None:
    if _provider is not None:
        _provider.force_flush(timeout_millis=2000)


def inject(headers: dict[str, str]) -> dict[str, str]:
    """Add ``traceparent`` (and ``tracestate``) of the current span to outgoing headers."""
    propagate.inject(headers)
    return headers


def start(
    name: str,
    *,
    parent: context.Context | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Attributes = None,
    provider: TracerProvider | None = None,
) -> AbstractContextManager[trace.Span]:
    """A span called ``name``, current inside the block: ``start_as_current_span`` on the
    process's provider (or ``provider``), without the SDK's work when the span would not be
    recorded (no processor takes spans, and the parent is not sampled): then it is the same
    ids the SDK would make, as a bare ``NonRecordingSpan``. Two nested spans took 13 us
    through the SDK and its proxy tracer, and that is on every request."""
    chosen = provider or _provider
    span = _ids_only(chosen, parent)
    if span is not None:
        return _Current(span, parent)
    source = tracer if provider is None else provider.get_tracer("edgecore")
    return source.start_as_current_span(name, context=parent, kind=kind, attributes=attributes)


def _ids_only(provider: TracerProvider | None, parent: context.Context | None) -> trace.Span | None:
    """The span ``provider``'s sampler would drop, as ids only; None when it would record
    it (or the provider is not ours). Mirrors ``RecordWhenTaken``'s idle ``ParentBased``:
    the parent's trace id and state, a new span id, unsampled."""
    if not isinstance(provider, _Provider) or provider.when_taken.taken:
        return None
    above = trace.get_current_span(parent).get_span_context()
    if above.trace_flags.sampled:
        return None
    ids = provider.id_generator
    valid = above.is_valid
    return NonRecordingSpan(
        SpanContext(
            above.trace_id if valid else ids.generate_trace_id(),
            ids.generate_span_id(),
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.DEFAULT),
            trace_state=above.trace_state if valid else None,
        )
    )


class _Current(AbstractContextManager[trace.Span]):
    """``span`` as the current span inside the block (``trace.use_span`` less its
    exception recording, which a span that records nothing skips anyway)."""

    def __init__(self, span: trace.Span, parent: context.Context | None) -> None:
        self.span = span
        self.parent = parent
        self.token: object = None

    def __enter__(self) -> trace.Span:
        self.token = context.attach(trace.set_span_in_context(self.span, self.parent))
        return self.span

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        context.detach(self.token)  # type: ignore[arg-type]


def traced(name: str) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Coroutine[Any, Any, T]]]:
    """Run an async function inside a span called ``name``."""

    def wrap(fn: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        @functools.wraps(fn)
        async def inner(*args: P.args, **kwargs: P.kwargs) -> T:
            with start(name):
                return await fn(*args, **kwargs)

        return inner

    return wrap


def traced_sync(name: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Run a function inside a span called ``name``."""

    def wrap(fn: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(fn)
        def inner(*args: P.args, **kwargs: P.kwargs) -> T:
            with start(name):
                return fn(*args, **kwargs)

        return inner

    return wrap


def set_attributes(**attributes: str | int | float | bool | None) -> None:
    """Attributes on the current span (None values are left out)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes(
            {k.replace("__", "."): v for k, v in attributes.items() if v is not None}
        )


class TraceMiddleware:
    """Pure ASGI middleware: a server span per HTTP request, continuing the caller's trace."""

    def __init__(self, app: ASGIApp, service: str) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {
            k.decode("latin-1"): v.decode("latin-1")
            for k, v in scope.get("headers", ())
            if k in (b"traceparent", b"tracestate", b"baggage")
        }
        parent = propagate.extract(carrier) if carrier else context.Context()
        method, path = scope["method"], scope["path"]
        with start(
            f"{method} {path}",
            parent=parent,
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": method,
                "url.path": path,
                "network.protocol.version": str(scope.get("http_version", "")),
                "edgecore.service": self.service,
            },
        ) as span:

            async def sending(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(Status(StatusCode.ERROR))
                await send(message)

            await self.app(scope, receive, sending)
