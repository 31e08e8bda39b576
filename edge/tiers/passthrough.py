"""Relay a core stream as it is (completions, responses): pure framing checks, no rebuild.

A stream that breaks or ends without its last event gets an error event, never a silent
cut. Chat streams, which the edge reads (cache, usage), are relayed by ``CoreTier``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx

from edge.context import RequestContext
from edge.upstream.pool import Upstream
from shared import completions, sse

# A Responses API stream has no [DONE]: it ends with one of these events.
_RESPONSE_ENDS = ('"response.completed"', '"response.failed"', '"response.incomplete"')


def usage_of(body: bytes) -> dict[str, Any] | None:
    """``usage`` of a JSON answer or stream event (Responses API: ``response.usage``)."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    usage = data.get("usage") or (data.get("response") or {}).get("usage")
    return usage if isinstance(usage, dict) else None


def terminal(payload: str) -> bool:
    """The event that ends a stream: ``[DONE]`` (chat, completions) or a final response."""
    return payload.strip() == "[DONE]" or any(end in payload[:200] for end in _RESPONSE_ENDS)


async def relay_raw(
    upstream: Upstream, ctx: RequestContext, usage: dict[str, Any], keepalive_s: float | None
) -> AsyncGenerator[bytes, None]:
    """The core's bytes as they come, with a comment after ``keepalive_s`` of silence (a long
    prefill); ``usage`` is filled in from the stream's events."""
    decoder = sse.SSEDecoder()
    done = False
    try:
        # chunks(): CoreStalled (an httpx error) past the idle deadline or on a frozen core.
        async with contextlib.aclosing(upstream.chunks(keepalive_s)) as chunks:
            async for raw in chunks:
                ctx.tier_wait_s = upstream.waited_s  # the headers, then the first bytes
                if raw is None:
                    yield sse.KEEPALIVE
                    continue
                for payload in decoder.feed(raw):
                    done = done or terminal(payload)
                    if '"usage"' in payload:
                        usage.update(usage_of(payload.encode()) or {})
                    if ctx.first_token_s is None and '"text"' in payload:
                        ctx.first_token()
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
