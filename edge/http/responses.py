"""``POST /v1/responses``: OpenAI's Responses API, through the same pipeline as chat.

What differs is the ``ResponsesAsk`` (``edge.asks``): only the core serves it (vLLM), the
cache takes no part, and the edge model's name gets a 400. With ``core_responses`` off, or
a core whose engines lack the endpoint, the answer is a 501.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from edge.asks import ResponsesAsk, responses_not_served
from edge.http.intake import admit, answered, failed, new_context
from edge.services import EdgeServices
from shared.schemas import ResponsesRequest


async def responses(request: Request) -> Response:
    svc: EdgeServices = request.app.state.edge
    ctx = new_context(request, svc, "core", "responses")
    ctx.cache = "bypass"
    if not svc.settings.core.responses:
        exc = responses_not_served()
        failed(ctx, exc)
        raise exc
    admitted = await admit(
        request, svc, ctx, ResponsesRequest,
        tokens=lambda r: 1024 + (r.max_output_tokens or 0),
    )  # fmt: skip
    ask = ResponsesAsk(admitted.data, admitted.req)
    return await answered(admitted, ctx, svc.pipeline.handle(request, ctx, admitted.tenant, ask))
