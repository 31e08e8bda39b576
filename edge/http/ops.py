"""Operational endpoints: the model list, the OpenAPI document, health, readiness, metrics."""

from __future__ import annotations

from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from edge.services import EdgeServices


async def models(request: Request) -> Response:
    svc: EdgeServices = request.app.state.edge
    tenant = svc.keys.resolve(request.headers.get("authorization"))
    s = svc.settings
    owned = {s.auto_model: "edgecore", s.edge_model: "edgecore-edge", s.core_model: "edgecore-core"}
    if svc.embedder is not None:
        owned[s.embed.model] = "edgecore-edge"
    owned.update({name: "edgecore-core" for name in s.core.embed_models})
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": by}
        for name, by in owned.items()
        if tenant.models is None or name in tenant.models
    ]
    return JSONResponse({"object": "list", "data": data})


async def openapi_json(request: Request) -> Response:
    return JSONResponse(request.app.state.openapi)


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    """200 while some tier can answer; ``degraded`` lists what is missing."""
    svc: EdgeServices = request.app.state.edge
    cores = svc.core.status()  # from the background probes: readiness never waits on a core
    core_ok = any(c["healthy"] and c["breaker"] != "open" for c in cores)
    redis_ok = svc.cache is not None and await svc.cache.ping()
    checks: dict[str, Any] = {
        "core": core_ok,
        "edge_model": svc.local is not None,
        "embedder": svc.embedder is not None,
        "redis": redis_ok,
    }
    degraded = [name for name, ok in checks.items() if not ok]
    serving = core_ok or svc.local is not None
    body = {
        "status": ("degraded" if degraded else "ready") if serving else "unavailable",
        "checks": checks,
        "degraded": degraded,
        "cores": cores,
    }
    return JSONResponse(body, status_code=200 if serving else 503)


async def metrics_endpoint(request: Request) -> Response:
    svc: EdgeServices = request.app.state.edge
    svc.metrics.observe_cores(svc.core)
    return Response(generate_latest(svc.metrics.registry), media_type=CONTENT_TYPE_LATEST)


ROUTES = [
    Route("/v1/models", models, methods=["GET"]),
    Route("/openapi.json", openapi_json, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics_endpoint, methods=["GET"]),
]
