"""The floor of the edge's forward path: the edge's server and client, with no edgecore code.

    .venv/bin/python -m bench.bare_relay PORT UPSTREAM

Starlette on Hypercorn (the edge's config), one httpx client made at start as the edge
makes its core connections (HTTP/2, h2c, one connection): ``POST /v1/chat/completions``
goes upstream as it came, and the answer comes back as it arrives. No auth, parsing,
validation, routing, limits, tracing, access log or metrics. ``bench.forward_overhead``
measures it beside the edge, so "edge / bare" is what the edge's own code costs, and
"bare / LiteLLM" is the best the chosen server and client could do.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from shared.serve import hypercorn_config, run


def make_app(upstream: str) -> Starlette:
    client = httpx.AsyncClient(
        base_url=upstream,
        http1=False,  # h2c with prior knowledge, as the edge speaks to a core over plain HTTP
        http2=True,
        timeout=60,
        limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
    )

    async def chat(request: Request) -> Response:
        sent = client.build_request(
            "POST",
            "/v1/chat/completions",
            content=await request.body(),
            headers={"content-type": "application/json"},
        )
        answer = await client.send(sent, stream=True)
        return StreamingResponse(
            answer.aiter_raw(),
            status_code=answer.status_code,
            media_type=answer.headers.get("content-type"),
            background=BackgroundTask(answer.aclose),
        )

    async def ready(request: Request) -> Response:
        return JSONResponse({"status": "ready"})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with client:
            yield

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/readyz", ready),
        ],
        lifespan=lifespan,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("port", type=int)
    parser.add_argument("upstream")
    args = parser.parse_args()
    run(make_app(args.upstream), hypercorn_config("127.0.0.1", args.port))


if __name__ == "__main__":
    main()
