"""The cache step of a chat request: embed, look up, and later store the answer."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from starlette.datastructures import Headers
from starlette.responses import Response

from edge.cache import keys as cache_key
from edge.cache.match import Match, normalize
from edge.cache.store import CachedAnswer, CacheUnavailable
from edge.replies import Meta, first_token, json_answer, observe, once, sse_answer, text_events
from edge.services import EdgeServices
from shared import completions
from shared.schemas import ChatCompletionRequest
from shared.tracing import traced


@dataclass
class CacheProbe:
    vector: np.ndarray | None  # set after the exact-match step, once embedded
    partition: str
    context: str
    lookup: bool
    text: str = ""  # the last message: what the verifier compares
    tenant: str = "default"
    max_entries: int = 10_000
    hit: CachedAnswer | None = None
    # A verified neighbour that was not served: the fresh answer will tell if it was right.
    candidate: CachedAnswer | None = None
    match: Match | None = None


def _cache_directive(headers: Headers) -> str:
    """'off' (neither read nor write), 'refresh' (write only) or 'on'."""
    explicit = headers.get("x-edgecore-cache", "").strip().lower()
    if explicit in ("off", "refresh"):
        return explicit
    cache_control = headers.get("cache-control", "").lower()
    if "no-store" in cache_control:
        return "off"
    if "no-cache" in cache_control:
        return "refresh"
    return "on"


def cache_directive(
    svc: EdgeServices,
    req: ChatCompletionRequest,
    headers: Headers,
    meta: Meta,
    *,
    nondeterministic: bool = False,
) -> str | None:
    """'on' or 'refresh' when this request may use the cache, else None (recorded).

    ``nondeterministic``: the tenant opted in to caching sampled (temperature > 0) answers.
    """
    if svc.cache is None or svc.embedder is None:
        return None
    directive = _cache_directive(headers)
    only_deterministic = svc.settings.cache_only_deterministic and not nondeterministic
    if directive == "off" or not cache_key.is_cacheable(req, only_deterministic=only_deterministic):
        meta.cache = "bypass"
        svc.metrics.cache.labels("bypass").inc()
        return None
    return directive


@traced("edge.embed")
async def embed(svc: EdgeServices, req: ChatCompletionRequest) -> np.ndarray | None:
    """The conversation's embedding (shared by the cache and the router); None on failure."""
    if svc.embedder is None:
        return None
    text = cache_key.conversation_text(req.messages, svc.settings.cache_context_messages)
    t = time.perf_counter()
    try:
        return await asyncio.wait_for(svc.embedder.embed(text), timeout=2.0)
    except Exception:  # the cache and the learned router are bypassed; serving goes on
        svc.metrics.embed_failures.inc()
        return None
    finally:
        svc.metrics.embed_seconds.observe(time.perf_counter() - t)


@traced("edge.cache.lookup")
async def cache_probe(
    svc: EdgeServices,
    req: ChatCompletionRequest,
    directive: str | None,
    meta: Meta,
    *,
    tenant: str,
    max_entries: int,
) -> CacheProbe | None:
    """The cache step before any embedding: the same question, word for word."""
    if directive is None or svc.cache is None or svc.embedder is None:
        return None
    probe = CacheProbe(
        vector=None,
        partition=cache_key.partition_key(req, tenant=tenant, embedder_id=svc.embedder.model_id),
        context=cache_key.context_key(req.messages),
        lookup=directive == "on",
        text=req.messages[-1].text(),
        tenant=tenant,
        max_entries=max_entries,
    )
    if not probe.lookup:
        meta.cache = "refresh"
        return probe
    t = time.perf_counter()
    try:
        probe.hit = await asyncio.wait_for(
            svc.cache.lookup_exact(
                partition=probe.partition, context=probe.context, text=probe.text
            ),
            svc.settings.redis_timeout_s,
        )
    except (TimeoutError, CacheUnavailable):
        _failed(svc, meta)
        return None
    if probe.hit is not None:
        svc.metrics.cache_lookup_seconds.observe(time.perf_counter() - t)
        svc.metrics.cache_match.labels("exact").inc()
        _outcome(svc, meta, probe, "exact 1.000")
    return probe


