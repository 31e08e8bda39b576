"""``POST /v1/chat/completions`` at the edge: validate, look up the cache, route, answer.

cache hit  -> answer from Redis
cache miss -> router -> edge model (onnxruntime-genai) | core (HTTP/2), stored on success
"""

from __future__ import annotations

import time
import uuid

import numpy as np
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from edge.answers import Meta
from edge.cache_flow import cache_directive, cache_probe, embed, from_cache
from edge.core_client import CoreUnavailable
from edge.router import Decision, rule
from edge.state import EdgeServices
from edge.tier_core import from_core
from edge.tier_edge import from_edge
from shared.errors import ApiError, from_validation_error
from shared.http import json_object, read_body, request_id
from shared.schemas import ChatCompletionRequest


async def chat_completions(request: Request) -> Response:
    svc: EdgeServices = request.app.state.edge
    meta = Meta(
        request_id=request_id(request, "edge-" + uuid.uuid4().hex), started=time.perf_counter()
    )
    try:
        return await _handle(request, svc, meta)
    except ApiError as exc:
        exc.headers.setdefault("x-request-id", meta.request_id)
        svc.metrics.requests.labels(meta.tier, str(exc.status)).inc()
        raise


async def _handle(request: Request, svc: EdgeServices, meta: Meta) -> Response:
    s = svc.settings
    data = json_object(await read_body(request, s.max_body_bytes))
    try:
        req = ChatCompletionRequest.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    _check_limits(req, svc)
    ruled = rule(req, svc.router.rules)  # unknown models fail here, before any work

    directive = cache_directive(svc, req, request.headers, meta)
    needs_vector = directive is not None or (ruled is None and svc.router.needs_embedding)
    vector = await embed(svc, req) if needs_vector else None
    probe = await cache_probe(svc, req, directive, vector, meta)
    if probe is not None and probe.hit is not None:
        meta.tier = "cache"
        return from_cache(svc, req, probe.hit, meta)

    decision = ruled or _route(svc, req, vector)
    if decision.degraded:
        meta.degraded = decision.degraded
        svc.metrics.degraded.labels(decision.degraded).inc()
    if decision.tier == "core":
        try:
            return await from_core(request, svc, req, data, meta, probe)
        except CoreUnavailable as exc:
            if exc.reason == "core-saturated":
                svc.router.core_saturated(s.core_saturation_s)
            # A client that named the core's model gets that model or an error, never a
            # smaller model in disguise, and so does a request the edge model cannot serve
            # (tools, JSON mode); "auto" may fall back, and says so in a header.
            pinned = decision.reason in ("model", "features")  # tools/JSON: edge can't
            if s.core_unavailable_policy == "503" or svc.local is None or pinned:
                raise ApiError(
                    503,
                    f"the core is unavailable ({exc.reason}); retry later",
                    code="core_unavailable",
                    headers={"retry-after": str(s.retry_after_s)},
                ) from None
            meta.degraded = exc.reason
            svc.metrics.degraded.labels(exc.reason).inc()
            decision = Decision("edge", "fallback")
    svc.metrics.route.labels(decision.tier, decision.reason).inc()
    return await from_edge(request, svc, req, meta, probe)


def _route(svc: EdgeServices, req: ChatCompletionRequest, vector: np.ndarray | None) -> Decision:
    router = svc.router
    if svc.local is not None:
        router.edge_queue_high = svc.local.waiting >= svc.settings.edge_queue_high
    t = time.perf_counter()
    decision = router.route(req, vector)
    svc.metrics.route_seconds.observe(time.perf_counter() - t)
    if decision.score is not None:
        svc.metrics.route_score.observe(decision.score)
    return decision


def _check_limits(req: ChatCompletionRequest, svc: EdgeServices) -> None:
    s = svc.settings
    if len(req.messages) > s.max_messages:
        raise ApiError(
            400,
            f"too many messages: at most {s.max_messages}",
            param="messages",
            code="too_many_messages",
        )
    if len(req.prompt_text()) > s.max_prompt_chars:
        raise ApiError(
            400,
            f"prompt too long: at most {s.max_prompt_chars} characters",
            param="messages",
            code="context_length_exceeded",
        )
