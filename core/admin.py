"""The core team's API (``/admin/*``, behind the admin key, see core/auth.py): replicas with
state and load, drain, undrain, restart."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from core.admission import PRIORITIES
from core.pool import Pool, UnknownReplica
from shared.errors import ApiError


class DrainRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    deadline_s: float | None = Field(
        default=None, gt=0, description="default: POOL__DRAIN_TIMEOUT_S"
    )
    then: Literal["idle", "stop"] = "idle"


def _pool(request: Request) -> Pool:
    pool: Pool = request.app.state.core.pool
    return pool


async def _body(request: Request) -> DrainRequest:
    raw = await request.body()
    try:
        return DrainRequest.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        fields = ", ".join(".".join(str(p) for p in e["loc"]) or "body" for e in exc.errors())
        raise ApiError(400, f"invalid field(s): {fields}", code="invalid_request") from None


def _overview(pool: Pool) -> dict[str, Any]:
    adm = pool.admission
    return {
        "replicas": pool.status(),
        "queues": {p: {"depth": adm.depth(p), "limit": adm.limits[p]} for p in PRIORITIES},
    }


async def list_replicas(request: Request) -> Response:
    return JSONResponse(_overview(_pool(request)))


def _named(request: Request) -> str:
    name: str = request.path_params["name"]
    if name not in _pool(request).by_name:
        raise ApiError(404, f"no replica named {name!r}", code="unknown_replica")
    return name


async def drain(request: Request) -> Response:
    body = await _body(request)
    replica = _pool(request).drain(_named(request), body.deadline_s, body.then)
    return JSONResponse(replica.status(), status_code=202)


async def undrain(request: Request) -> Response:
    return JSONResponse(_pool(request).undrain(_named(request)).status())


async def restart(request: Request) -> Response:
    body = await _body(request)
    try:
        replica = _pool(request).restart(_named(request), body.deadline_s)
    except (ValueError, UnknownReplica) as exc:
        raise ApiError(409, str(exc), code="not_restartable") from None
    return JSONResponse(replica.status(), status_code=202)


ROUTES = [
    Route("/admin/replicas", list_replicas, methods=["GET"]),
    Route("/admin/replicas/{name}/drain", drain, methods=["POST"]),
    Route("/admin/replicas/{name}/undrain", undrain, methods=["POST"]),
    Route("/admin/replicas/{name}/restart", restart, methods=["POST"]),
]
