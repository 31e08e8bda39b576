"""``POST /v1/completions`` (legacy text completions), through the same pipeline as chat.

The same model names, keys, limits, router and fallback as ``/v1/chat/completions``; what
differs is the ``CompletionAsk`` (``edge.asks``): the edge model continues the prompt as
it is, the core gets the request as it is, and nothing is cached
(``x-edgecore-cache: bypass``).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from edge.asks import CompletionAsk
from edge.http.intake import admit, answered, new_context
from edge.services import EdgeServices
from shared.schemas import CompletionRequest


async def text_completions(request: Request) -> Response:
    svc: EdgeServices = request.app.state.edge
    ctx = new_context(request, svc, "edge", "text_completion")
    ctx.cache = "bypass"
    admitted = await admit(
        request, svc, ctx, CompletionRequest,
        tokens=lambda r: len(str(r.prompt)) // 4 + (r.max_tokens or 0),
    )  # fmt: skip
    ask = CompletionAsk(admitted.data, admitted.req)
    return await answered(admitted, ctx, svc.pipeline.handle(request, ctx, admitted.tenant, ask))
