"""Forward a request to the core and relay its answer as it is (completions, responses).

Nothing is rebuilt: a JSON answer keeps every field vLLM wrote, a stream is relayed event by
event. A stream that breaks or ends without ``[DONE]`` gets an error event, never a silent
cut. ``CoreUnavailable`` (nothing answered yet) is left to the caller's fallback policy.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import Response

from edge.replies import Meta, observe, sse_answer
from edge.services import EdgeServices
from edge.tenancy.keys import Tenant
from edge.upstream.pool import Upstream
from shared import completions, sse
from shared.disconnect import CLIENT_CLOSED, ClientDisconnected, cancel_on_disconnect


async def forward(
    request: Request,
    svc: EdgeServices,
    meta: Meta,
    payload: dict[str, Any],
    *,
    path: str,
    tenant: Tenant,
) -> Response:
    stream = bool(payload.get("stream"))
    try:
        upstream = await cancel_on_disconnect(
            request.receive,
            svc.core.send(
                payload,
                request_id=meta.request_id,
                stream=True,  # headers first; the body is read below
                priority=tenant.core_priority,
                tenant=tenant.name,
                path=path,
            ),
            on_abandon=Upstream.close,
        )
    except ClientDisconnected:
        svc.metrics.disconnects.labels("core").inc()
        return Response(status_code=CLIENT_CLOSED)
    meta.tier = "core"
    svc.metrics.core_requests.labels(upstream.response.http_version).inc()
    if stream and upstream.response.headers.get("content-type", "").startswith("text/event-stream"):
        observe(svc.metrics, meta, None)
        return sse_answer(_relay(svc, upstream, meta), meta, on_close=upstream.close)
    try:
        body = await cancel_on_disconnect(request.receive, _read(upstream))
    except ClientDisconnected:
        svc.metrics.disconnects.labels("core").inc()
        return Response(status_code=CLIENT_CLOSED)
    except httpx.HTTPError:
        upstream.failed()
        raise
    observe(svc.metrics, meta, _usage(body))
    return Response(
        body,
        status_code=upstream.response.status_code,
        media_type=upstream.response.headers.get("content-type", "application/json"),
        headers=meta.headers(),
    )


async def _read(upstream: Upstream) -> bytes:
    try:
        body = await upstream.response.aread()
    finally:
        await upstream.close()
    upstream.succeeded()
    return body


def _usage(body: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    usage = data.get("usage") or (data.get("response") or {}).get("usage")  # Responses API
    return usage if isinstance(usage, dict) else None


# A Responses API stream has no [DONE]: it ends with one of these events.
_RESPONSE_ENDS = ('"response.completed"', '"response.failed"', '"response.incomplete"')


def _terminal(payload: str) -> bool:
    """The event that ends a stream: ``[DONE]`` (chat, completions) or a final response."""
    return payload.strip() == "[DONE]" or any(end in payload[:200] for end in _RESPONSE_ENDS)


async def _relay(svc: EdgeServices, upstream: Upstream, meta: Meta) -> AsyncGenerator[bytes, None]:
    decoder = sse.SSEDecoder()
    done = False
    usage: dict[str, Any] | None = None
    try:
        # chunks(): CoreStalled (an httpx error) past the idle deadline or on a frozen core.
        async with contextlib.aclosing(upstream.chunks()) as chunks:
            async for raw in chunks:
                for payload in decoder.feed(raw):
                    done = done or _terminal(payload)
                    if '"usage"' in payload:
                        usage = _usage(payload.encode()) or usage
                yield raw
        if done:
            upstream.succeeded()
        else:
            upstream.failed()
            yield sse.encode(completions.stream_error("the core ended the stream early"))
            yield sse.DONE
    except httpx.HTTPError:
        upstream.failed()
        yield sse.encode(completions.stream_error("the core failed mid-stream"))
        yield sse.DONE
    finally:
        await upstream.close()
        observe(svc.metrics, meta, usage, done=True)  # also when closed right after the end
