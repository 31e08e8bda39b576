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
from shared import accesslog, completions, sse
from shared.streaming import EventStreamResponse


@dataclass
class Meta:
    """Per-request facts that end up in headers, metrics and the access log."""

    request_id: str
    started: float  # perf_counter at arrival
    tier: str = "edge"
    cache: str = "off"
    degraded: str | None = None
    tier_wait_s: float = 0.0  # time spent waiting on the tier before its first byte
    first_token_s: float | None = None  # seconds from arrival to a stream's first content token
    tenant: str | None = None
    request_model: str = ""
    response_model: str = ""
    extra_headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The access log line (shared/accesslog.py) reads this request's facts at its end.
        record = accesslog.current()
        if record is not None:
            record.source = self

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


def first_token(m: EdgeMetrics, meta: Meta) -> None:
    """A stream's first content token is ready to send: time to first token, once.

    Only streams have one (a JSON answer is measured by its duration); for the core it is
    the first event with content, not the response headers, which come before prefill.
    """
    if meta.first_token_s is None:
        meta.first_token_s = time.perf_counter() - meta.started
        m.ttft.labels(meta.tier).observe(meta.first_token_s)


def observe(
    m: EdgeMetrics, meta: Meta, usage: dict[str, Any] | None, *, done: bool = False
) -> None:
    """Record the answer's start once (done=False: status, overhead) and its end (usage,
    duration; done=True for a stream's end)."""
    elapsed = time.perf_counter() - meta.started
    if not done:
        m.overhead.labels(meta.tier).observe(meta.overhead_ms() / 1000.0)
        m.requests.labels(meta.tier, "200").inc()
    if done or usage is not None:
        m.duration.labels(meta.tier).observe(elapsed)
    if usage:
        request_model = meta.request_model or "unknown"
        response_model = meta.response_model or request_model
        for kind, key in (("input", "prompt_tokens"), ("output", "completion_tokens")):
            m.tokens.labels(meta.tier, "chat", kind, request_model, response_model).observe(
                usage.get(key) or 0
            )
    # Time per output token only where tokens arrived over time (a stream): the tokens after
    # the first share the time after it, as OTel's gen_ai.server.time_per_output_token.
    output = (usage or {}).get("completion_tokens") or 0
    if done and meta.first_token_s is not None and output > 1:
        m.tpot.labels(meta.tier).observe((elapsed - meta.first_token_s) / (output - 1))
