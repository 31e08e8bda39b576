"""A core that always answers one error status: injects faults the real core can't on demand.

python -m tests.fake_core PORT STATUS
"""

from __future__ import annotations

import sys

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from shared.errors import error_body
from shared.serve import hypercorn_config, run


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


if __name__ == "__main__":
    port, status = int(sys.argv[1]), int(sys.argv[2])
    run(make_app(status), hypercorn_config("127.0.0.1", port))
