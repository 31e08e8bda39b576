"""``POST /v1/chat/completions``: admit the request, then run it through the pipeline.

The request path itself (cache -> route -> tier -> remember, and the fallback policy) is
``edge.pipeline.EdgePipeline``; this handler only admits, checks limits and logs.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response

from edge.http.intake import admit, answered, new_context
from edge.services import EdgeServices
from edge.settings import EdgeSettings
from shared.errors import ApiError
from shared.redact import redact
from shared.schemas import ChatCompletionRequest

log = logging.getLogger("edgecore.edge.requests")


async def chat_completions(request: Request) -> Response:
    svc: EdgeServices = request.app.state.edge
    ctx = new_context(request, svc, "edge", "chat")
    admitted = await admit(
        request, svc, ctx, ChatCompletionRequest, tokens=lambda r: _token_estimate(r, svc.settings)
    )
    req = admitted.req

    async def handle() -> Response:
        _check_limits(req, svc.settings)
        response = await svc.pipeline.handle(request, ctx, admitted.tenant, admitted.data, req)
        if svc.settings.log_prompts:
            log.info(
                "request %s tenant=%s tier=%s prompt=%r",
                ctx.request_id, admitted.tenant.name, ctx.tier, redact(req.prompt_text()),
            )  # fmt: skip
        return response

    return await answered(admitted, ctx, handle())


def _token_estimate(req: ChatCompletionRequest, s: EdgeSettings) -> int:
    """Charged against tokens-per-minute up front: ~4 characters per token plus the output."""
    return len(req.prompt_text()) // 4 + (req.output_limit or s.local.max_new_tokens)


def _check_limits(req: ChatCompletionRequest, s: EdgeSettings) -> None:
    if len(req.messages) > s.limits.max_messages:
        raise ApiError(
            400,
            f"too many messages: at most {s.limits.max_messages}",
            param="messages",
            code="too_many_messages",
        )
    if req.output_limit is not None and req.output_limit > s.limits.max_output_tokens:
        raise ApiError(
            400,
            f"max_tokens may be at most {s.limits.max_output_tokens}",
            param="max_tokens",
            code="max_tokens_too_large",
        )
    if len(req.prompt_text()) > s.limits.max_prompt_chars:
        raise ApiError(
            400,
            f"prompt too long: at most {s.limits.max_prompt_chars} characters",
            param="messages",
            code="context_length_exceeded",
        )
