"""The services' Hypercorn server (shared.serve), against a real server on loopback.

Hypercorn closes a connection after ``keep_alive_max_requests`` (1,000 by default); on
HTTP/2 its GOAWAY cuts the streams still open on it. An edge keeps a few long-lived h2c
connections to each core, so that default failed a few requests every 1,000 and could
open the core's breaker (found by bench.forward_overhead at --requests 1000).

Hypercorn 0.18 also kept a connection its client had closed while idle open until
``keep_alive_timeout`` (75 s): ``shared.hangup`` ends it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import httpx
import psutil
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route

from shared import hangup
from shared.serve import hypercorn_config, serve
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
            serve(app, hypercorn_config("127.0.0.1", port), shutdown_trigger=stop.wait)
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


async def _hello(request: Request) -> PlainTextResponse:
    return PlainTextResponse("hello")


async def _stamps(request: Request) -> PlainTextResponse:
    """When the server read this request, and when the app began (one clock: one process)."""
    return PlainTextResponse(f"{hangup.received()!r} {time.perf_counter()!r}")


@contextlib.asynccontextmanager
async def _server(port: int) -> AsyncIterator[str]:
    app = Starlette(routes=[Route("/", _hello), Route("/stamps", _stamps)])
    stop = asyncio.Event()
    server = asyncio.create_task(serve(app, hypercorn_config("127.0.0.1", port), stop.wait))
    url = f"http://127.0.0.1:{port}/"
    try:
        async with httpx.AsyncClient() as probe:
            for _ in range(100):
                try:
                    await probe.get(url)
                    break
                except httpx.HTTPError:
                    await asyncio.sleep(0.05)
        yield url
    finally:
        stop.set()
        await server


def _server_ends(port: int) -> list[str]:
    """States of the server's ends of its connections on ``port`` (client and server share
    this process: the server's end is the one whose local port is ``port``)."""
    return [
        c.status
        for c in psutil.Process().net_connections(kind="tcp")
        if c.laddr and c.laddr.port == port and c.raddr
    ]


async def _until_closed(port: int, within_s: float) -> list[str]:
    """The server's ends still open after up to ``within_s`` (the server shares this loop)."""
    for _ in range(int(within_s / 0.05)):
        if not _server_ends(port):
            break
        await asyncio.sleep(0.05)
    return _server_ends(port)


def test_connections_whose_clients_hang_up_are_closed_at_once() -> None:
    """Not 75 s later, one file descriptor each: HTTP/1.1 and HTTP/2 (h2c) clients."""
    port = free_port()

    async def main() -> tuple[list[str], list[str]]:
        async with _server(port) as url:
            await _until_closed(port, 5.0)  # the readiness probe's connection
            for _ in range(10):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
                assert (await reader.readuntil(b"hello")).startswith(b"HTTP/1.1 200")
                writer.close()
                await writer.wait_closed()
            after_h11 = await _until_closed(port, 5.0)
            async with httpx.AsyncClient(http1=False, http2=True) as client:
                assert (await client.get(url)).http_version == "HTTP/2"
            return after_h11, await _until_closed(port, 5.0)

    assert hangup.install()
    after_h11, after_h2 = asyncio.run(main())
    assert after_h11 == [], after_h11  # CLOSE_WAIT x 10 for 75 s before shared.hangup
    assert after_h2 == [], after_h2


def test_an_unknown_hypercorn_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    class Other:
        pass

    monkeypatch.setattr(hangup.hypercorn_run, "TCPServer", Other)
    assert not hangup.install()
    assert hangup.hypercorn_run.TCPServer is Other


def test_a_request_is_stamped_when_its_bytes_are_read_before_the_app_runs() -> None:
    """The edge's overhead counts from the read (``TierHeaders``), Hypercorn's parsing and
    the wait for the loop included: the stamp lies between the client's last write and the
    app's start, on HTTP/1.1 (one request split over two writes) and on h2c."""
    port = free_port()

    async def main() -> list[tuple[float, str]]:
        seen: list[tuple[float, str]] = []
        async with _server(port) as url:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /stamps HTTP/1.1\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
            sent = time.perf_counter()
            writer.write(b"host: x\r\n\r\n")
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            seen.append((sent, (await reader.readexactly(length)).decode()))
            writer.close()
            await writer.wait_closed()
            async with httpx.AsyncClient(http1=False, http2=True) as client:
                for _ in range(3):  # a new stream on the same connection each time
                    sent = time.perf_counter()
                    r = await client.get(url + "stamps")
                    assert r.http_version == "HTTP/2"
                    seen.append((sent, r.text))
        return seen

    assert hangup.install()
    for sent, text in asyncio.run(main()):
        read, began = (float(x) for x in text.split())  # "None" fails here: no stamp
        assert sent <= read <= began, (sent, read, began)