@traced("edge.cache.semantic")
async def semantic_probe(
    svc: EdgeServices, probe: CacheProbe | None, vector: np.ndarray | None, meta: Meta
) -> CacheProbe | None:
    """After embedding: the nearest entries in the partition, and the verifier's decision."""
    if probe is None or svc.cache is None:
        return probe
    if vector is None:
        _failed(svc, meta)
        return None
    probe.vector = vector
    if not probe.lookup:
        return probe
    m = svc.metrics
    t = time.perf_counter()
    try:
        found = await asyncio.wait_for(
            svc.cache.lookup(vector, partition=probe.partition, context=probe.context),
            svc.settings.redis_timeout_s,
        )
    except (TimeoutError, CacheUnavailable):
        _failed(svc, meta)
        return None
    candidates, draw = [c for c, _ in found], random.random()
    if svc.matcher.blocking and candidates:
        # A cross-encoder run takes milliseconds: off the event loop.
        decide = svc.matcher.decide
        match = await asyncio.to_thread(decide, vector, probe.text, candidates, draw=draw)
    else:
        match = svc.matcher.decide(vector, probe.text, candidates, draw=draw)
    m.cache_lookup_seconds.observe(time.perf_counter() - t)
    m.cache_match.labels(match.reason).inc()
    if found:
        m.cache_candidate_similarity.observe(found[0][0].cosine)
    if match.reason in ("verified", "rejected", "explore"):
        m.cache_verifier_score.labels(match.reason).observe(match.score)
    answers = {c.entry_id: a for c, a in found}
    if match.candidate is not None:
        answer = answers[match.candidate.entry_id]
        if match.serve:
            probe.hit = answer
        elif match.reason in ("rejected", "explore"):
            probe.candidate, probe.match = answer, match
    _outcome(svc, meta, probe, f"{match.reason} {match.score:.3f}")
    return probe


def _failed(svc: EdgeServices, meta: Meta) -> None:
    """Redis or the embedder failed: serve without the cache (and store nothing)."""
    meta.cache = "error"
    svc.metrics.cache.labels("error").inc()
    return None


def _outcome(svc: EdgeServices, meta: Meta, probe: CacheProbe, how: str) -> None:
    meta.cache = "hit" if probe.hit else "miss"
    svc.metrics.cache.labels(meta.cache).inc()
    if probe.hit is not None:
        svc.metrics.cache_similarity.observe(probe.hit.similarity)
        meta.extra_headers["x-edgecore-cache-match"] = how


async def _agrees(svc: EdgeServices, cached: str, fresh: str) -> bool:
    """Would serving the cached answer have been right? Compared with the fresh one."""
    if normalize(cached) == normalize(fresh):
        return True
    if svc.embedder is None:
        return False
    a, b = await asyncio.gather(svc.embedder.embed(cached), svc.embedder.embed(fresh))
    return float(np.dot(a, b)) >= svc.settings.cache_answer_agreement


def remember(
    svc: EdgeServices,
    probe: CacheProbe | None,
    content: str,
    finish_reason: str | None,
    usage: dict[str, Any] | None,
    model: str,
) -> None:
    if probe is None or svc.cache is None or finish_reason != "stop" or not content:
        return
    vector = probe.vector
    if vector is None:  # answered from the exact step's miss without an embedding
        return
    cache = svc.cache
    answer = CachedAnswer(
        content=content, finish_reason=finish_reason, usage=usage, model=model, prompt=probe.text
    )
    timeout = svc.settings.redis_timeout_s * 4

    async def store() -> None:
        with contextlib.suppress(CacheUnavailable, asyncio.TimeoutError):
            candidate, match = probe.candidate, probe.match
            if candidate is not None and match is not None:
                agreed = await _agrees(svc, candidate.content, content)
                svc.metrics.cache_feedback.labels(str(agreed).lower()).inc()
                await asyncio.wait_for(
                    cache.observe(candidate.entry_id, match.score, agreed), timeout
                )
            # Stored even when the neighbour agreed: this wording then gets its own exact
            # key, so its repeats hit every time instead of waiting on the neighbour's
            # confidence (and its explorations). The tenant's entry cap bounds the copies.
            await asyncio.wait_for(
                cache.store(
                    vector,
                    partition=probe.partition,
                    context=probe.context,
                    answer=answer,
                    tenant=probe.tenant,
                    max_entries=probe.max_entries,
                ),
                timeout,
            )

    svc.spawn(store())


def from_cache(
    svc: EdgeServices, req: ChatCompletionRequest, hit: CachedAnswer, meta: Meta
) -> Response:
    cid = completions.new_id()
    meta.extra_headers["x-edgecore-cache-similarity"] = f"{hit.similarity:.4f}"
    meta.extra_headers["x-edgecore-cache-entry"] = hit.entry_id  # for /admin/cache
    usage = completions.cached_usage(hit.usage)
    meta.response_model = hit.model
    if req.stream:
        first_token(svc.metrics, meta)  # the whole answer is in hand
    observe(svc.metrics, meta, usage)
    if not req.stream:
        body = completions.completion(
            id=cid,
            model=hit.model,
            content=hit.content,
            finish_reason=hit.finish_reason,
            usage=usage,
        )
        return json_answer(body, meta)

    async def on_error(exc: BaseException) -> str:
        return "cache read failed"

    events = text_events(
        once(hit.content),
        id=cid,
        model=hit.model,
        include_usage=req.include_usage,
        finish=lambda: (hit.finish_reason, usage),
        on_error=on_error,
    )
    return sse_answer(events, meta)
