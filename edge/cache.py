"""Semantic answer cache in Redis vector search (HNSW, cosine).

Entries are hashes with TAG fields for the hard partition and the conversation context;
a lookup is a KNN query pre-filtered by both, so an answer never crosses a partition.
TTL is absolute: hits do not extend it. A Redis failure never fails a request: the cache
reports a miss and stays bypassed for a short back-off.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
from redis.asyncio import Redis
from redis.commands.search.field import NumericField, TagField, VectorField
from redis.commands.search.index_definition import IndexDefinition, IndexType
from redis.commands.search.query import Query
from redis.exceptions import RedisError, ResponseError

log = logging.getLogger("edgecore.edge.cache")


@dataclass(frozen=True)
class CachedAnswer:
    content: str
    finish_reason: str
    usage: dict[str, int] | None
    model: str
    similarity: float = 1.0
    entry_id: str = ""


class CacheUnavailable(Exception):
    """Redis is down or slow; the caller bypasses the cache."""


class SemanticCache:
    def __init__(
        self,
        redis: Redis,
        *,
        index: str,
        dim: int,
        ttl_s: int,
        min_similarity: float,
        retry_after_s: float = 5.0,
    ) -> None:
        self.redis = redis
        self.index = index
        self.prefix = f"{index}:e:"
        self.dim = dim
        self.ttl_s = ttl_s
        self.min_similarity = min_similarity
        self.retry_after_s = retry_after_s
        self._index_ready = False
        self._down_until = 0.0

    @property
    def available(self) -> bool:
        return time.monotonic() >= self._down_until

    def _failed(self, exc: Exception) -> CacheUnavailable:
        log.warning("Redis unavailable, bypassing the cache for %.0fs: %s", self.retry_after_s, exc)
        self._down_until = time.monotonic() + self.retry_after_s
        self._index_ready = False
        return CacheUnavailable(str(exc))

    async def ensure_index(self) -> None:
        if self._index_ready:
            return
        fields = [
            TagField("part"),
            TagField("ctx"),
            TagField("tenant"),  # for invalidation and stats, never for matching
            TagField("model"),
            NumericField("created"),
            VectorField(
                "vec",
                "HNSW",
                {"TYPE": "FLOAT32", "DIM": self.dim, "DISTANCE_METRIC": "COSINE"},
            ),
        ]
        definition = IndexDefinition(prefix=[self.prefix], index_type=IndexType.HASH)  # type: ignore[no-untyped-call]
        try:
            await self.redis.ft(self.index).create_index(fields, definition=definition)
        except ResponseError as exc:
            if "already exists" not in str(exc).lower():
                raise
        self._index_ready = True

    async def ping(self) -> bool:
        try:
            return bool(await self.redis.ping())
        except (RedisError, OSError):
            return False

    async def lookup(
        self, vector: np.ndarray, *, partition: str, context: str
    ) -> CachedAnswer | None:
        if not self.available:
            raise CacheUnavailable("in back-off")
        query = (
            Query(f"(@part:{{{partition}}} @ctx:{{{context}}})=>[KNN 1 @vec $v AS dist]")
            .return_fields("content", "finish_reason", "usage", "model", "dist")
            .sort_by("dist")
            .paging(0, 1)
            .dialect(2)
        )
        try:
            await self.ensure_index()
            result = await self.redis.ft(self.index).search(
                query, query_params={"v": _as_bytes(vector)}
            )
        except (RedisError, OSError) as exc:
            raise self._failed(exc) from exc
        docs: list[Any] = getattr(result, "docs", [])
        if not docs:
            return None
        doc = docs[0]
        similarity = 1.0 - float(doc.dist)
        if similarity < self.min_similarity:
            return None
        return CachedAnswer(
            content=doc.content,
            finish_reason=doc.finish_reason,
            usage=json.loads(doc.usage) if doc.usage else None,
            model=doc.model,
            similarity=similarity,
            entry_id=doc.id.removeprefix(self.prefix),
        )

    def tenant_set(self, tenant: str) -> str:
        """A sorted set of the tenant's entry keys by creation time (cap and eviction)."""
        return f"{self.index}:t:{tenant}"

    async def store(
        self,
        vector: np.ndarray,
        *,
        partition: str,
        context: str,
        answer: CachedAnswer,
        tenant: str,
        max_entries: int,
    ) -> None:
        if not self.available:
            return
        key = self.prefix + uuid.uuid4().hex
        now = time.time()
        mapping: dict[str, bytes | str | int] = {
            "vec": _as_bytes(vector),
            "part": partition,
            "ctx": context,
            "tenant": tenant,
            "content": answer.content,
            "finish_reason": answer.finish_reason,
            "usage": json.dumps(answer.usage) if answer.usage else "",
            "model": answer.model,
            "created": int(now),
        }
        members = self.tenant_set(tenant)
        try:
            await self.ensure_index()
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hset(key, mapping=mapping)  # type: ignore[arg-type]  # redis-py types the key invariantly
                pipe.expire(key, self.ttl_s)  # absolute TTL: lookups never touch it
                pipe.zadd(members, {key: now})
                pipe.zremrangebyscore(members, "-inf", now - self.ttl_s)  # expired ones
                pipe.zcard(members)
                count = (await pipe.execute())[-1]
            if count > max_entries:  # over the tenant's cap: evict the oldest
                evicted: list[tuple[bytes, float]] = await self.redis.zpopmin(  # type: ignore[assignment]
                    members, count - max_entries
                )
                if evicted:
                    await self.redis.delete(*[member for member, _ in evicted])
        except (RedisError, OSError) as exc:
            raise self._failed(exc) from exc


def _as_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()
