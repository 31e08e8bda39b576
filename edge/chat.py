"""``POST /v1/chat/completions`` at the edge: validate, look up the cache, route, answer.

cache hit  -> answer from Redis
cache miss -> router -> edge model (onnxruntime-genai) | core (HTTP/2), stored on success
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response

from edge import cache_key
from edge.answers import Meta, json_answer, once, sse_answer, text_events
from edge.cache import CachedAnswer, CacheUnavailable
from edge.core_client import CoreUnavailable
from edge.local_model import EdgeBusy, Generation, PromptTooLong
from edge.router import Decision, decide
from edge.state import EdgeServices
from shared import completions, sse
from shared.disconnect import ClientDisconnected, cancel_on_disconnect
from shared.errors import ApiError, from_validation_error
from shared.http import json_object, read_body, request_id
from shared.schemas import ChatCompletionRequest

CLIENT_CLOSED = 499  # nginx's convention; nobody reads it, but logs and metrics do


@dataclass
class CacheProbe:
    vector: np.ndarray
    partition: str
    context: str
    lookup: bool
    hit: CachedAnswer | None = None


async def chat_completions(request: Request) -> Response:
    svc: EdgeServices = request.app.state.edge
    meta = Meta(
        request_id=request_id(request, "edge-" + uuid.uuid4().hex), started=time.perf_counter()
    )
    try:
        return await _handle(request, svc, meta)
    except ApiError as exc:
        exc.headers.setdefault("x-request-id", meta.request_id)
        svc.metrics.requests.labels(meta.tier, str(exc.status)).inc()
        raise


async def _handle(request: Request, svc: EdgeServices, meta: Meta) -> Response:
    s = svc.settings
    data = json_object(await read_body(request, s.max_body_bytes))
    try:
        req = ChatCompletionRequest.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    _check_limits(req, svc)
    decision = decide(req, svc.rules)

    probe = await _cache_probe(svc, req, request.headers, meta)
    if probe is not None and probe.hit is not None:
        meta.tier = "cache"
        return _from_cache(svc, req, probe.hit, meta)

    if decision.tier == "core":
        try:
            return await _from_core(request, svc, req, data, meta, probe)
        except CoreUnavailable as exc:
            if s.core_unavailable_policy == "503" or svc.local is None:
                raise ApiError(
                    503,
                    f"the core is unavailable ({exc.reason}); retry later",
                    code="core_unavailable",
                    headers={"retry-after": str(s.retry_after_s)},
                ) from None
            meta.degraded = exc.reason
            svc.metrics.degraded.labels(exc.reason).inc()
            decision = Decision("edge", "fallback")
    svc.metrics.route.labels(decision.tier, decision.reason).inc()
    return await _from_edge(request, svc, req, meta, probe)


def _check_limits(req: ChatCompletionRequest, svc: EdgeServices) -> None:
    s = svc.settings
    if len(req.messages) > s.max_messages:
        raise ApiError(
            400,
            f"too many messages: at most {s.max_messages}",
            param="messages",
            code="too_many_messages",
        )
    if len(req.prompt_text()) > s.max_prompt_chars:
        raise ApiError(
            400,
            f"prompt too long: at most {s.max_prompt_chars} characters",
            param="messages",
            code="context_length_exceeded",
        )


# --- cache ----------------------------------------------------------------------------------


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


async def _cache_probe(
    svc: EdgeServices, req: ChatCompletionRequest, headers: Headers, meta: Meta
) -> CacheProbe | None:
    s = svc.settings
    if svc.cache is None or svc.embedder is None:
        return None
    directive = _cache_directive(headers)
    if directive == "off" or not cache_key.is_cacheable(
        req, only_deterministic=s.cache_only_deterministic
    ):
        meta.cache = "bypass"
        svc.metrics.cache.labels("bypass").inc()
        return None
    t = time.perf_counter()
    try:
        vector = await asyncio.wait_for(
            svc.embedder.embed(cache_key.conversation_text(req.messages, s.cache_context_messages)),
            timeout=2.0,
        )
    except Exception:  # embedding failed: bypass the cache, keep serving
        meta.cache = "error"
        svc.metrics.cache.labels("error").inc()
        return None
    finally:
        svc.metrics.embed_seconds.observe(time.perf_counter() - t)
    probe = CacheProbe(
        vector=vector,
        partition=cache_key.partition_key(req, tenant="default", embedder_id=svc.embedder.model_id),
        context=cache_key.context_key(req.messages),
        lookup=directive == "on",
    )
    if not probe.lookup:
        meta.cache = "refresh"
        return probe
    try:
        probe.hit = await asyncio.wait_for(
            svc.cache.lookup(vector, partition=probe.partition, context=probe.context),
            s.redis_timeout_s,
        )
    except (TimeoutError, CacheUnavailable):
        meta.cache = "error"
        svc.metrics.cache.labels("error").inc()
        return None
    meta.cache = "hit" if probe.hit else "miss"
    svc.metrics.cache.labels(meta.cache).inc()
    if probe.hit:
        svc.metrics.cache_similarity.observe(probe.hit.similarity)
    return probe


def _remember(
    svc: EdgeServices,
    probe: CacheProbe | None,
    content: str,
    finish_reason: str | None,
    usage: dict[str, int] | None,
    model: str,
) -> None:
    if probe is None or svc.cache is None or finish_reason != "stop" or not content:
        return
    cache = svc.cache
    answer = CachedAnswer(content=content, finish_reason=finish_reason, usage=usage, model=model)

    async def store() -> None:
        with contextlib.suppress(CacheUnavailable, asyncio.TimeoutError):
            await asyncio.wait_for(
                cache.store(
                    probe.vector, partition=probe.partition, context=probe.context, answer=answer
                ),
                svc.settings.redis_timeout_s * 4,
            )

    svc.spawn(store())


def _from_cache(
    svc: EdgeServices, req: ChatCompletionRequest, hit: CachedAnswer, meta: Meta
) -> Response:
    cid = completions.new_id()
    meta.extra_headers["x-edgecore-cache-similarity"] = f"{hit.similarity:.4f}"
    _observe(svc, meta, hit.usage)
    if not req.stream:
        body = completions.completion(
            id=cid,
            model=hit.model,
            content=hit.content,
            finish_reason=hit.finish_reason,
            usage=hit.usage,
        )
        return json_answer(body, meta)

    async def on_error(exc: BaseException) -> str:
        return "cache read failed"

    events = text_events(
        once(hit.content),
        id=cid,
        model=hit.model,
        include_usage=req.include_usage,
        finish=lambda: (hit.finish_reason, hit.usage),
        on_error=on_error,
    )
    return sse_answer(events, meta)


# --- edge model ------------------------------------------------------------------------------


async def _from_edge(
    request: Request,
    svc: EdgeServices,
    req: ChatCompletionRequest,
    meta: Meta,
    probe: CacheProbe | None,
) -> Response:
    s = svc.settings
    if svc.local is None:
        raise ApiError(
            503,
            "the edge model is not loaded",
            code="edge_unavailable",
            headers={"retry-after": str(s.retry_after_s)},
        )
    meta.tier = "edge"
    gen = Generation()
    deltas = svc.local.stream(req, gen)
    t = time.perf_counter()
    try:
        # Wait for the first token before answering, so a busy or over-long request still
        # gets a proper HTTP error instead of a stream that fails.
        first = await cancel_on_disconnect(request.receive, _first(deltas))
    except ClientDisconnected:
        svc.metrics.disconnects.labels("edge").inc()
        return Response(status_code=CLIENT_CLOSED)
    except EdgeBusy:
        raise ApiError(
            503,
            "the edge model is busy; retry later",
            code="edge_busy",
            headers={"retry-after": str(s.retry_after_s)},
        ) from None
    except PromptTooLong as exc:
        raise ApiError(400, str(exc), param="messages", code="context_length_exceeded") from None
    meta.tier_wait_s = time.perf_counter() - t
    cid = completions.new_id()

    async def rest() -> AsyncIterator[str]:
        if first is not None:
            yield first
            async for d in deltas:
                yield d

    def finish() -> tuple[str, dict[str, int]]:
        return gen.finish_reason, completions.usage(gen.prompt_tokens, gen.completion_tokens)

    if not req.stream:
        try:
            content = await cancel_on_disconnect(request.receive, _collect(rest()))
        except ClientDisconnected:
            svc.metrics.disconnects.labels("edge").inc()
            return Response(status_code=CLIENT_CLOSED)
        meta.tier_wait_s = time.perf_counter() - t  # the whole answer is the model's time
        finish_reason, usage = finish()
        _observe(svc, meta, usage)
        _remember(svc, probe, content, finish_reason, usage, s.edge_model)
        return json_answer(
            completions.completion(
                id=cid,
                model=s.edge_model,
                content=content,
                finish_reason=finish_reason,
                usage=usage,
            ),
            meta,
        )

    async def on_error(exc: BaseException) -> str:
        return "the edge model failed mid-answer"

    async def events() -> AsyncIterator[bytes]:
        parts: list[str] = []

        async def recorded() -> AsyncIterator[str]:
            async for d in rest():
                parts.append(d)
                yield d

        async for event in text_events(
            recorded(),
            id=cid,
            model=s.edge_model,
            include_usage=req.include_usage,
            finish=finish,
            on_error=on_error,
        ):
            yield event
        finish_reason, usage = finish()
        _observe(svc, meta, usage, done=True)
        _remember(svc, probe, "".join(parts), finish_reason, usage, s.edge_model)

    _observe(svc, meta, None)
    return sse_answer(events(), meta)


async def _first(deltas: AsyncIterator[str]) -> str | None:
    async for d in deltas:
        return d
    return None


async def _collect(deltas: AsyncIterator[str]) -> str:
    return "".join([d async for d in deltas])


# --- core ------------------------------------------------------------------------------------


async def _from_core(
    request: Request,
    svc: EdgeServices,
    req: ChatCompletionRequest,
    data: dict[str, Any],
    meta: Meta,
    probe: CacheProbe | None,
) -> Response:
    s = svc.settings
    payload = dict(data)
    payload["model"] = s.core_model
    if req.stream:
        # Always ask for usage (metrics, cache); dropped below if the client did not.
        payload["stream_options"] = {**(data.get("stream_options") or {}), "include_usage": True}
    t = time.perf_counter()
    try:
        upstream = await cancel_on_disconnect(
            request.receive, svc.core.send(payload, request_id=meta.request_id, stream=req.stream)
        )
    except ClientDisconnected:
        svc.metrics.disconnects.labels("core").inc()
        return Response(status_code=CLIENT_CLOSED)
    meta.tier = "core"
    meta.tier_wait_s = time.perf_counter() - t
    svc.metrics.core_requests.labels(upstream.http_version).inc()
    svc.metrics.route.labels("core", "forward").inc()
    if not req.stream:
        body = upstream.json()
        choice = (body.get("choices") or [{}])[0]
        content = (choice.get("message") or {}).get("content") or ""
        if not (choice.get("message") or {}).get("tool_calls"):
            _remember(
                svc,
                probe,
                content,
                choice.get("finish_reason"),
                body.get("usage"),
                body.get("model", s.core_model),
            )
        _observe(svc, meta, body.get("usage"))
        return json_answer(body, meta)
    _observe(svc, meta, None)
    return sse_answer(_relay(svc, upstream, req, meta, probe), meta)


async def _relay(
    svc: EdgeServices,
    upstream: httpx.Response,
    req: ChatCompletionRequest,
    meta: Meta,
    probe: CacheProbe | None,
) -> AsyncIterator[bytes]:
    """Relay the core's SSE event by event (never buffered), keeping a copy for the cache."""
    decoder = sse.SSEDecoder()
    acc = completions.StreamAccumulator()
    model = svc.settings.core_model
    try:
        async for raw in upstream.aiter_bytes():
            for payload in decoder.feed(raw):
                parsed = acc.add(payload)
                if parsed is not None:
                    model = parsed.get("model", model)
                    if not parsed.get("choices") and "usage" in parsed and not req.include_usage:
                        continue
                yield b"data: " + payload.encode() + b"\n\n"
        for payload in decoder.close():
            acc.add(payload)
            yield b"data: " + payload.encode() + b"\n\n"
        if not acc.done:
            acc.error = True
            yield sse.encode(completions.stream_error("the core ended the stream early"))
            yield sse.DONE
    except httpx.HTTPError:
        acc.error = True
        yield sse.encode(completions.stream_error("the core failed mid-stream"))
        yield sse.DONE
    finally:
        await upstream.aclose()
    _observe(svc, meta, acc.usage, done=True)
    if acc.complete:
        _remember(svc, probe, acc.content, acc.finish_reason, acc.usage, model)


# --- metrics ---------------------------------------------------------------------------------


def _observe(
    svc: EdgeServices, meta: Meta, usage: dict[str, int] | None, *, done: bool = False
) -> None:
    """Record first-byte metrics once (done=False) and end-of-answer metrics (usage, duration)."""
    m = svc.metrics
    elapsed = time.perf_counter() - meta.started
    if not done:
        m.ttft.labels(meta.tier).observe(elapsed)
        m.overhead.labels(meta.tier).observe(meta.overhead_ms() / 1000.0)
        m.requests.labels(meta.tier, "200").inc()
    if done or usage is not None:
        m.duration.labels(meta.tier).observe(elapsed)
    if usage:
        m.tokens.labels(meta.tier, "input").inc(usage.get("prompt_tokens", 0))
        m.tokens.labels(meta.tier, "output").inc(usage.get("completion_tokens", 0))
