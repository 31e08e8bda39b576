"""``POST /v1/chat/completions`` at the edge: validate, look up the cache, route, answer.

cache hit  -> answer from Redis
cache miss -> router -> edge model (onnxruntime-genai) | core (HTTP/2), stored on success
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import numpy as np
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from edge.cache.step import cache_directive, cache_probe, embed, from_cache, semantic_probe
from edge.replies import Meta
from edge.routing.router import Decision, rule
from edge.services import EdgeServices
from edge.tenancy.keys import Tenant
from edge.tiers.core import from_core
from edge.tiers.local import from_edge
from edge.upstream.pool import CoreUnavailable
from shared.errors import ApiError, from_validation_error
from shared.http import json_object, read_body, request_id
from shared.parameters import refusals
from shared.redact import redact
from shared.schemas import ChatCompletionRequest
from shared.streaming import Releasing
from shared.tracing import traced_sync

log = logging.getLogger("edgecore.edge.requests")


async def chat_completions(request: Request) -> Response:
    svc: EdgeServices = request.app.state.edge
    meta = Meta(
        request_id=request_id(request, "edge-" + uuid.uuid4().hex), started=time.perf_counter()
    )
    try:
        # Who is asking comes first: a bad key costs no body read, no model time.
        tenant = svc.keys.resolve(request.headers.get("authorization"))
        meta.tenant = tenant.name  # hashed in the access log
        data, req = await _parse(request, svc)
        if tenant.models is not None and req.model not in tenant.models:
            raise ApiError(
                403,
                f"this API key may not use model '{req.model}'",
                code="model_not_allowed",
                param="model",
            )
        await svc.limiter.check_rate(tenant, _token_estimate(req, svc))
        svc.limiter.acquire(tenant)
        svc.metrics.in_flight.inc()
    except ApiError as exc:
        exc.headers.setdefault("x-request-id", meta.request_id)
        svc.metrics.requests.labels(meta.tier, str(exc.status)).inc()
        raise

    def release() -> None:
        svc.limiter.release(tenant)
        svc.metrics.in_flight.dec()

    try:
        response = await _handle(request, svc, meta, tenant, data, req)
    except ApiError as exc:
        release()
        exc.headers.setdefault("x-request-id", meta.request_id)
        svc.metrics.requests.labels(meta.tier, str(exc.status)).inc()
        raise
    except BaseException:
        release()
        raise
    if svc.settings.log_prompts:
        log.info(
            "request %s tenant=%s tier=%s prompt=%r",
            meta.request_id,
            tenant.name,
            meta.tier,
            redact(req.prompt_text()),
        )
    return Releasing(response, release)


async def _parse(
    request: Request, svc: EdgeServices
) -> tuple[dict[str, Any], ChatCompletionRequest]:
    s = svc.settings
    body = await read_body(request, s.max_body_bytes, timeout=s.body_timeout_s)
    data = json_object(body)
    try:
        req = ChatCompletionRequest.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    return data, req


def _token_estimate(req: ChatCompletionRequest, svc: EdgeServices) -> int:
    """Charged against tokens-per-minute up front: ~4 characters per token plus the output."""
    return len(req.prompt_text()) // 4 + (req.output_limit or svc.settings.edge_max_new_tokens)


async def _handle(
    request: Request,
    svc: EdgeServices,
    meta: Meta,
    tenant: Tenant,
    data: dict[str, Any],
    req: ChatCompletionRequest,
) -> Response:
    s = svc.settings
    meta.request_model = req.model
    _check_limits(req, svc)
    policy = tenant.route_policy
    refused = refusals(data, core_multimodal=s.core_multimodal)
    if "core" in refused:  # no tier could honour it: say which parameter, do no work
        no = refused["core"]
        raise ApiError(400, no.message(), code="unsupported_parameter", param=no.param)
    # Unknown models fail here, before any work; so does a parameter the pinned tier lacks.
    ruled = rule(req, svc.router.rules, policy, refused.get("edge"))

    directive = (
        cache_directive(
            svc, req, request.headers, meta, nondeterministic=tenant.cache_nondeterministic
        )
        if tenant.cache
        else None
    )
    max_entries = tenant.cache_max_entries or s.cache_max_entries_per_tenant
    probe = await cache_probe(
        svc, req, directive, meta, tenant=tenant.name, max_entries=max_entries
    )
    if probe is not None and probe.hit is not None:  # word for word: no embedding needed
        meta.tier = "cache"
        return from_cache(svc, req, probe.hit, meta)
    needs_vector = probe is not None or (ruled is None and svc.router.needs_embedding)
    vector = await embed(svc, req) if needs_vector else None
    probe = await semantic_probe(svc, probe, vector, meta)
    if probe is not None and probe.hit is not None:
        meta.tier = "cache"
        return from_cache(svc, req, probe.hit, meta)

    decision = ruled or _route(svc, req, vector, policy)
    if decision.degraded:
        meta.degraded = decision.degraded
        svc.metrics.degraded.labels(decision.degraded).inc()
    if decision.tier == "core":
        try:
            return await from_core(request, svc, req, data, meta, probe, tenant)
        except CoreUnavailable as exc:
            if exc.reason == "core-saturated":
                svc.router.core_saturated(s.core_saturation_s)
            # A client that named the core's model gets that model or an error, never a
            # smaller model in disguise, and so does a request the edge model cannot serve
            # (tools, JSON mode); "auto" may fall back, and says so in a header.
            pinned = decision.reason in ("model", "features")  # tools/JSON: edge can't
            degrade = tenant.degrade or s.core_unavailable_policy
            if degrade == "503" or svc.local is None or pinned:
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


@traced_sync("edge.route")
def _route(
    svc: EdgeServices, req: ChatCompletionRequest, vector: np.ndarray | None, policy: str
) -> Decision:
    router = svc.router
    if not svc.core.candidates():  # every core's breaker is open: the core tier is saturated
        router.core_saturated(svc.settings.core_saturation_s)
    if svc.local is not None:
        router.edge_queue_high = svc.local.waiting >= svc.settings.edge_queue_high
    t = time.perf_counter()
    decision = router.route(req, vector, policy)
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
    if req.output_limit is not None and req.output_limit > s.max_output_tokens:
        raise ApiError(
            400,
            f"max_tokens may be at most {s.max_output_tokens}",
            param="max_tokens",
            code="max_tokens_too_large",
        )
    if len(req.prompt_text()) > s.max_prompt_chars:
        raise ApiError(
            400,
            f"prompt too long: at most {s.max_prompt_chars} characters",
            param="messages",
            code="context_length_exceeded",
        )
