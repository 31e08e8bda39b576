"""Turn what a tier produced into the client's response: SSE chunks or one JSON body.

Every response carries ``x-edgecore-tier`` and ``x-edgecore-overhead-ms``. Streams end with
a usage chunk when the client asked for one, then ``[DONE]``; a failure after the first byte
becomes an error event, never a silent cut.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import JSONResponse, StreamingResponse

from edge.metrics import EdgeMetrics
from shared import completions, sse
from shared.streaming import EventStreamResponse


@dataclass
class Meta:
    """Per-request facts that end up in headers and metrics."""

    request_id: str
    started: float  # perf_counter at arrival
    tier: str = "edge"
    cache: str = "off"
    degraded: str | None = None
    tier_wait_s: float = 0.0  # time spent waiting on the tier before its first byte
    first_byte_s: float | None = None  # seconds from arrival to the first answer byte
    extra_headers: dict[str, str] = field(default_factory=dict)

    def overhead_ms(self) -> float:
        return max(0.0, (time.perf_counter() - self.started - self.tier_wait_s) * 1000.0)

    def headers(self) -> dict[str, str]:
        h = {
            "x-request-id": self.request_id,
            "x-edgecore-tier": self.tier,
            "x-edgecore-cache": self.cache,
            "x-edgecore-overhead-ms": f"{self.overhead_ms():.2f}",
        }
        if self.degraded:
            h["x-edgecore-degraded"] = self.degraded
        h.update(self.extra_headers)
        return h


def json_answer(body: dict[str, object], meta: Meta) -> JSONResponse:
    return JSONResponse(body, headers=meta.headers())


def sse_answer(
    events: AsyncIterator[bytes],
    meta: Meta,
    on_close: Callable[[], Awaitable[None]] | None = None,
) -> StreamingResponse:
    headers = {**sse.STREAM_HEADERS, **meta.headers()}
    return EventStreamResponse(events, headers=headers, on_close=on_close)


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


def observe(
    m: EdgeMetrics, meta: Meta, usage: dict[str, Any] | None, *, done: bool = False
) -> None:
    """Record first-byte metrics once (done=False) and end-of-answer metrics (usage, duration)."""
    elapsed = time.perf_counter() - meta.started
    if not done:
        meta.first_byte_s = elapsed
        m.ttft.labels(meta.tier).observe(elapsed)
        m.overhead.labels(meta.tier).observe(meta.overhead_ms() / 1000.0)
        m.requests.labels(meta.tier, "200").inc()
    if done or usage is not None:
        m.duration.labels(meta.tier).observe(elapsed)
    if usage:
        m.tokens.labels(meta.tier, "input").inc(usage.get("prompt_tokens", 0))
        m.tokens.labels(meta.tier, "output").inc(usage.get("completion_tokens", 0))
    # Time per output token only where tokens arrived over time (a stream): the tokens after
    # the first byte share the time after it, as OTel's gen_ai.server.time_per_output_token.
    output = (usage or {}).get("completion_tokens", 0)
    if done and meta.first_byte_s is not None and output > 1:
        m.tpot.labels(meta.tier).observe((elapsed - meta.first_byte_s) / (output - 1))
