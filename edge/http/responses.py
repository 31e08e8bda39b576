"""``POST /v1/responses``: OpenAI's Responses API, forwarded to the core (vLLM serves it).

The edge model and the cache do not take part: a response may carry tools, state and
reasoning items that a small model or a stored answer cannot honour. With
``core_responses`` off, or a core whose engines lack the endpoint, the answer is a 501.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool
from starlette.requests import Request
from starlette.responses import Response

from edge.context import RequestContext
from edge.http.intake import Admitted, admit, answered, failed, new_context
from edge.services import EdgeServices
from edge.upstream.pool import CoreUnavailable
from shared.errors import ApiError


class ResponsesRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    stream: StrictBool = False


def _not_served() -> ApiError:
    return ApiError(
        501,
        "the Responses API is not served here; use /v1/chat/completions",
        code="not_implemented",
    )


async def responses(request: Request) -> Response:
    svc: EdgeServices = request.app.state.edge
    s = svc.settings
    ctx = new_context(request, svc, "core", "responses")
    ctx.cache = "bypass"
    if not s.core.responses:
        exc = _not_served()
        failed(ctx, exc)
        raise exc
    admitted = await admit(request, svc, ctx, ResponsesRequest, tokens=lambda r: 1024)
    return await answered(admitted, ctx, _forward(request, svc, ctx, admitted))


async def _forward(
    request: Request, svc: EdgeServices, ctx: RequestContext, admitted: Admitted[ResponsesRequest]
) -> Response:
    s, model = svc.settings, admitted.req.model
    if model == s.edge_model:
        raise ApiError(
            400,
            f"{model} does not serve the Responses API; use model={s.core_model}",
            code="unsupported_model",
            param="model",
        )
    if model not in (s.auto_model, s.core_model):
        raise ApiError(
            404, f"The model '{model}' does not exist.", code="model_not_found", param="model"
        )
    payload = {**admitted.data, "model": s.core_model}
    try:
        return await svc.pipeline.core.forward(
            request, ctx, payload, path="/v1/responses", tenant=admitted.tenant
        )
    except CoreUnavailable as exc:
        raise exc.error(s.retry_after_s) from None
    except ApiError as exc:
        if exc.status in (404, 405):  # engines without the endpoint
            raise _not_served() from None
        raise
