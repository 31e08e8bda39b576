"""The local tier: answer with the edge's small model (streamed or not).

``answer`` serves chat (the model's chat template), ``complete`` serves ``/v1/completions``
(the prompt continued as it is). Both wait for the first token before answering, so a busy
model or an over-long prompt still gets a proper HTTP error instead of a failing stream.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from edge.context import Answer, RequestContext
from edge.metrics import EdgeMetrics
from edge.replies import json_answer, sse_answer, text_events
from edge.tiers.local_model import (
    EdgeBusy,
    Generation,
    LocalModel,
    ModelProcessDied,
    PromptTooLong,
)
from shared import completions, sse
from shared.disconnect import CLIENT_CLOSED, ClientDisconnected, cancel_on_disconnect
from shared.errors import ApiError
from shared.schemas import ChatCompletionRequest, CompletionRequest
from shared.tracing import traced


@dataclass
class _Started:
    rest: AsyncGenerator[str, None]  # the deltas, the first one included
    gen: Generation  # token counts and finish reason, filled in as it goes
    t: float  # when generation started
    close: Callable[[], Awaitable[None]]


class LocalTier:
    def __init__(
        self,
        model: LocalModel | None,
        metrics: EdgeMetrics,
        *,
        name: str,
        retry_after_s: int,
    ) -> None:
        self.model = model
        self.metrics = metrics
        self.name = name  # the edge model's name in answers
        self.retry_after_s = retry_after_s

    @property
    def available(self) -> bool:
        return self.model is not None and self.model.alive

    @traced("edge.tier.edge")
    async def answer(
        self,
        request: Request,
        req: ChatCompletionRequest,
        ctx: RequestContext,
    ) -> Response:
        """A chat completion; the complete answer is reported to ``ctx`` (for the cache)."""
        started = await self._start(request, req, ctx, None, "messages")
        if isinstance(started, Response):
            return started
        rest, gen, t = started.rest, started.gen, started.t
        model, cid = self.name, completions.new_id()

        def finish() -> tuple[str, dict[str, int]]:
            return gen.finish_reason, completions.usage(gen.prompt_tokens, gen.completion_tokens)

        if not req.stream:
            content = await self._collect(request, rest)
            if content is None:
                return Response(status_code=CLIENT_CLOSED)
            ctx.tier_wait_s = time.perf_counter() - t  # the whole answer is the model's time
            reason, usage = finish()
            ctx.answered(Answer(content, reason, usage, model))
            body = completions.completion(
                id=cid, model=model, content=content, finish_reason=reason, usage=usage
            )
            return json_answer(body, ctx)

        async def on_error(exc: BaseException) -> str:
            return "the edge model failed mid-answer"

        parts: list[str] = []

        async def recorded() -> AsyncGenerator[str, None]:
            async with contextlib.aclosing(rest) as stream:
                async for d in stream:
                    parts.append(d)
                    yield d

        async def events() -> AsyncGenerator[bytes, None]:
            finished = False
            stream = text_events(
                recorded(), id=cid, model=model, include_usage=req.include_usage,
                finish=finish, on_error=on_error,
            )  # fmt: skip
            try:
                async with contextlib.aclosing(stream):
                    async for event in stream:
                        yield event
                finished = True
            finally:
                if not finished:
                    self.metrics.disconnects.labels("edge").inc()
            reason, usage = finish()
            ctx.answered(Answer("".join(parts), reason, usage, model))

        ctx.first_token()  # the first token is in hand (awaited above)
        return sse_answer(events(), ctx, on_close=started.close, usage=lambda: finish()[1])

    @traced("edge.tier.edge")
    async def complete(
        self, request: Request, req: CompletionRequest, ctx: RequestContext
    ) -> Response:
        """A text completion: the prompt continued as it is, no chat template."""
        started = await self._start(request, req.as_chat(), ctx, req.text() or "", "prompt")
        if isinstance(started, Response):
            return started
        rest, gen, t = started.rest, started.gen, started.t
        model, cid, created = self.name, completions.new_text_id(), int(time.time())

        def usage() -> dict[str, int]:
            return completions.usage(gen.prompt_tokens, gen.completion_tokens)

        if not req.stream:
            text = await self._collect(request, rest)
            if text is None:
                return Response(status_code=CLIENT_CLOSED)
            ctx.tier_wait_s = time.perf_counter() - t
            body = completions.text_completion(
                id=cid, model=model, text=text, finish_reason=gen.finish_reason,
                usage=usage(), created=created,
            )  # fmt: skip
            return json_answer(body, ctx)

        def event(text: str | None, finish: str | None, use: Any = None) -> bytes:
            return sse.encode(
                completions.text_completion(
                    id=cid, model=model, text=text, finish_reason=finish, usage=use,
                    created=created,
                )
            )  # fmt: skip

        include_usage = req.stream_options is not None and req.stream_options.include_usage

        async def events() -> AsyncGenerator[bytes, None]:
            try:
                async with contextlib.aclosing(rest) as stream:
                    async for d in stream:
                        yield event(d, None)
            except Exception:
                yield sse.encode(completions.stream_error("the edge model failed mid-answer"))
                yield sse.DONE
                return
            yield event("", gen.finish_reason)
            if include_usage:
                yield event(None, None, usage())
            yield sse.DONE

        ctx.first_token()
        return sse_answer(events(), ctx, on_close=started.close, usage=usage)

    async def _start(
        self,
        request: Request,
        req: ChatCompletionRequest,
        ctx: RequestContext,
        raw_prompt: str | None,
        param: str,
    ) -> _Started | Response:
        """Start generating and wait for the first token, or a 499 response when the
        client left meanwhile."""
        if self.model is None:
            raise ApiError(
                503, "the edge model is not loaded", code="edge_unavailable",
                headers={"retry-after": str(self.retry_after_s)},
            )  # fmt: skip
        ctx.tier = "edge"
        ctx.response_model = self.name
        gen = Generation()
        deltas = self.model.stream(req, gen, raw_prompt=raw_prompt)
        t = time.perf_counter()
        try:
            first = await cancel_on_disconnect(
                request.receive, _first(deltas), on_abandon=lambda _: deltas.aclose()
            )
        except ClientDisconnected:
            self.metrics.disconnects.labels("edge").inc()
            return Response(status_code=CLIENT_CLOSED)
        except EdgeBusy:
            raise ApiError(
                503, "the edge model is busy; retry later", code="edge_busy",
                headers={"retry-after": str(self.retry_after_s)},
            ) from None  # fmt: skip
        except ModelProcessDied:
            raise ApiError(
                503, "the edge model is not running", code="edge_unavailable",
                headers={"retry-after": str(self.retry_after_s)},
            ) from None  # fmt: skip
        except PromptTooLong as exc:
            raise ApiError(400, str(exc), param=param, code="context_length_exceeded") from None
        ctx.tier_wait_s = time.perf_counter() - t

        async def rest() -> AsyncGenerator[str, None]:
            async with contextlib.aclosing(deltas):  # closing it stops the generation thread
                if first is not None:
                    yield first
                    async for d in deltas:
                        yield d

        async def close() -> None:  # also when the stream never started: stop the thread
            await deltas.aclose()

        return _Started(rest(), gen, t, close)

    async def _collect(self, request: Request, rest: AsyncGenerator[str, None]) -> str | None:
        """The whole answer, or None when the client left first."""
        try:
            return await cancel_on_disconnect(request.receive, _join(rest))
        except ClientDisconnected:
            self.metrics.disconnects.labels("edge").inc()
            return None


async def _first(deltas: AsyncIterator[str]) -> str | None:
    async for d in deltas:
        return d
    return None


async def _join(deltas: AsyncIterator[str]) -> str:
    return "".join([d async for d in deltas])
