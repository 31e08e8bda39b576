"""The edge tier: answer with the local small model (streamed or not)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator

from starlette.requests import Request
from starlette.responses import Response

from edge.cache.step import CacheProbe, remember
from edge.replies import Meta, first_token, json_answer, observe, sse_answer, text_events
from edge.services import EdgeServices
from edge.tiers.local_model import EdgeBusy, Generation, PromptTooLong
from shared import completions
from shared.disconnect import CLIENT_CLOSED, ClientDisconnected, cancel_on_disconnect
from shared.errors import ApiError
from shared.schemas import ChatCompletionRequest
from shared.tracing import traced


@traced("edge.tier.edge")
async def from_edge(
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
    meta.response_model = s.edge_model
    gen = Generation()
    deltas = svc.local.stream(req, gen)
    t = time.perf_counter()
    try:
        # Wait for the first token before answering, so a busy or over-long request still
        # gets a proper HTTP error instead of a stream that fails.
        first = await cancel_on_disconnect(
            request.receive, _first(deltas), on_abandon=lambda _: deltas.aclose()
        )
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

    async def rest() -> AsyncGenerator[str, None]:
        async with contextlib.aclosing(deltas):  # closing it stops the generation thread
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
        observe(svc.metrics, meta, usage)
        remember(svc, probe, content, finish_reason, usage, s.edge_model)
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

    async def events() -> AsyncGenerator[bytes, None]:
        parts: list[str] = []
        finished = False

        async def recorded() -> AsyncGenerator[str, None]:
            async with contextlib.aclosing(rest()) as stream:
                async for d in stream:
                    parts.append(d)
                    yield d

        stream = text_events(
            recorded(),
            id=cid,
            model=s.edge_model,
            include_usage=req.include_usage,
            finish=finish,
            on_error=on_error,
        )
        try:
            async with contextlib.aclosing(stream):
                async for event in stream:
                    yield event
            finished = True
        finally:
            if not finished:
                svc.metrics.disconnects.labels("edge").inc()
        finish_reason, usage = finish()
        observe(svc.metrics, meta, usage, done=True)
        remember(svc, probe, "".join(parts), finish_reason, usage, s.edge_model)

    first_token(svc.metrics, meta)  # the first token is in hand (awaited above)
    observe(svc.metrics, meta, None)
    return sse_answer(events(), meta, on_close=deltas.aclose)


async def _first(deltas: AsyncIterator[str]) -> str | None:
    async for d in deltas:
        return d
    return None


async def _collect(deltas: AsyncIterator[str]) -> str:
    return "".join([d async for d in deltas])
