"""The core tier: forward over HTTP/2 and relay the answer without buffering.

A stream is relayed event by event. A JSON request is forwarded as it is and vLLM's answer
reaches the client unchanged (every field: system_fingerprint, refusal, reasoning_content,
stop_reason, logprobs, tool calls). A client that leaves is cancelled at any point by
resetting the HTTP/2 stream. ``CoreUnavailable`` (no core took the request before its first
byte) is the pipeline's to handle: its fallback policy decides.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import Response

from edge.context import Answer, RequestContext
from edge.metrics import EdgeMetrics
from edge.replies import has_content, json_answer, sse_answer
from edge.settings import UpstreamSettings
from edge.tenancy.keys import Tenant
from edge.tiers.passthrough import relay_raw, usage_of
from edge.upstream.pool import CorePool, CoreStalled, Upstream
from shared import completions, sse
from shared.disconnect import CLIENT_CLOSED, ClientDisconnected, cancel_on_disconnect
from shared.errors import ApiError
from shared.schemas import ChatCompletionRequest
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


class CoreTier:
    def __init__(
        self, pool: CorePool, metrics: EdgeMetrics, settings: UpstreamSettings, *, model: str
    ) -> None:
        self.pool = pool
        self.model = model  # the core's model name
        self.metrics = metrics
        self.settings = settings

    @traced("edge.tier.core")
    async def answer(
        self,
        request: Request,
        req: ChatCompletionRequest,
        data: dict[str, Any],
        ctx: RequestContext,
        tenant: Tenant,
    ) -> Response:
        """A chat completion from the core; a complete plain answer is reported to ``ctx``."""
        payload = upstream_payload(data, req, self.model)
        upstream = await self._open(request, ctx, payload, tenant, "/v1/chat/completions")
        if upstream is None:
            return Response(status_code=CLIENT_CLOSED)
        self.metrics.route.labels("core", "forward").inc()
        if req.stream:
            acc = completions.StreamAccumulator()
            events = self._relay(upstream, acc, req, ctx)
            return sse_answer(events, ctx, on_close=upstream.close, usage=lambda: acc.usage)
        try:
            body = await cancel_on_disconnect(request.receive, _read_json(upstream))
        except ClientDisconnected:
            self.metrics.disconnects.labels("core").inc()
            return Response(status_code=CLIENT_CLOSED)
        ctx.tier_wait_s = upstream.waited_s  # the whole answer is the core's time
        _answer_of(body, self.model, ctx)
        return json_answer(body, ctx)

    async def forward(
        self,
        request: Request,
        ctx: RequestContext,
        payload: dict[str, Any],
        *,
        path: str,
        tenant: Tenant,
    ) -> Response:
        """Any other OpenAI endpoint (completions, responses), relayed as it is."""
        upstream = await self._open(request, ctx, payload, tenant, path)
        if upstream is None:
            return Response(status_code=CLIENT_CLOSED)
        usage: dict[str, Any] = {}
        if payload.get("stream") and upstream.response.headers.get("content-type", "").startswith(
            "text/event-stream"
        ):
            relay = relay_raw(upstream, ctx, usage, self.settings.sse_keepalive_s)
            return sse_answer(relay, ctx, on_close=upstream.close, usage=lambda: usage or None)
        try:
            body = await cancel_on_disconnect(request.receive, _read_bytes(upstream))
        except ClientDisconnected:
            self.metrics.disconnects.labels("core").inc()
            return Response(status_code=CLIENT_CLOSED)
        ctx.tier_wait_s = upstream.waited_s
        ctx.closed(usage_of(body))
        return Response(
            body,
            status_code=upstream.response.status_code,
            media_type=upstream.response.headers.get("content-type", "application/json"),
            headers=ctx.headers(),
        )

    async def _open(
        self,
        request: Request,
        ctx: RequestContext,
        payload: dict[str, Any],
        tenant: Tenant,
        path: str,
    ) -> Upstream | None:
        """The core's response headers, or None when the client left first."""
        try:
            upstream = await cancel_on_disconnect(
                request.receive,
                self.pool.send(
                    payload, request_id=ctx.request_id, stream=True,
                    priority=tenant.core_priority, tenant=tenant.name, path=path,
                ),
                on_abandon=Upstream.close,
            )  # fmt: skip
        except ClientDisconnected:
            self.metrics.disconnects.labels("core").inc()
            return None
        ctx.tier = "core"
        ctx.response_model = self.model
        self.metrics.core_requests.labels(upstream.response.http_version).inc()
        return upstream

    async def _relay(
        self,
        upstream: Upstream,
        acc: completions.StreamAccumulator,
        req: ChatCompletionRequest,
        ctx: RequestContext,
    ) -> AsyncGenerator[bytes, None]:
        """Relay the core's SSE event by event (never buffered), keeping a copy for the cache."""
        model = self.model
        events = _events(upstream, acc, self.settings.sse_keepalive_s)
        try:
            async with contextlib.aclosing(events):
                async for batch in events:
                    ctx.tier_wait_s = upstream.waited_s  # the headers, then the first event
                    if batch is None:
                        yield sse.KEEPALIVE
                        continue
                    out: list[bytes] = []  # what arrived together goes out in one write
                    for payload, parsed in batch:
                        if parsed is not None:
                            model = parsed.get("model", model)
                            if ctx.first_token_s is None and has_content(parsed):
                                ctx.response_model = model
                                ctx.first_token()  # not the headers: after prefill
                            if not parsed.get("choices") and "usage" in parsed:
                                if not req.include_usage:
                                    continue
                        out.append(b"data: " + payload.encode() + b"\n\n")
                    if out:
                        yield b"".join(out)
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
            stalled = f"the core failed mid-stream ({exc})" if isinstance(exc, CoreStalled) else ""
            yield sse.encode(completions.stream_error(stalled or "the core failed mid-stream"))
            yield sse.DONE
        finally:
            # Here, not after the loop: a client that closes as soon as it reads [DONE]
            # closes this generator at that last yield, and the answer was still complete.
            if not (acc.done or acc.error):  # the client left: not the core's fault
                self.metrics.disconnects.labels("core").inc()
            if acc.done and acc.complete:
                ctx.answered(Answer(acc.content, acc.finish_reason, acc.usage, model))


