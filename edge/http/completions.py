"""``POST /v1/completions`` (legacy text completions), routed like chat.

The same model names, keys, limits, router and fallback as ``/v1/chat/completions``: the
edge model continues the prompt as it is (no chat template), the core gets the request as
it is. Not cached: a completion continues raw text, where a near-duplicate prompt is not
the same question (``x-edgecore-cache: bypass``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator

from starlette.requests import Request
from starlette.responses import Response

from edge.cache.step import embed
from edge.http.intake import Admitted, admit, failed, new_meta
from edge.replies import Meta, first_token, json_answer, observe, sse_answer
from edge.routing.router import Decision, rule
from edge.services import EdgeServices
from edge.tiers.local_model import EdgeBusy, Generation, PromptTooLong
from edge.tiers.passthrough import forward
from edge.upstream.pool import CoreUnavailable
from shared import completions, sse
from shared.disconnect import CLIENT_CLOSED, ClientDisconnected, cancel_on_disconnect
from shared.errors import ApiError
from shared.parameters import completion_refusals
from shared.schemas import CompletionRequest
from shared.streaming import Releasing


async def text_completions(request: Request) -> Response:
    svc: EdgeServices = request.app.state.edge
    meta = new_meta(request, "edge")
    meta.cache = "bypass"
    admitted = await admit(
        request,
        svc,
        meta,
        CompletionRequest,
        tokens=lambda r: len(str(r.prompt)) // 4 + (r.max_tokens or 0),
    )
    try:
        response = await _handle(request, svc, meta, admitted)
    except ApiError as exc:
        admitted.release()
        failed(svc, meta, exc)
        raise
    except BaseException:
        admitted.release()
        raise
    return Releasing(response, admitted.release)


async def _handle(
    request: Request, svc: EdgeServices, meta: Meta, admitted: Admitted[CompletionRequest]
) -> Response:
    s = svc.settings
    req, data, tenant = admitted.req, admitted.data, admitted.tenant
    if req.max_tokens is not None and req.max_tokens > s.max_output_tokens:
        raise ApiError(
            400, f"max_tokens may be at most {s.max_output_tokens}", param="max_tokens",
            code="max_tokens_too_large",
        )  # fmt: skip
    if len(str(req.prompt)) > s.max_prompt_chars:
        raise ApiError(
            400, f"prompt too long: at most {s.max_prompt_chars} characters", param="prompt",
            code="context_length_exceeded",
        )  # fmt: skip
    refused = completion_refusals(data)
    if "core" in refused:
        r = refused["core"]
        raise ApiError(400, r.message(), code="unsupported_parameter", param=r.param)
    chat = req.as_chat()
    policy = tenant.route_policy
    decision = rule(chat, svc.router.rules, policy, refused.get("edge"))
    if decision is None:
        vector = await embed(svc, chat) if svc.router.needs_embedding else None
        decision = svc.router.route(chat, vector, policy)
    if decision.tier == "core":
        payload = {**data, "model": s.core_model}
        try:
            return await forward(request, svc, meta, payload, path="/v1/completions", tenant=tenant)
        except CoreUnavailable as exc:
            pinned = decision.reason in ("model", "features")
            degrade = tenant.degrade or s.core_unavailable_policy
            if degrade == "503" or svc.local is None or pinned:
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
    return await _from_edge(request, svc, meta, req)


async def _from_edge(
    request: Request, svc: EdgeServices, meta: Meta, req: CompletionRequest
) -> Response:
    s = svc.settings
    if svc.local is None:
        raise ApiError(
            503, "the edge model is not loaded", code="edge_unavailable",
            headers={"retry-after": str(s.retry_after_s)},
        )  # fmt: skip
    meta.tier = "edge"
    gen = Generation()
    deltas = svc.local.stream(req.as_chat(), gen, raw_prompt=req.text() or "")
    t = time.perf_counter()
    try:
        first = await cancel_on_disconnect(
            request.receive, anext(deltas, None), on_abandon=lambda _: deltas.aclose()
        )
    except ClientDisconnected:
        svc.metrics.disconnects.labels("edge").inc()
        return Response(status_code=CLIENT_CLOSED)
    except EdgeBusy:
        raise ApiError(
            503, "the edge model is busy; retry later", code="edge_busy",
            headers={"retry-after": str(s.retry_after_s)},
        ) from None  # fmt: skip
    except PromptTooLong as exc:
        raise ApiError(400, str(exc), param="prompt", code="context_length_exceeded") from None
    meta.tier_wait_s = time.perf_counter() - t
    cid, created = completions.new_text_id(), int(time.time())

    async def rest() -> AsyncGenerator[str, None]:
        async with contextlib.aclosing(deltas):
            if first is not None:
                yield first
                async for d in deltas:
                    yield d

    def body(text: str | None, finish: str | None, usage: dict[str, int] | None = None) -> bytes:
        return sse.encode(
            completions.text_completion(
                id=cid, model=s.edge_model, text=text, finish_reason=finish, usage=usage,
                created=created,
            )
        )  # fmt: skip

    if not req.stream:
        try:
            text = await cancel_on_disconnect(request.receive, _collect(rest()))
        except ClientDisconnected:
            svc.metrics.disconnects.labels("edge").inc()
            return Response(status_code=CLIENT_CLOSED)
        usage = completions.usage(gen.prompt_tokens, gen.completion_tokens)
        meta.tier_wait_s = time.perf_counter() - t
        observe(svc.metrics, meta, usage)
        return json_answer(
            completions.text_completion(
                id=cid, model=s.edge_model, text=text, finish_reason=gen.finish_reason,
                usage=usage, created=created,
            ),
            meta,
        )  # fmt: skip

    async def events() -> AsyncGenerator[bytes, None]:
        usage: dict[str, int] | None = None
        try:
            async with contextlib.aclosing(rest()) as stream:
                async for d in stream:
                    first_token(svc.metrics, meta)
                    yield body(d, None)
        except Exception:
            yield sse.encode(completions.stream_error("the edge model failed mid-answer"))
            yield sse.DONE
            return
        usage = completions.usage(gen.prompt_tokens, gen.completion_tokens)
        yield body("", gen.finish_reason)
        if req.stream_options is not None and req.stream_options.include_usage:
            yield body(None, None, usage)
        yield sse.DONE
        observe(svc.metrics, meta, usage, done=True)

    observe(svc.metrics, meta, None)
    return sse_answer(events(), meta, on_close=deltas.aclose)


async def _collect(deltas: AsyncGenerator[str, None]) -> str:
    return "".join([d async for d in deltas])
