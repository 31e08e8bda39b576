"""Semantic answer cache in Redis vector search (HNSW, cosine).

Entries are hashes with TAG fields for the hard partition and the conversation context;
a lookup is a KNN query pre-filtered by both, so an answer never crosses a partition.
Which neighbour (if any) is served is decided by ``edge.cache.match``; each entry keeps its
own short history of verified outcomes for that. TTL is absolute: hits do not extend it.
A Redis failure never fails a request: the cache reports a miss and stays bypassed for a
short back-off.
"""

from __future__ import annotations

import base64
import hashlib
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
from redis.exceptions import RedisError, ResponseError

from edge.cache.decision import Candidate, MatchPolicy
from edge.cache.keys import normalize

log = logging.getLogger("edgecore.edge.cache")

# Append one (score, right) observation to an entry, keeping the newest ARGV[3]. An entry
# that expired meanwhile is left alone: HSET would recreate it without a TTL.
_OBSERVE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local raw = redis.call('HGET', KEYS[1], 'obs')
local obs = {}
if raw and raw ~= '' and raw ~= '[]' then obs = cjson.decode(raw) end
table.insert(obs, {tonumber(ARGV[1]), tonumber(ARGV[2])})
while #obs > tonumber(ARGV[3]) do table.remove(obs, 1) end
redis.call('HSET', KEYS[1], 'obs', cjson.encode(obs))
return #obs
"""
MAX_OBSERVATIONS = 32

# The same question, word for word, in the same partition and context: one round trip,
# no embedding. The pointer may outlive an invalidated entry; then the entry is gone and
# this answers nil.
_EXACT = """
local key = redis.call('GET', KEYS[1])
if not key then return nil end
local v = redis.call('HMGET', key, 'content', 'finish_reason', 'usage', 'model', 'prompt')
if not v[1] then return nil end
return {key, v[1], v[2], v[3], v[4], v[5]}
"""
_FIELDS = ("content", "finish_reason", "usage", "model", "prompt", "obs", "vec16", "dist")


@dataclass(frozen=True)
class CachedAnswer:
    content: str
    finish_reason: str
    usage: dict[str, Any] | None
    model: str
    similarity: float = 1.0
    entry_id: str = ""
    prompt: str = ""


class CacheUnavailable(Exception):
    """Redis is down or slow; the caller bypasses the cache."""


def connect(url: str, *, timeout_s: float) -> Redis:
    """The edge's Redis pool (the cache's and the rate limits' store), made lazily.

    RESP2, not redis-py 8's default RESP3: a search reply in RESP3 is a map of maps, and
    parsing it cost a lookup 10-30 % more CPU than the flat RESP2 reply
    (docs/benchmarks.md, "The lookup's reply parser"). Nothing here needs RESP3's pushes.
    """
    return Redis.from_url(
        url, protocol=2, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
    )


class SemanticCache:
    def __init__(
        self,
        redis: Redis,
        *,
        index: str,
        dim: int,
        ttl_s: int,
        top_k: int = 1,
        floor: float = MatchPolicy.floor,  # below it no vector is unpacked: never a candidate
        backoff_s: float = 5.0,
    ) -> None:
        self.redis = redis
        self.index = index
        self.prefix = f"{index}:e:"
        self.dim = dim
        self.ttl_s = ttl_s
        self.top_k = top_k
        self.floor = floor
        self._observe = redis.register_script(_OBSERVE)
        self._exact = redis.register_script(_EXACT)
        self.backoff_s = backoff_s  # how long a failed Redis is bypassed
        self._index_ready = False
        self._down_until = 0.0

    @property
    def available(self) -> bool:
        return time.monotonic() >= self._down_until

    def _failed(self, exc: Exception) -> CacheUnavailable:
        log.warning("Redis unavailable, bypassing the cache for %.0fs: %s", self.backoff_s, exc)
        self._down_until = time.monotonic() + self.backoff_s
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
                # EF_RUNTIME 10 (the default) lets near-duplicate entries ("... (#186)" vs
                # "... (#66)") shadow the true nearest neighbour at KNN 1; 64 finds it.
                {"TYPE": "FLOAT32", "DIM": self.dim, "DISTANCE_METRIC": "COSINE", "EF_RUNTIME": 64},
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

    def exact_key(self, partition: str, context: str, text: str) -> str:
        digest = hashlib.sha256(f"{partition}|{context}|{normalize(text)}".encode()).hexdigest()
        return f"{self.index}:x:{digest[:32]}"

    async def lookup_exact(self, *, partition: str, context: str, text: str) -> CachedAnswer | None:
        """The answer stored for exactly this question (normalised), before any embedding."""
        if not self.available:
            raise CacheUnavailable("in back-off")
        try:
            found = await self._exact(keys=[self.exact_key(partition, context, text)])
        except (RedisError, OSError) as exc:
            raise self._failed(exc) from exc
        if not found:
            return None
        key, content, finish_reason, usage, model, prompt = (_text(v) for v in found)
        return CachedAnswer(
            content=content,
            finish_reason=finish_reason,
            usage=json.loads(usage) if usage else None,
            model=model,
            entry_id=key.removeprefix(self.prefix),
            prompt=prompt,
        )

    async def lookup(
        self, vector: np.ndarray, *, partition: str, context: str
    ) -> list[tuple[Candidate, CachedAnswer]]:
        """The nearest entries in this partition and context, closest first.

        Each carries what the verifier needs (its question, a float16 copy of its vector,
        its history) in the same reply: search results cannot carry binary fields intact.
        """
        if not self.available:
            raise CacheUnavailable("in back-off")
        try:
            await self.ensure_index()
            reply = await self.redis.execute_command(  # type: ignore[no-untyped-call]
                *search_command(self.index, partition, context, self.top_k, vector)
            )
        except (RedisError, OSError) as exc:
            raise self._failed(exc) from exc
        return [hit for key, fields in search_results(reply) if (hit := self._hit(key, fields))]

    def _hit(self, key: str, fields: dict[str, str]) -> tuple[Candidate, CachedAnswer] | None:
        """A search result as a candidate and its answer; None for an entry whose TTL ran
        out between the index match and the read (it comes back without its fields)."""
        if not all(f in fields for f in ("dist", "content", "finish_reason", "model")):
            return None
        similarity = 1.0 - float(fields["dist"])
        entry_id = key.removeprefix(self.prefix)
        packed = fields.get("vec16", "")
        candidate = Candidate(
            entry_id=entry_id,
            cosine=similarity,
            prompt=fields.get("prompt", ""),
            vector=_unpack(packed) if similarity >= self.floor and packed else None,
            observations=_observations(fields.get("obs")),
        )
        usage = fields.get("usage", "")
        answer = CachedAnswer(
            content=fields["content"],
            finish_reason=fields["finish_reason"],
            usage=json.loads(usage) if usage else None,
            model=fields["model"],
            similarity=similarity,
            entry_id=entry_id,
            prompt=candidate.prompt,
        )
        return candidate, answer

    async def observe(self, entry_id: str, score: float, right: bool) -> None:
        """Record whether serving this entry at ``score`` would have been right."""
        if not self.available:
            return
        try:
            await self._observe(
                keys=[self.prefix + entry_id],
                args=[round(score, 4), int(right), MAX_OBSERVATIONS],
            )
        except (RedisError, OSError) as exc:
            raise self._failed(exc) from exc

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
            "vec16": _pack(vector),
            "part": partition,
            "ctx": context,
            "tenant": tenant,
            "content": answer.content,
            "finish_reason": answer.finish_reason,
            "usage": json.dumps(answer.usage) if answer.usage else "",
            "model": answer.model,
            "prompt": answer.prompt,
            "obs": "[]",
            "created": int(now),
        }
        members = self.tenant_set(tenant)
        try:
            await self.ensure_index()
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hset(key, mapping=mapping)  # type: ignore[arg-type]  # redis-py types the key invariantly
                pipe.expire(key, self.ttl_s)  # absolute TTL: lookups never touch it
                pipe.set(self.exact_key(partition, context, answer.prompt), key, ex=self.ttl_s)
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


def search_command(
    index: str, partition: str, context: str, top_k: int, vector: np.ndarray
) -> tuple[str | int | bytes, ...]:
    """FT.SEARCH for the ``top_k`` nearest entries within a partition and context.

    Sent as a plain command: redis-py's ``ft().search`` wrapper (a Search object, a Query
    and a Result of Documents per call) cost a lookup about a third of its CPU
    (docs/benchmarks.md, "The lookup's reply parser").
    """
    query = f"(@part:{{{partition}}} @ctx:{{{context}}})=>[KNN {top_k} @vec $v AS dist]"
    return (
        "FT.SEARCH", index, query, "PARAMS", 2, "v", _as_bytes(vector),
        "RETURN", len(_FIELDS), *_FIELDS, "SORTBY", "dist", "LIMIT", 0, top_k, "DIALECT", 2,
    )  # fmt: skip


def search_results(reply: Any) -> list[tuple[str, dict[str, str]]]:
    """FT.SEARCH's reply as (key, fields) in its order: RESP2's flat list
    ``[total, key, [field, value, ...], ...]`` or RESP3's map of ``results``."""
    if isinstance(reply, dict):
        rows = [(row[b"id"], row.get(b"extra_attributes") or {}) for row in reply[b"results"]]
        return [(_text(key), {_text(f): _text(v) for f, v in attrs.items()}) for key, attrs in rows]
    out = []
    for i in range(1, len(reply) - 1, 2):
        flat = reply[i + 1] or []
        fields = zip(flat[::2], flat[1::2], strict=True)
        out.append((_text(reply[i]), {_text(f): _text(v) for f, v in fields}))
    return out


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _pack(vector: np.ndarray) -> str:
    """float16 is plenty for the verifier's features, and base64 survives text decoding."""
    return base64.b64encode(np.asarray(vector, dtype=np.float16).tobytes()).decode()


def _unpack(packed: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(packed), dtype=np.float16).astype(np.float32)


def _observations(raw: bytes | str | None) -> tuple[tuple[float, bool], ...]:
    try:
        pairs = json.loads(raw) if raw else []
        return tuple((float(score), bool(right)) for score, right in pairs)
    except (ValueError, TypeError):  # a corrupt history only costs the adaptation
        return ()


def _as_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()
