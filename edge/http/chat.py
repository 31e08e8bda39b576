"""``POST /v1/chat/completions``: admit the request, then run it through the pipeline.

The request path itself (cache -> route -> tier -> remember, and the fallback policy) is
``edge.pipeline.EdgePipeline``, the same for every endpoint; this handler only admits
the request and logs it.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response

from edge.asks import ChatAsk
from edge.http.intake import admit, answered, new_context
from edge.services import EdgeServices
from edge.settings import EdgeSettings
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
        ask = ChatAsk(admitted.data, req)
        response = await svc.pipeline.handle(request, ctx, admitted.tenant, ask)
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
