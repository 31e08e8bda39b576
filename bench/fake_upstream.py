"""A fast OpenAI-compatible upstream: streams fixed tokens at once, to isolate proxy cost.

    .venv/bin/python -m bench.fake_upstream PORT [--tokens 20]

``POST /v1/chat/completions`` answers ``--tokens`` chunks of chat SSE with no delay (then a
usage chunk when ``stream_options.include_usage`` asks for one, then ``[DONE]``), or one
JSON body when ``stream`` is false. ``/readyz``, ``/healthz``, ``/health``, ``/v1/models``
and ``/metrics`` (vLLM's load gauges, all idle, so the core's balancer can poll it like an
engine) answer too.
Served by Hypercorn like the core: HTTP/1.1 and h2c (prior knowledge) on one port, so the
edge (HTTP/2) and LiteLLM (HTTP/1.1) talk to the same server.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from shared.serve import hypercorn_config, run

IDLE_ENGINE_METRICS = "".join(
    f'# TYPE {name} gauge\n{name}{{model_name="fake"}} 0.0\n'
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
    )
)


def make_app(tokens: int) -> Starlette:
    words = [f" w{i}" for i in range(tokens)]

    async def chat(request: Request) -> Response:
        body = json.loads(await request.body())
        model = body.get("model", "fake")
        cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        usage = {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": 10 + tokens}
        if not body.get("stream"):
            message = {"role": "assistant", "content": "".join(words)}
            return JSONResponse(
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": usage,
                }
            )
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict[str, str], finish: str | None, **extra: object) -> bytes:
            event = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }
            return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"

        async def events() -> AsyncIterator[bytes]:
            yield chunk({"role": "assistant", "content": ""}, None)
            for i, word in enumerate(words):
                yield chunk({"content": word}, "stop" if i == tokens - 1 else None)
            if include_usage:
                event = {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
                yield b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def ready(request: Request) -> Response:
        return JSONResponse({"status": "ready"})

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": []})

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(IDLE_ENGINE_METRICS)

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models),
            Route("/readyz", ready),
            Route("/healthz", ready),
            Route("/health", ready),
            Route("/metrics", metrics),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("port", type=int)
    parser.add_argument("--tokens", type=int, default=20, help="content chunks per answer")
    args = parser.parse_args()
    run(make_app(args.tokens), hypercorn_config("127.0.0.1", args.port))


if __name__ == "__main__":
    main()
