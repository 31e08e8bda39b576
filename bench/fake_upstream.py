"""Fake OpenAI-compatible upstreams, for the benchmarks and the tests (the one place they live).

    .venv/bin/python -m bench.fake_upstream PORT [--tokens 20] [--gap-ms 0]
    .venv/bin/python -m bench.fake_upstream PORT --status 429
    .venv/bin/python -m bench.fake_upstream PORT --kind stalling-core|engine

``fast`` (the default, ``make_app``): ``POST /v1/chat/completions`` answers ``--tokens``
chunks of chat SSE with no delay (then a usage chunk when ``stream_options.include_usage``
asks for one, then ``[DONE]``), or one JSON body when ``stream`` is false, to isolate proxy
cost. With ``--gap-ms``, the chunks come that far apart, each on its own, as an engine's
tokens do (a proxy's cost per token, not per request). ``/readyz``, ``/healthz``,
``/health``, ``/v1/models`` and ``/metrics`` (vLLM's load gauges, all idle, so the core's
balancer can poll it like an engine) answer too.

``--status S`` (``error_app``): a core that always answers status S (with ``retry-after``),
injecting faults the real core can't on demand; ``/calls`` counts its chat requests.

``stalling-core`` (``stalling_core``): a core whose streams send two chunks and then nothing,
ever (its event loop stays alive: /readyz answers). /stats counts the streams and those the
caller aborted. ``engine`` (``engine``): a tiny vLLM stand-in: /health, /metrics, /v1/models,
and chat completions (streamed or not) of a few tokens. Freeze it with SIGSTOP: its socket
still accepts connections.

``make_engine_app`` (in process): an engine (vLLM's part in front of a core, or a core in
front of an edge) that streams ``WORDS`` after a prefill delay, sending its response headers
at once, and records the headers it was sent (traceparent).

Served by Hypercorn like the core: HTTP/1.1 and h2c (prior knowledge) on one port, so the
edge (HTTP/2) and LiteLLM (HTTP/1.1) talk to the same server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from shared.errors import error_body
from shared.serve import hypercorn_config, run

MODEL = "smollm2-135m-instruct"
WORDS = ["Paris", " is", " the", " capital", " of", " France", "."]
SLOW_START = "slow start:"  # make_engine_app: a prompt whose first event waits for prefill

IDLE_ENGINE_METRICS = "".join(
    f'# TYPE {name} gauge\n{name}{{model_name="fake"}} 0.0\n'
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
    )
)


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def chunk(
    model: str,
    delta: dict[str, Any] | None,
    finish: str | None = None,
    *,
    cid: str = "chatcmpl-fake",
    created: int | None = None,
    **extra: Any,
) -> bytes:
    """One ``chat.completion.chunk`` SSE event; ``delta`` None: a choiceless (usage) chunk."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    event = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()) if created is None else created,
        "model": model,
        "choices": choices,
        **extra,
    }
    return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"


def completion(
    model: str, content: str, used: dict[str, int], *, cid: str = "chatcmpl-fake"
) -> JSONResponse:
    """One whole ``chat.completion`` answer."""
    message = {"role": "assistant", "content": content}
    return JSONResponse(
        {
            "id": cid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": used,
        }
    )


DONE = b"data: [DONE]\n\n"


async def _ready(request: Request) -> Response:
    return JSONResponse({"status": "ready"})


def _models(model: str | None) -> Route:
    data = [] if model is None else [{"id": model, "object": "model"}]

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": data})

    return Route("/v1/models", models)


def _text(path: str, text: str) -> Route:
    async def answer(request: Request) -> Response:
        return PlainTextResponse(text)

    return Route(path, answer)


def make_app(tokens: int, gap_s: float = 0.0) -> Starlette:
    """Answers ``tokens`` chunks at once, or ``gap_s`` apart (the benchmarks' upstream)."""
    words = [f" w{i}" for i in range(tokens)]

    async def chat(request: Request) -> Response:
        body = json.loads(await request.body())
        model = body.get("model", "fake")
        cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        used = usage(10, tokens)
        if not body.get("stream"):
            return completion(model, "".join(words), used, cid=cid)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        async def events() -> AsyncIterator[bytes]:
            yield chunk(model, {"role": "assistant", "content": ""}, cid=cid, created=created)
            for i, word in enumerate(words):
                if gap_s:
                    await asyncio.sleep(gap_s)
                finish = "stop" if i == tokens - 1 else None
                yield chunk(model, {"content": word}, finish, cid=cid, created=created)
            if include_usage:
                yield chunk(model, None, cid=cid, created=created, usage=used)
            yield DONE

        return StreamingResponse(events(), media_type="text/event-stream")

    async def embeddings(request: Request) -> Response:
        """An embedding engine's answer: one 4-dimensional vector per input."""
        body = json.loads(await request.body())
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {"object": "embedding", "index": i, "embedding": [float(i), 0.5, 0.25, 0.125]}
            for i in range(len(inputs))
        ]
        used = {"prompt_tokens": 3 * len(inputs), "total_tokens": 3 * len(inputs)}
        return JSONResponse({"object": "list", "model": body["model"], "data": data,
                             "usage": used})  # fmt: skip

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            _models(None),
            Route("/readyz", _ready),
            Route("/healthz", _ready),
            Route("/health", _ready),
            _text("/metrics", IDLE_ENGINE_METRICS),
        ]
    )


