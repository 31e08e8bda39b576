"""The core's ASGI app: OpenAI endpoints relayed to the supervised vLLM engine."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import IO, Any

import httpx
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from core.engine import Engine
from core.settings import CoreSettings
from shared import completions, sse
from shared.disconnect import CLIENT_CLOSED, ClientDisconnected, cancel_on_disconnect
from shared.errors import EXCEPTION_HANDLERS, ApiError
from shared.http import json_object, read_body, request_id
from shared.streaming import EventStreamResponse, with_keepalive


@dataclass
class CoreMetrics:
    registry: CollectorRegistry
    requests: Counter
    in_flight: Gauge
    disconnects: Counter
    engine_ready: Gauge

    @classmethod
    def create(cls) -> CoreMetrics:
        r = CollectorRegistry()
        return cls(
            registry=r,
            requests=Counter(
                "edgecore_core_requests",
                "Chat requests by HTTP version of the caller and response status.",
                ["http_version", "status"],
                registry=r,
            ),
            in_flight=Gauge("edgecore_core_in_flight", "Requests in flight.", registry=r),
            disconnects=Counter(
                "edgecore_core_client_disconnects",
                "Requests whose caller left before the end; engine work was aborted.",
                registry=r,
            ),
            engine_ready=Gauge(
                "edgecore_core_engine_ready", "1 when the engine is healthy.", registry=r
            ),
        )


@dataclass
class CoreState:
    settings: CoreSettings
    engine_client: httpx.AsyncClient
    engine: Engine | None
    metrics: CoreMetrics

    def engine_ready(self) -> bool:
        return self.engine is None or self.engine.ready.is_set()


def _state(request: Request) -> CoreState:
    state: CoreState = request.app.state.core
    return state


def _unavailable() -> ApiError:
    return ApiError(
        503, "model engine is not ready", code="engine_unavailable", headers={"retry-after": "5"}
    )


async def chat_completions(request: Request) -> Response:
    st = _state(request)
    rid = request_id(request, "core-" + uuid.uuid4().hex[:16])
    status = "error"
    st.metrics.in_flight.inc()
    try:
        body = await read_body(request, st.settings.max_body_bytes)
        payload = json_object(body)
        if not st.engine_ready():
            raise _unavailable()
        headers = {"content-type": "application/json", "x-request-id": rid}
        upstream = st.engine_client.build_request(
            "POST", "/v1/chat/completions", content=body, headers=headers
        )
        if payload.get("stream"):
            response = await _relay_stream(request, st, upstream, rid)
        else:
            response = await _relay_once(request, st, upstream, rid)
        status = str(response.status_code)
        return response
    except ApiError as exc:
        status = str(exc.status)
        raise
    finally:
        st.metrics.in_flight.dec()
        st.metrics.requests.labels(request.scope.get("http_version", "?"), status).inc()


async def _relay_once(
    request: Request, st: CoreState, upstream: httpx.Request, rid: str
) -> Response:
    try:
        # If the caller leaves, the engine request is closed, and vLLM aborts it.
        r = await cancel_on_disconnect(request.receive, st.engine_client.send(upstream))
    except ClientDisconnected:
        st.metrics.disconnects.inc()
        return Response(status_code=CLIENT_CLOSED)
    except httpx.HTTPError:
        raise _unavailable() from None
    return Response(
        r.content,
        status_code=r.status_code,
        media_type=r.headers.get("content-type", "application/json"),
        headers={"x-request-id": rid},
    )


async def _relay_stream(
    request: Request, st: CoreState, upstream: httpx.Request, rid: str
) -> Response:
    try:
        r = await cancel_on_disconnect(
            request.receive, st.engine_client.send(upstream, stream=True)
        )
    except ClientDisconnected:
        st.metrics.disconnects.inc()
        return Response(status_code=CLIENT_CLOSED)
    except httpx.HTTPError:
        raise _unavailable() from None
    if r.status_code != 200:
        content = await r.aread()
        await r.aclose()
        return Response(
            content,
            status_code=r.status_code,
            media_type=r.headers.get("content-type", "application/json"),
            headers={"x-request-id": rid},
        )

    async def relay() -> AsyncIterator[bytes]:
        finished = False
        chunks = with_keepalive(r.aiter_raw(), st.settings.sse_keepalive_s)
        try:
            async with contextlib.aclosing(chunks):
                async for chunk in chunks:
                    # Comments while the engine is silent (queued, long prefill): the edge's
                    # idle timeout must not cut a stream that is only slow to start.
                    yield sse.KEEPALIVE if chunk is None else chunk
            finished = True
        except httpx.HTTPError:
            # The engine died mid-stream: say so in-band instead of cutting silently.
            yield sse.encode(completions.stream_error("engine failed mid-stream"))
            yield sse.DONE
            finished = True
        finally:
            if not finished:
                st.metrics.disconnects.inc()
            await r.aclose()

    return EventStreamResponse(relay(), headers={**sse.STREAM_HEADERS, "x-request-id": rid})


async def models(request: Request) -> Response:
    st = _state(request)
    try:
        r = await st.engine_client.get("/v1/models", timeout=10.0)
    except httpx.HTTPError:
        raise _unavailable() from None
    return Response(r.content, status_code=r.status_code, media_type="application/json")


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    st = _state(request)
    ready = st.engine_ready()
    detail: dict[str, Any] = {"status": "ready" if ready else "starting", "engine": ready}
    if st.engine is not None:
        detail["engine_restarts"] = st.engine.restarts
    return JSONResponse(detail, status_code=200 if ready else 503)


async def metrics(request: Request) -> Response:
    st = _state(request)
    st.metrics.engine_ready.set(1 if st.engine_ready() else 0)
    return Response(generate_latest(st.metrics.registry), media_type=CONTENT_TYPE_LATEST)


def create_app(settings: CoreSettings, engine_log: IO[bytes] | None = None) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        engine = (
            Engine(settings.engine, settings.home, engine_log) if settings.manage_engine else None
        )
        timeout = httpx.Timeout(settings.request_timeout_s, connect=5.0)
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
        async with httpx.AsyncClient(
            base_url=settings.engine.base_url, timeout=timeout, limits=limits
        ) as client:
            app.state.core = CoreState(settings, client, engine, CoreMetrics.create())
            if engine is not None:
                engine.start()
            try:
                yield
            finally:
                if engine is not None:
                    await engine.stop()

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ],
        exception_handlers=dict(EXCEPTION_HANDLERS),
        lifespan=lifespan,
    )
