"""The core's ASGI app: OpenAI endpoints relayed to a pool of supervised vLLM engines.

Per request: authenticate the edge (core/auth.py), pick a priority class and deadline
(core/policy.py), wait for a replica in the bounded queue (core/admission.py), which the
balancer picks by load and conversation affinity (core/balancer.py), then relay the
engine's answer, aborting the engine request if the caller leaves (core/relay.py).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import IO, Any

import httpx
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from core import admin
from core.admission import Priority, Rejected
from core.auth import CoreAuth
from core.balancer import affinity_key
from core.discovery import Discovery, template_from
from core.metrics import CoreMetrics
from core.policy import SESSION_HEADER, priority_of, queue_timeout
from core.pool import Pool
from core.pool_config import load_pool
from core.relay import Evicted, admit, chunks, send, unless_evicted
from core.replica import Lease
from core.settings import CoreSettings
from shared import accesslog, completions, sse, tracing
from shared.disconnect import (
    CLIENT_CLOSED,
    ClientDisconnected,
    RememberDisconnect,
    cancel_on_disconnect,
)
from shared.errors import EXCEPTION_HANDLERS, ApiError
from shared.http import json_object, read_body, request_id
from shared.streaming import EventStreamResponse

__all__ = ["CoreMetrics", "CoreState", "create_app"]

log = logging.getLogger("edgecore.core")


@dataclass
class CoreState:
    settings: CoreSettings
    pool: Pool
    metrics: CoreMetrics


def _state(request: Request) -> CoreState:
    state: CoreState = request.app.state.core
    return state


# Failures before any response header that mean "this engine is not there right now".
_ENGINE_GONE = (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


def _unavailable(message: str = "model engine is not ready") -> ApiError:
    return ApiError(503, message, code="engine_unavailable", headers={"retry-after": "5"})


def _rejected(exc: Rejected, settings: CoreSettings) -> ApiError:
    if exc.reason == "no_replica":
        return _unavailable("no replica of the pool is ready")
    message = (
        "the core's queue for this priority class is full"
        if exc.reason == "queue_full"
        else "no replica became free before the request's deadline"
    )
    return ApiError(
        429, message, code=exc.reason, headers={"retry-after": str(settings.retry_after_s)}
    )


async def _open(
    st: CoreState,
    body: bytes,
    rid: str,
    priority: Priority,
    key: str | None,
    timeout: float,
    path: str = "/v1/chat/completions",
) -> tuple[Lease, httpx.Response]:
    """Admit, then send to the replica. A replica whose engine refuses the connection or
    drops it before answering (killed, restarting) is marked down and the request gets one
    retry on another replica: no answer came back, so the caller saw nothing twice."""
    exclude: frozenset[str] = frozenset()
    headers = {"content-type": "application/json", "x-request-id": rid}
    for _ in range(2):
        lease = await admit(st.pool, priority, key, timeout, exclude)
        lease.prefill_tokens = len(body) // 4  # a rough count: an allowance, not a limit
        try:
            return lease, await send(lease, body, headers, path)
        except _ENGINE_GONE:
            st.pool.release(lease, failed=True)
            exclude |= {lease.replica.name}
        except Evicted:
            st.pool.release(lease)
            if lease.reason != "unhealthy":
                raise _unavailable() from None
            exclude |= {lease.replica.name}  # its engine froze before answering: next one
        except httpx.HTTPError:
            st.pool.release(lease)
            raise _unavailable() from None
        except BaseException:
            st.pool.release(lease)  # the caller left while the request was being sent
            raise
    raise _unavailable()


async def chat_completions(request: Request) -> Response:
    """POST /v1/chat/completions, and the other OpenAI POST endpoints (the path decides)."""
    st = _state(request)
    path = request.url.path
    rid = request_id(request, "core-" + uuid.uuid4().hex[:16])
    arrived = time.perf_counter()
    status = "error"
    st.metrics.in_flight.inc()
    try:
        body = await read_body(request, st.settings.max_body_bytes)
        payload = json_object(body)
        priority = priority_of(request.headers, payload, st.settings.admission)
        accesslog.note(
            request_id=rid,
            tenant=request.headers.get("x-edgecore-tenant"),
            tier="core",
            priority=priority,
        )
        key = affinity_key(payload, request.headers.get(SESSION_HEADER))
        timeout = queue_timeout(request.headers, st.settings.admission)

        async def abandon(opened: tuple[Lease, httpx.Response]) -> None:
            await opened[1].aclose()
            st.pool.release(opened[0])

        try:
            lease, upstream = await cancel_on_disconnect(
                request.receive, _open(st, body, rid, priority, key, timeout, path), abandon
            )
        except ClientDisconnected:
            st.metrics.disconnects.inc()
            return Response(status_code=CLIENT_CLOSED)
        except Rejected as exc:
            raise _rejected(exc, st.settings) from None
        headers = {"x-request-id": rid, "x-edgecore-replica": lease.replica.name}
        if payload.get("stream") and upstream.status_code == 200:
            response = _relay_stream(st, lease, upstream, headers, arrived)
        else:
            response = await _relay_once(request, st, lease, upstream, headers)
            st.metrics.duration.observe(time.perf_counter() - arrived)
        status = str(response.status_code)
        return response
    except ApiError as exc:
        status = str(exc.status)
        raise
    finally:
        st.metrics.in_flight.dec()
        st.metrics.requests.labels(request.scope.get("http_version", "?"), status).inc()


async def _relay_once(
    request: Request,
    st: CoreState,
    lease: Lease,
    upstream: httpx.Response,
    headers: dict[str, str],
) -> Response:
    try:
        # The caller leaving closes the engine request (vLLM aborts it), as does a drain.
        content = await cancel_on_disconnect(
            request.receive, unless_evicted(lease, upstream.aread())
        )
        lease.replica.progressed()
    except ClientDisconnected:
        st.metrics.disconnects.inc()
        return Response(status_code=CLIENT_CLOSED)
    except Evicted:
        if lease.reason == "unhealthy":
            raise _unavailable("the engine stopped making progress; retry") from None
        raise _unavailable("the replica was drained before the answer was ready") from None
    except httpx.HTTPError:
        raise _unavailable() from None
    finally:
        await upstream.aclose()
        st.pool.release(lease)
    return Response(
        content,
        status_code=upstream.status_code,
        media_type=upstream.headers.get("content-type", "application/json"),
        headers=headers,
    )


def _relay_stream(
    st: CoreState,
    lease: Lease,
    upstream: httpx.Response,
    headers: dict[str, str],
    arrived: float | None = None,
) -> Response:
    started = False
    t0 = time.perf_counter() if arrived is None else arrived
    replica = lease.replica

    async def relay() -> AsyncIterator[bytes]:
        nonlocal started
        started = True
        finished = False
        first = True
        try:
            async with contextlib.aclosing(
                chunks(upstream, lease, st.settings.sse_keepalive_s)
            ) as body:
                async for chunk in body:
                    if chunk is not None:
                        replica.progressed()  # forward progress (core/progress.py)
                        if first:  # vLLM's first event follows prefill
                            first = False
                            lease.prefill_tokens = 0
                            ttft = time.perf_counter() - t0
                            st.metrics.ttft.observe(ttft)
                            accesslog.note(ttft_s=ttft)
                    # Comments while the engine is silent (queued, long prefill): the edge's
                    # idle timeout must not cut a stream that is only slow to start.
                    yield sse.KEEPALIVE if chunk is None else chunk
            finished = True
        except httpx.HTTPError:
            # The engine died mid-stream: say so in-band instead of cutting silently.
            yield sse.encode(completions.stream_error("engine failed mid-stream"))
            yield sse.DONE
            finished = True
        except Evicted:
            message = (
                "the engine stopped answering mid-stream"
                if lease.reason == "unhealthy"
                else "replica drained; answer cut at deadline"
            )
            yield sse.encode(completions.stream_error(message))
            yield sse.DONE
            finished = True
        finally:
            if not finished:
                st.metrics.disconnects.inc()
            st.metrics.duration.observe(time.perf_counter() - t0)
            await upstream.aclose()
            st.pool.release(lease)

    async def on_close() -> None:
        # Also when the caller left before the first byte and relay() never ran.
        if not started:
            st.metrics.disconnects.inc()
        await upstream.aclose()
        st.pool.release(lease)

    return EventStreamResponse(relay(), headers={**sse.STREAM_HEADERS, **headers},
                               on_close=on_close)  # fmt: skip


async def models(request: Request) -> Response:
    st = _state(request)
    ready = [r for r in st.pool.replicas if r.admitting] or st.pool.replicas
    if not ready:  # engine discovery has found none yet
        raise _unavailable()
    try:
        r = await ready[0].client.get("/v1/models", timeout=10.0)
    except httpx.HTTPError:
        raise _unavailable() from None
    return Response(r.content, status_code=r.status_code, media_type="application/json")


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    pool = _state(request).pool
    ready = pool.available()
    detail: dict[str, Any] = {
        "status": "ready" if ready else "starting",
        "engine": ready,
        "engine_restarts": sum(r.engine.restarts for r in pool.replicas if r.engine),
        "replicas": {r.name: r.state for r in pool.replicas},
    }
    return JSONResponse(detail, status_code=200 if ready else 503)


async def metrics(request: Request) -> Response:
    st = _state(request)
    st.metrics.observe(st.pool)
    return Response(generate_latest(st.metrics.registry), media_type=CONTENT_TYPE_LATEST)


RELAYED = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses")


def create_app(settings: CoreSettings, engine_log: IO[bytes] | None = None) -> ASGIApp:
    """The core app; raises PoolConfigError (naming the field) before anything starts."""
    replicas = load_pool(settings)
    # Engines found by DNS (core/discovery.py): the pool starts empty and the configured
    # replica is the template of every discovered one.
    template = template_from(replicas) if settings.discovery.dns_name else None
    if template is not None:
        replicas = []
    if settings.auth_token is None:
        log.warning("EDGECORE_CORE_AUTH_TOKEN is not set: any caller may use this core (dev only)")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        pool = Pool(settings, replicas, engine_log)
        app.state.core = CoreState(settings, pool, CoreMetrics.create())
        tracing.setup("edgecore-core")  # exports only with an OTLP endpoint configured
        pool.start()
        discovery = None
        if template is not None and settings.discovery.dns_name:
            discovery = Discovery(settings.discovery.dns_name, template, pool,
                                  interval_s=settings.discovery.interval_s)  # fmt: skip
            await discovery.refresh()
            discovery.start()
        try:
            yield
        finally:
            if discovery is not None:
                await discovery.stop()
            await pool.stop()
            tracing.flush()

    app = Starlette(
        routes=[
            # Relayed to the engines as they are: vLLM serves each of these.
            *(Route(p, chat_completions, methods=["POST"]) for p in RELAYED),
            Route("/v1/models", models, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            *admin.ROUTES,
        ],
        exception_handlers=dict(EXCEPTION_HANDLERS),
        lifespan=lifespan,
    )
    token = settings.auth_token.get_secret_value() if settings.auth_token else None
    key = settings.admin_key.get_secret_value() if settings.admin_key else None
    # Outside the auth check, so refused callers get a span and a log line too.
    return tracing.TraceMiddleware(
        accesslog.AccessLog(RememberDisconnect(CoreAuth(app, token, key)), service="core"),
        service="core",
    )
