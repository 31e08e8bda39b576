"""``/admin/cache``: stats and invalidation by filter, behind an admin key.

    GET    /admin/cache/stats                      entries, by tenant
    POST   /admin/cache/invalidate                 {"tenant", "model", "older_than_s", "all"}
    DELETE /admin/cache/entries/{entry_id}         one entry (id from x-edgecore-cache-entry)

Admin keys are configured as hashes (``EDGECORE_EDGE_ADMIN_KEYS``); tenant keys never work
here. With none configured the admin API answers 404, as if it did not exist.
"""

from __future__ import annotations

import re
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from redis.commands.search.query import Query
from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from edge.cache.match import Matcher
from edge.cache.store import SemanticCache
from edge.services import EdgeServices
from edge.tenancy.keys import hash_key
from shared.errors import ApiError, from_validation_error
from shared.http import json_object, read_body

_PAGE = 500


class Invalidate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant: str | None = None
    model: str | None = None
    older_than_s: float | None = Field(default=None, ge=0)
    all: bool = False


def tag(value: str) -> str:
    """A TAG query value with RediSearch's punctuation escaped."""
    return re.sub(r"([^A-Za-z0-9_])", r"\\\1", value)


def filter_query(f: Invalidate, now: float) -> str:
    parts = []
    if f.tenant is not None:
        parts.append(f"@tenant:{{{tag(f.tenant)}}}")
    if f.model is not None:
        parts.append(f"@model:{{{tag(f.model)}}}")
    if f.older_than_s is not None:
        parts.append(f"@created:[-inf ({int(now - f.older_than_s)}]")
    return " ".join(parts) or "*"


async def invalidate(cache: SemanticCache, f: Invalidate) -> int:
    """Delete every entry matching the filter; returns how many."""
    await cache.ensure_index()
    query_text = filter_query(f, time.time())
    deleted = 0
    while True:
        query = Query(query_text).no_content().paging(0, _PAGE).dialect(2)
        result = await cache.redis.ft(cache.index).search(query)
        keys = [doc.id for doc in getattr(result, "docs", [])]
        if not keys:
            return deleted
        tenants = await _tenants_of(cache, keys)
        async with cache.redis.pipeline(transaction=False) as pipe:
            pipe.delete(*keys)
            for key, tenant in zip(keys, tenants, strict=True):
                if tenant:
                    pipe.zrem(cache.tenant_set(tenant), key)
            await pipe.execute()
        deleted += len(keys)


async def _tenants_of(cache: SemanticCache, keys: list[str]) -> list[str]:
    async with cache.redis.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.hget(key, "tenant")
        values = await pipe.execute()
    return [v.decode() if isinstance(v, bytes) else (v or "") for v in values]


async def stats(cache: SemanticCache, matcher: Matcher) -> dict[str, Any]:
    await cache.ensure_index()
    info = await cache.redis.ft(cache.index).info()  # type: ignore[no-untyped-call]
    by_tenant: dict[str, int] = {}
    cursor = 0
    pattern = f"{cache.index}:t:*"
    while True:
        cursor, names = await cache.redis.scan(cursor, match=pattern, count=500)
        for name in names:
            label = (name.decode() if isinstance(name, bytes) else name).rsplit(":t:", 1)[1]
            by_tenant[label] = int(await cache.redis.zcard(name))
        if cursor == 0:
            break
    return {
        "index": cache.index,
        "entries": int(info.get("num_docs", 0)),
        "by_tenant": by_tenant,
        "ttl_s": cache.ttl_s,
        "matching": {
            "verifier": matcher.verifier.version if matcher.verifier else None,
            "cross_encoder": (
                matcher.verifier.cross.version
                if matcher.verifier is not None and matcher.verifier.cross is not None
                else None
            ),
            "false_hit_budget": matcher.policy.delta,
            "threshold": matcher.threshold,
            "candidate_floor": matcher.policy.floor,
            "respell": matcher.speller is not None,  # the second look at typos
        },
    }


def _authorize(request: Request) -> SemanticCache:
    svc: EdgeServices = request.app.state.edge
    allowed = set(svc.settings.admin_keys)
    if not allowed:
        raise ApiError(404, "Not Found")
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or hash_key(key.strip()) not in allowed:
        raise ApiError(401, "admin key required", code="invalid_admin_key")
    if svc.cache is None:
        raise ApiError(503, "the cache is disabled", code="cache_disabled")
    return svc.cache


async def _stats(request: Request) -> Response:
    cache = _authorize(request)
    try:
        return JSONResponse(await stats(cache, request.app.state.edge.matcher))
    except RedisError as exc:
        raise ApiError(503, f"Redis unavailable: {exc}", code="redis_unavailable") from None


async def _invalidate(request: Request) -> Response:
    cache = _authorize(request)
    try:
        f = Invalidate.model_validate(json_object(await read_body(request, 64 * 1024)))
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    if not f.all and f.tenant is None and f.model is None and f.older_than_s is None:
        raise ApiError(400, 'name a filter (tenant, model, older_than_s) or "all": true')
    try:
        return JSONResponse({"deleted": await invalidate(cache, f)})
    except RedisError as exc:
        raise ApiError(503, f"Redis unavailable: {exc}", code="redis_unavailable") from None


async def _delete_entry(request: Request) -> Response:
    cache = _authorize(request)
    entry_id = request.path_params["entry_id"]
    if not re.fullmatch(r"[0-9a-f]{32}", entry_id):
        raise ApiError(404, "no such entry", code="entry_not_found")
    key = cache.prefix + entry_id
    try:
        tenant = await cache.redis.hget(key, "tenant")
        deleted = int(await cache.redis.delete(key))
        if tenant:
            name = tenant.decode() if isinstance(tenant, bytes) else str(tenant)
            await cache.redis.zrem(cache.tenant_set(name), key)
    except RedisError as exc:
        raise ApiError(503, f"Redis unavailable: {exc}", code="redis_unavailable") from None
    if not deleted:
        raise ApiError(404, "no such entry", code="entry_not_found")
    return JSONResponse({"deleted": 1})


ROUTES = [
    Route("/admin/cache/stats", _stats, methods=["GET"]),
    Route("/admin/cache/invalidate", _invalidate, methods=["POST"]),
    Route("/admin/cache/entries/{entry_id}", _delete_entry, methods=["DELETE"]),
]
