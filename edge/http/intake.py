"""Admission for the edge's OpenAI endpoints: key, body, model, rate, slot.

Who is asking comes first, so a bad key costs no body read; then the body is parsed against
its schema, the tenant's model list and rate limits are checked, and an in-flight slot is
taken. ``release`` gives the slot back.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from edge.context import RequestContext
from edge.http.middleware import arrived
from edge.services import EdgeServices
from edge.tenancy.keys import Tenant
from shared.errors import ApiError, from_validation_error
from shared.http import json_object, read_body, request_id
from shared.streaming import Releasing

Schema = TypeVar("Schema", bound=BaseModel)


@dataclass
class Admitted(Generic[Schema]):
    tenant: Tenant
    data: dict[str, Any]
    req: Schema
    release: Callable[[], None]


def new_context(request: Request, svc: EdgeServices, tier: str, operation: str) -> RequestContext:
    return RequestContext(
        request_id=request_id(request, "edge-" + uuid.uuid4().hex),
        started=arrived(request.scope),  # overhead counts from the outermost middleware
        metrics=svc.metrics,
        tier=tier,
        operation=operation,
    )


async def admit(
    request: Request,
    svc: EdgeServices,
    ctx: RequestContext,
    schema: type[Schema],
    *,
    tokens: Callable[[Schema], int],
) -> Admitted[Schema]:
    """Parse and admit one request; errors carry the request id and are counted."""
    s = svc.settings
    try:
        tenant = svc.keys.resolve(request.headers.get("authorization"))
        ctx.tenant = tenant.name  # hashed in the access log
        body = await read_body(request, s.limits.max_body_bytes, timeout=s.limits.body_timeout_s)
        data = json_object(body)
        try:
            req = schema.model_validate(data)
        except ValidationError as exc:
            raise from_validation_error(exc) from None
        model = str(getattr(req, "model", ""))
        ctx.request_model = model
        if tenant.models is not None and model not in tenant.models:
            raise ApiError(
                403,
                f"this API key may not use model '{model}'",
                code="model_not_allowed",
                param="model",
            )
        await svc.limiter.check_rate(tenant, tokens(req))
        svc.limiter.acquire(tenant)
    except ApiError as exc:
        failed(ctx, exc)
        raise
    svc.metrics.in_flight.inc()

    def release() -> None:
        svc.limiter.release(tenant)
        svc.metrics.in_flight.dec()

    return Admitted(tenant, data, req, release)


async def answered(
    admitted: Admitted[Any], ctx: RequestContext, work: Awaitable[Response]
) -> Response:
    """``work``'s response, holding the in-flight slot until its body is sent; on an
    error the slot is given back and the error counted."""
    try:
        response = await work
    except ApiError as exc:
        admitted.release()
        failed(ctx, exc)
        raise
    except BaseException:
        admitted.release()
        raise
    return Releasing(response, admitted.release)


def failed(ctx: RequestContext, exc: ApiError) -> None:
    """An error response for this request: its id in the headers, counted by status."""
    exc.headers.setdefault("x-request-id", ctx.request_id)
    ctx.failed(exc.status)
