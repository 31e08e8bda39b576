"""Upstreams that fail in ways the real parts can't on demand (tests/test_frozen.py).

python -m tests.fake_upstreams stalling-core PORT
    A core whose streams send two chunks and then nothing, ever (its event loop stays
    alive: /readyz answers). /stats counts the streams and those the caller aborted.
python -m tests.fake_upstreams engine PORT
    A tiny vLLM stand-in: /health, /metrics, /v1/models, and chat completions (streamed or
    not) of a few tokens. Freeze it with SIGSTOP: its socket still accepts connections.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from shared.serve import hypercorn_config, run

MODEL = "smollm2-135m-instruct"


def _chunk(content: str | None, finish: str | None = None) -> bytes:
    delta = {"content": content} if content is not None else {}
    event = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def stalling_core() -> Starlette:
    stats = {"streams": 0, "aborted": 0}

    async def chat(request: Request) -> Response:
        await request.body()
        stats["streams"] += 1

        async def body() -> AsyncIterator[bytes]:
            try:
                yield _chunk("Once")
                yield _chunk(" upon")
                await asyncio.sleep(3600)  # stalls: no data, no comments
            except BaseException:
                stats["aborted"] += 1  # the caller reset the stream
                raise

        return StreamingResponse(body(), media_type="text/event-stream")

    async def ready(request: Request) -> Response:
        return JSONResponse({"status": "ready"})

    async def get_stats(request: Request) -> Response:
        return JSONResponse(stats)

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/readyz", ready),
            Route("/healthz", ready),
            Route("/stats", get_stats),
        ]
    )


def engine() -> Starlette:
    async def chat(request: Request) -> Response:
        payload = await request.json()
        words = ["Hello", " from", " a", " fake", " engine."]
        if payload.get("stream"):

            async def body() -> AsyncIterator[bytes]:
                for w in words:
                    yield _chunk(w)
                    await asyncio.sleep(0.02)
                yield _chunk(None, "stop")
                usage = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
                event = {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                         "model": MODEL, "choices": [], "usage": usage}  # fmt: skip
                yield b"data: " + json.dumps(event).encode() + b"\n\n"
                yield b"data: [DONE]\n\n"

            return StreamingResponse(body(), media_type="text/event-stream")
        return JSONResponse(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": MODEL,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "".join(words)},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
            }
        )

    async def health(request: Request) -> Response:
        return PlainTextResponse("")

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0.0\n"
            "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0.0\n"
        )

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/health", health),
            Route("/metrics", metrics),
            Route("/v1/models", models),
        ]
    )


if __name__ == "__main__":
    kind, port = sys.argv[1], int(sys.argv[2])
    app = stalling_core() if kind == "stalling-core" else engine()
    run(app, hypercorn_config("127.0.0.1", port, graceful_timeout=1.0))
