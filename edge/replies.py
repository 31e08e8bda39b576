"""Turn what a tier produced into the client's response: SSE chunks or one JSON body.

Every response carries ``x-edgecore-tier`` and ``x-edgecore-overhead-ms``. Streams end with
a usage chunk when the client asked for one, then ``[DONE]``; a failure after the first byte
becomes an error event, never a silent cut.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.responses import JSONResponse, StreamingResponse

from edge.context import RequestContext
from shared import completions, sse
from shared.streaming import EventStreamResponse


def json_answer(body: dict[str, Any], ctx: RequestContext, status_code: int = 200) -> JSONResponse:
    """One JSON body; the request is observed as opened and closed here."""
    usage = body.get("usage")
    ctx.closed(usage if isinstance(usage, dict) else None)
    return JSONResponse(body, status_code=status_code, headers=ctx.headers())


def sse_answer(
    events: AsyncIterator[bytes],
    ctx: RequestContext,
    on_close: Callable[[], Awaitable[None]] | None = None,
    usage: Callable[[], dict[str, Any] | None] = lambda: None,
) -> StreamingResponse:
    """A stream of SSE events, observed as opened when its first event is ready (the headers
    go with it, so the overhead counts to the first byte the client gets) and closed when
    its end is sent (``usage`` is read then)."""

    def opening() -> dict[str, str]:
        ctx.opened()
        return {**sse.STREAM_HEADERS, **ctx.headers()}

    return EventStreamResponse(_observed(events, ctx, usage), opening=opening,
                               on_close=on_close)  # fmt: skip


async def _observed(
    events: AsyncIterator[bytes],
    ctx: RequestContext,
    usage: Callable[[], dict[str, Any] | None],
) -> AsyncGenerator[bytes, None]:
    ended = False
    try:
        async for event in events:
            # A client may close as soon as it reads [DONE]: the stream has ended by then.
            ended = ended or event.endswith(sse.DONE)
            yield event
        ended = True
    finally:
        if isinstance(events, AsyncGenerator):
            await events.aclose()
        if ended:
            ctx.closed(usage())


async def text_events(
    deltas: AsyncGenerator[str, None],
    *,
    id: str,
    model: str,
    include_usage: bool,
    finish: Callable[[], tuple[str, dict[str, Any] | None]],
    on_error: Callable[[BaseException], Awaitable[str]],
) -> AsyncGenerator[bytes, None]:
    """SSE events for an answer produced as text deltas (edge model, cache).

    ``finish`` is called after the last delta and returns (finish_reason, usage).
    """
    created = int(time.time())
    yield sse.encode(
        completions.chunk(
            id=id, model=model, created=created, delta={"role": "assistant", "content": ""}
        )
    )
    try:
        async with contextlib.aclosing(deltas):
            async for delta in deltas:
                yield sse.encode(
                    completions.chunk(id=id, model=model, created=created, delta={"content": delta})
                )
    except Exception as exc:
        message = await on_error(exc)
        yield sse.encode(completions.stream_error(message))
        yield sse.DONE
        return
    finish_reason, usage = finish()
    yield sse.encode(
        completions.chunk(
            id=id, model=model, created=created, delta={}, finish_reason=finish_reason
        )
    )
    if include_usage:
        yield sse.encode(completions.chunk(id=id, model=model, created=created, usage=usage))
    yield sse.DONE


async def once(text: str) -> AsyncGenerator[str, None]:
    yield text


def has_content(chunk: dict[str, Any]) -> bool:
    """Whether a chat.completion.chunk carries output (text, reasoning or a tool call), as
    opposed to the role-only opening chunk, usage or keepalives."""
    for choice in chunk.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        if isinstance(delta, dict) and any(
            delta.get(k) for k in ("content", "reasoning_content", "tool_calls")
        ):
            return True
        if choice.get("text"):
            return True
    return False