async def _read_bytes(upstream: Upstream) -> bytes:
    try:
        body = await upstream.read()
    except httpx.HTTPError:
        upstream.failed()
        raise
    finally:
        await upstream.close()
    upstream.succeeded()
    return body


async def _read_json(upstream: Upstream) -> dict[str, Any]:
    """The core's JSON answer as vLLM wrote it (system_fingerprint, refusal, reasoning,
    stop_reason, logprobs and tool calls all reach the client)."""
    try:
        await upstream.read()
        body: dict[str, Any] = upstream.response.json()
    except (httpx.HTTPError, ValueError) as exc:
        upstream.failed()
        raise _failed_mid_answer() from exc
    finally:
        await upstream.close()
    upstream.succeeded()
    return body


def _answer_of(body: dict[str, Any], model: str, ctx: RequestContext) -> None:
    """A plain-text answer (not tool calls) is reported to ``ctx``."""
    choices = body.get("choices") or [{}]
    message = choices[0].get("message") or {}
    content = message.get("content")
    if isinstance(content, str) and content and not message.get("tool_calls"):
        finish = choices[0].get("finish_reason") or "stop"
        ctx.answered(Answer(content, finish, body.get("usage"), body.get("model", model)))


async def _events(
    upstream: Upstream, acc: completions.StreamAccumulator, keepalive_s: float | None = None
) -> AsyncGenerator[list[tuple[str, dict[str, Any] | None]] | None, None]:
    """The core's SSE payloads, recorded in ``acc``: those that arrived together in one list.

    With ``keepalive_s``, yields ``None`` whenever the core has been silent that long (a
    long first token), so the relay can send a comment instead of going quiet. Raises
    CoreStalled (an httpx error) past the idle deadline or when the core is found frozen.
    Resets the stream if it is not read to the end.
    """
    decoder = sse.SSEDecoder()
    chunks = upstream.chunks(keepalive_s)
    try:
        async with contextlib.aclosing(chunks):
            async for raw in chunks:
                if raw is None:
                    yield None  # still waiting; the read goes on
                    continue
                payloads = decoder.feed(raw)
                if payloads:
                    yield [(payload, acc.add(payload)) for payload in payloads]
        if tail := decoder.close():
            yield [(payload, acc.add(payload)) for payload in tail]
    finally:
        # Also runs when the client leaves: the core sees RST_STREAM and aborts the engine.
        await upstream.close()


def _failed_mid_answer() -> ApiError:
    return ApiError(502, "the core failed while answering", code="upstream_error")
