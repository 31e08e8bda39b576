"""The services' Hypercorn configuration (shared.serve), against a real server on loopback.

Hypercorn closes a connection after ``keep_alive_max_requests`` (1,000 by default); on
HTTP/2 its GOAWAY cuts the streams still open on it. An edge keeps a few long-lived h2c
connections to each core, so that default failed a few requests every 1,000 and could
open the core's breaker (found by bench.forward_overhead at --requests 1000).
"""

from __future__ import annotations

import asyncio

import httpx
from hypercorn.asyncio import serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from shared.serve import hypercorn_config
from tests.conftest import free_port


async def _events(request: Request) -> StreamingResponse:
    # Read the body first, as the core does: Hypercorn 0.17 drops the whole connection on a
    # DATA frame for a stream it already answered (a KeyError in its h2 protocol).
    await request.body()

    async def body() -> object:
        for i in range(3):
            yield f"data: {i}\n\n".encode()
            await asyncio.sleep(0)
        yield b"data: [DONE]\n\n"

    return StreamingResponse(body(), media_type="text/event-stream")


def test_one_h2c_connection_carries_more_than_a_thousand_streams() -> None:
    app = Starlette(routes=[Route("/", _events, methods=["POST"])])
    port = free_port()

    async def main() -> list[str]:
        stop = asyncio.Event()
        server = asyncio.create_task(
            serve(app, hypercorn_config("127.0.0.1", port), shutdown_trigger=stop.wait)  # type: ignore[arg-type]
        )
        failures: list[str] = []
        try:
            limits = httpx.Limits(max_connections=1)
            async with httpx.AsyncClient(
                http1=False, http2=True, limits=limits, base_url=f"http://127.0.0.1:{port}"
            ) as client:
                for _ in range(100):  # the server is up
                    try:
                        await client.post("/")
                        break
                    except httpx.HTTPError:
                        await asyncio.sleep(0.05)
                sem = asyncio.Semaphore(8)

                async def one(i: int) -> None:
                    async with sem:
                        try:
                            r = await client.post("/")
                            assert r.text.endswith("data: [DONE]\n\n"), r.text
                        except Exception as exc:  # counted, not raised
                            failures.append(f"{i}: {exc!r}")

                await asyncio.gather(*(one(i) for i in range(1200)))
        finally:
            stop.set()
            await server
        return failures

    failures = asyncio.run(main())
    assert not failures, failures[:3]
