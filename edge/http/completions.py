"""``POST /v1/completions`` (legacy text completions), routed like chat.

The same model names, keys, limits, router and fallback as ``/v1/chat/completions`` (the
pipeline's rules, router and fallback policy): the edge model continues the prompt as it
is (no chat template), the core gets the request as it is. Not cached: a completion
continues raw text, where a near-duplicate prompt is not the same question
(``x-edgecore-cache: bypass``).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from edge.context import RequestContext
from edge.http.intake import Admitted, admit, answered, new_context
from edge.services import EdgeServices
from edge.upstream.pool import CoreUnavailable
from shared.errors import ApiError
from shared.parameters import completion_refusals
from shared.schemas import CompletionRequest


async def text_completions(request: Request) -> Response:
    svc: EdgeServices = request.app.state.edge
    ctx = new_context(request, svc, "edge", "text_completion")
    ctx.cache = "bypass"
    admitted = await admit(
        request, svc, ctx, CompletionRequest,
        tokens=lambda r: len(str(r.prompt)) // 4 + (r.max_tokens or 0),
    )  # fmt: skip
    return await answered(admitted, ctx, _handle(request, svc, ctx, admitted))


async def _handle(
    request: Request, svc: EdgeServices, ctx: RequestContext, admitted: Admitted[CompletionRequest]
) -> Response:
    s, pipeline = svc.settings, svc.pipeline
    req, data, tenant = admitted.req, admitted.data, admitted.tenant
    if req.max_tokens is not None and req.max_tokens > s.limits.max_output_tokens:
        raise ApiError(
            400, f"max_tokens may be at most {s.limits.max_output_tokens}", param="max_tokens",
            code="max_tokens_too_large",
        )  # fmt: skip
    if len(str(req.prompt)) > s.limits.max_prompt_chars:
        raise ApiError(
            400, f"prompt too long: at most {s.limits.max_prompt_chars} characters", param="prompt",
            code="context_length_exceeded",
        )  # fmt: skip
    refused = completion_refusals(data)
    if "core" in refused:
        no = refused["core"]
        raise ApiError(400, no.message(), code="unsupported_parameter", param=no.param)
    chat = req.as_chat()  # what the rules and the router read
    decision = pipeline.rules(chat, tenant, refused.get("edge"))
    if decision is None:
        vector = await pipeline.cache.embed(chat) if pipeline.router.needs_embedding else None
        decision = pipeline.degraded(pipeline.route(chat, vector), ctx)
    if decision.tier == "core":
        payload = {**data, "model": s.core_model}
        try:
            return await pipeline.core.forward(
                request, ctx, payload, path="/v1/completions", tenant=tenant
            )
        except CoreUnavailable as exc:
            decision = pipeline.fallback(exc, decision, tenant, ctx)
    svc.metrics.route.labels(decision.tier, decision.reason).inc()
    return await pipeline.local.complete(request, req, ctx)