def error_app(status: int) -> Starlette:
    """Always answers ``status``; ``/calls`` says how many chat requests came."""
    calls = {"chat": 0}

    async def chat(request: Request) -> Response:
        calls["chat"] += 1
        return JSONResponse(
            error_body(status, "injected fault"), status_code=status, headers={"retry-after": "1"}
        )

    async def count(request: Request) -> Response:
        return PlainTextResponse(str(calls["chat"]))

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/calls", count),
            Route("/readyz", _ready),
            Route("/healthz", _ready),
        ]
    )


def make_engine_app(prefill_s: float, seen: list[dict[str, str]], model: str = MODEL) -> Starlette:
    """Streams ``WORDS`` (one token each): headers and a role-only chunk at once, the first
    content token after ``prefill_s``; ``seen`` gets each chat request's headers. A prompt
    that starts with ``SLOW_START`` gets its role chunk after the prefill too (its first
    event, not only its first token, waits)."""
    used = usage(9, len(WORDS))

    async def stream(slow_start: bool) -> AsyncIterator[bytes]:
        if not slow_start:
            yield chunk(model, {"role": "assistant", "content": ""})
        await asyncio.sleep(prefill_s)
        if slow_start:
            yield chunk(model, {"role": "assistant", "content": ""})
        for word in WORDS:
            yield chunk(model, {"content": word})
            await asyncio.sleep(0.005)
        yield chunk(model, {}, "stop")
        yield chunk(model, None, created=0, usage=used)
        yield DONE

    async def chat(request: Request) -> Response:
        seen.append(dict(request.headers))
        payload = await request.json()
        if payload.get("stream"):
            messages = payload.get("messages") or [{}]
            slow = str(messages[-1].get("content", "")).startswith(SLOW_START)
            return StreamingResponse(stream(slow), media_type="text/event-stream")
        await asyncio.sleep(prefill_s)
        return completion(model, "".join(WORDS), used)

    async def ok(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            _models(model),
            _text("/metrics", ""),
            Route("/health", ok),
            Route("/readyz", ok),
            Route("/healthz", ok),
        ]
    )


def stalling_core() -> Starlette:
    stats = {"streams": 0, "aborted": 0}

    async def chat(request: Request) -> Response:
        await request.body()
        stats["streams"] += 1

        async def body() -> AsyncIterator[bytes]:
            try:
                yield chunk(MODEL, {"content": "Once"})
                yield chunk(MODEL, {"content": " upon"})
                await asyncio.sleep(3600)  # stalls: no data, no comments
            except BaseException:
                stats["aborted"] += 1  # the caller reset the stream
                raise

        return StreamingResponse(body(), media_type="text/event-stream")

    async def get_stats(request: Request) -> Response:
        return JSONResponse(stats)

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/readyz", _ready),
            Route("/healthz", _ready),
            Route("/stats", get_stats),
        ]
    )


def engine() -> Starlette:
    words = ["Hello", " from", " a", " fake", " engine."]
    used = usage(3, 5)

    async def chat(request: Request) -> Response:
        payload = await request.json()
        if not payload.get("stream"):
            return completion(MODEL, "".join(words), used)

        async def body() -> AsyncIterator[bytes]:
            for w in words:
                yield chunk(MODEL, {"content": w})
                await asyncio.sleep(0.02)
            yield chunk(MODEL, {}, "stop")
            yield chunk(MODEL, None, usage=used)
            yield DONE

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            _text("/health", ""),
            _text(
                "/metrics",
                "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0.0\n"
                "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0.0\n",
            ),
            _models(MODEL),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("port", type=int)
    parser.add_argument("--tokens", type=int, default=20, help="content chunks per answer")
    parser.add_argument("--gap-ms", type=float, default=0.0, help="between content chunks")
    parser.add_argument("--status", type=int, help="always answer this status (error_app)")
    parser.add_argument("--kind", choices=("fast", "stalling-core", "engine"), default="fast")
    args = parser.parse_args()
    config = hypercorn_config("127.0.0.1", args.port)
    if args.status is not None:
        run(error_app(args.status), config)
    elif args.kind == "fast":
        run(make_app(args.tokens, args.gap_ms / 1000.0), config)
    else:
        app = stalling_core() if args.kind == "stalling-core" else engine()
        run(app, hypercorn_config("127.0.0.1", args.port, graceful_timeout=1.0))


if __name__ == "__main__":
    main()
