"""The core tier: forward over HTTP/2 and relay the answer without buffering.

A stream is relayed event by event. A JSON request is forwarded as it is and vLLM's answer
reaches the client unchanged (every field: system_fingerprint, refusal, reasoning_content,
stop_reason, logprobs, tool calls). A client that leaves is cancelled at any point by
resetting the HTTP/2 stream.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import Response

from edge.cache.step import CacheProbe, remember
from edge.replies import Meta, first_token, has_content, json_answer, observe, sse_answer
from edge.services import EdgeServices
from edge.tenancy.keys import Tenant
from edge.upstream.pool import CoreStalled, Upstream
from shared import completions, sse
from shared.disconnect import CLIENT_CLOSED, ClientDisconnected, cancel_on_disconnect
from shared.errors import ApiError
from shared.schemas import ChatCompletionRequest
from shared.streaming import with_keepalive
from shared.tracing import traced


def upstream_payload(
    data: dict[str, Any], req: ChatCompletionRequest, model: str
) -> dict[str, Any]:
    payload = dict(data)
    payload["model"] = model
    if req.stream:
        # Always ask for usage (metrics, cache); dropped again if the client did not.
        payload["stream_options"] = {**(data.get("stream_options") or {}), "include_usage": True}
    return payload


@traced("edge.tier.core")
async def from_core(
    request: Request,
    svc: EdgeServices,
    req: ChatCompletionRequest,
    data: dict[str, Any],
    meta: Meta,
    probe: CacheProbe | None,
    tenant: Tenant,
) -> Response:
    payload = upstream_payload(data, req, svc.settings.core_model)
    t = time.perf_counter()
    try:
        upstream = await cancel_on_disconnect(
            request.receive,
            svc.core.send(
                payload,
                request_id=meta.request_id,
                stream=True,
                priority=tenant.core_priority,
                tenant=tenant.name,
            ),
            on_abandon=Upstream.close,
        )
    except ClientDisconnected:
        svc.metrics.disconnects.labels("core").inc()
        return Response(status_code=CLIENT_CLOSED)
    meta.tier = "core"
    meta.response_model = svc.settings.core_model
    svc.metrics.core_requests.labels(upstream.response.http_version).inc()
    svc.metrics.route.labels("core", "forward").inc()
    if req.stream:
        meta.tier_wait_s = time.perf_counter() - t
        observe(svc.metrics, meta, None)
        return sse_answer(_relay(svc, upstream, req, meta, probe), meta, on_close=upstream.close)
    try:
        body = await cancel_on_disconnect(request.receive, _read_json(upstream))
    except ClientDisconnected:
        svc.metrics.disconnects.labels("core").inc()
        return Response(status_code=CLIENT_CLOSED)
    meta.tier_wait_s = time.perf_counter() - t  # the whole answer is the core's time
    observe(svc.metrics, meta, body.get("usage"))
    _remember_body(svc, probe, body)
    return json_answer(body, meta)


async def _read_json(upstream: Upstream) -> dict[str, Any]:
    """The core's JSON answer as vLLM wrote it (system_fingerprint, refusal, reasoning,
    stop_reason, logprobs and tool calls all reach the client)."""
    try:
        await upstream.response.aread()
        body: dict[str, Any] = upstream.response.json()
    except (httpx.HTTPError, ValueError) as exc:
        upstream.failed()
        raise _failed_mid_answer() from exc
    finally:
        await upstream.close()
    upstream.succeeded()
    return body


def _remember_body(svc: EdgeServices, probe: CacheProbe | None, body: dict[str, Any]) -> None:
    """Store a plain-text answer (not tool calls) for the cache."""
    choices = body.get("choices") or [{}]
    message = choices[0].get("message") or {}
    content = message.get("content")
    if isinstance(content, str) and content and not message.get("tool_calls"):
        model = body.get("model", svc.settings.core_model)
        remember(svc, probe, content, choices[0].get("finish_reason") or "stop",
                 body.get("usage"), model)  # fmt: skip


async def _events(
    upstream: Upstream, acc: completions.StreamAccumulator, keepalive_s: float | None = None
) -> AsyncGenerator[tuple[str | None, dict[str, Any] | None], None]:
    """The core's SSE payloads, recorded in ``acc``.

    With ``keepalive_s``, yields ``(None, None)`` whenever the core has been silent that
    long (a long first token), so the relay can send a comment instead of going quiet.
    Raises CoreStalled (an httpx error) past the idle deadline or when the core is found
    frozen. Resets the stream if it is not read to the end.
    """
    decoder = sse.SSEDecoder()
    chunks = with_keepalive(upstream.chunks(), keepalive_s)
    try:
        async with contextlib.aclosing(chunks):
            async for raw in chunks:
                if raw is None:
                    yield None, None  # still waiting; the read goes on
                    continue
                for payload in decoder.feed(raw):
                    yield payload, acc.add(payload)
        for payload in decoder.close():
            yield payload, acc.add(payload)
    finally:
        # Also runs when the client leaves: the core sees RST_STREAM and aborts the engine.
        await upstream.close()


def _failed_mid_answer() -> ApiError:
    return ApiError(502, "the core failed while answering", code="upstream_error")


async def _relay(
    svc: EdgeServices,
    upstream: Upstream,
    req: ChatCompletionRequest,
    meta: Meta,
    probe: CacheProbe | None,
) -> AsyncGenerator[bytes, None]:
    """Relay the core's SSE event by event (never buffered), keeping a copy for the cache."""
    acc = completions.StreamAccumulator()
    model = svc.settings.core_model
    events = _events(upstream, acc, svc.settings.sse_keepalive_s)
    try:
        async with contextlib.aclosing(events):
            async for payload, parsed in events:
                if payload is None:
                    yield sse.KEEPALIVE
                    continue
                if parsed is not None:
                    model = parsed.get("model", model)
                    if meta.first_token_s is None and has_content(parsed):
                        meta.response_model = model
                        first_token(svc.metrics, meta)  # not the headers: after prefill
                    if not parsed.get("choices") and "usage" in parsed and not req.include_usage:
                        continue
                yield b"data: " + payload.encode() + b"\n\n"
        if acc.done:
            upstream.succeeded()
        else:
            acc.error = True
            upstream.failed()
            yield sse.encode(completions.stream_error("the core ended the stream early"))
            yield sse.DONE
    except httpx.HTTPError as exc:
        acc.error = True
        upstream.failed()
        message = f"the core failed mid-stream ({exc})" if isinstance(exc, CoreStalled) else None
        yield sse.encode(completions.stream_error(message or "the core failed mid-stream"))
        yield sse.DONE
    finally:
        # Here, not after the loop: a client that closes as soon as it reads [DONE] closes
        # this generator at that last yield, and the answer was still complete.
        if acc.done or acc.error:
            observe(svc.metrics, meta, acc.usage, done=True)
        else:  # the client left: not the core's fault
            svc.metrics.disconnects.labels("core").inc()
        if acc.done and acc.complete:
            remember(svc, probe, acc.content, acc.finish_reason, acc.usage, model)
