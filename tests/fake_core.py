"""A core that always answers one error status: injects faults the real core can't on demand.

python -m tests.fake_core PORT STATUS

``make_engine_app`` is a second fake: an OpenAI-style engine (vLLM's part in front of a
core, or a core in front of an edge) that streams a fixed answer after a prefill delay,
sending its response headers at once, and records the headers it was sent (traceparent).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from shared.errors import error_body
from shared.serve import hypercorn_config, run

WORDS = ["Paris", " is", " the", " capital", " of", " France", "."]


def make_app(status: int) -> Starlette:
    calls = {"chat": 0}

    async def chat(request: Request) -> Response:
        calls["chat"] += 1
        return JSONResponse(
            error_body(status, "injected fault"), status_code=status, headers={"retry-after": "1"}
        )

    async def count(request: Request) -> Response:
        return PlainTextResponse(str(calls["chat"]))

    async def ready(request: Request) -> Response:
        return JSONResponse({"status": "ready"})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/calls", count),
            Route("/readyz", ready),
            Route("/healthz", ready),
        ]
    )


def make_engine_app(
    prefill_s: float, seen: list[dict[str, str]], model: str = "smollm2-135m-instruct"
) -> Starlette:
    """Streams ``WORDS`` (one token each): headers and a role-only chunk at once, the first
    content token after ``prefill_s``; ``seen`` gets each chat request's headers."""

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        body = {
            "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }  # fmt: skip
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    usage = {"prompt_tokens": 9, "completion_tokens": len(WORDS), "total_tokens": 9 + len(WORDS)}

    async def stream() -> AsyncIterator[bytes]:
        yield chunk({"role": "assistant", "content": ""})
        await asyncio.sleep(prefill_s)
        for word in WORDS:
            yield chunk({"content": word})
            await asyncio.sleep(0.005)
        yield chunk({}, "stop")
        final = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                 "model": model, "choices": [], "usage": usage}  # fmt: skip
        yield b"data: " + json.dumps(final).encode() + b"\n\n"
        yield b"data: [DONE]\n\n"

    async def chat(request: Request) -> Response:
        seen.append(dict(request.headers))
        payload = await request.json()
        if payload.get("stream"):
            return StreamingResponse(stream(), media_type="text/event-stream")
        await asyncio.sleep(prefill_s)
        return JSONResponse({
            "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
            "model": model, "usage": usage,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "".join(WORDS)}}],
        })  # fmt: skip

    async def ok(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def metrics(request: Request) -> Response:
        return PlainTextResponse("")

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": model, "object": "model"}]})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models),
            Route("/metrics", metrics),
            Route("/health", ok),
            Route("/readyz", ok),
            Route("/healthz", ok),
        ]
    )


if __name__ == "__main__":
    port, status = int(sys.argv[1]), int(sys.argv[2])
    run(make_app(status), hypercorn_config("127.0.0.1", port))
