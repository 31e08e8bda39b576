"""Admission for the edge's OpenAI endpoints besides chat: key, body, model, rate, slot.

The same order as chat (edge/chat.py): who is asking comes first, so a bad key costs no
body read; then the body is parsed against its schema, the tenant's model list and rate
limits are checked, and an in-flight slot is taken. ``release`` gives the slot back.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from edge.replies import Meta
from edge.services import EdgeServices
from edge.tenancy.keys import Tenant
from shared.errors import ApiError, from_validation_error
from shared.http import json_object, read_body, request_id

Schema = TypeVar("Schema", bound=BaseModel)


@dataclass
class Admitted(Generic[Schema]):
    tenant: Tenant
    data: dict[str, Any]
    req: Schema
    release: Callable[[], None]


def new_meta(request: Request, tier: str) -> Meta:
    meta = Meta(
        request_id=request_id(request, "edge-" + uuid.uuid4().hex), started=time.perf_counter()
    )
    meta.tier = tier
    return meta


async def admit(
    request: Request,
    svc: EdgeServices,
    meta: Meta,
    schema: type[Schema],
    *,
    tokens: Callable[[Schema], int],
) -> Admitted[Schema]:
    """Parse and admit one request; errors carry the request id and are counted."""
    s = svc.settings
    try:
        tenant = svc.keys.resolve(request.headers.get("authorization"))
        body = await read_body(request, s.max_body_bytes, timeout=s.body_timeout_s)
        data = json_object(body)
        try:
            req = schema.model_validate(data)
        except ValidationError as exc:
            raise from_validation_error(exc) from None
        model = str(getattr(req, "model", ""))
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
        failed(svc, meta, exc)
        raise
    svc.metrics.in_flight.inc()

    def release() -> None:
        svc.limiter.release(tenant)
        svc.metrics.in_flight.dec()

    return Admitted(tenant, data, req, release)


def failed(svc: EdgeServices, meta: Meta, exc: ApiError) -> None:
    exc.headers.setdefault("x-request-id", meta.request_id)
    svc.metrics.requests.labels(meta.tier, str(exc.status)).inc()
