"""Serve an ASGI app with Hypercorn until SIGINT/SIGTERM, then shut down gracefully."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

from hypercorn.asyncio import serve as hypercorn_serve
from hypercorn.config import Config
from starlette.types import ASGIApp

from shared import hangup

# h2 stream ids run out at 2**31 (one per request, odd ids): a client must reconnect then.
MAX_REQUESTS_PER_CONNECTION = 2**30


def hypercorn_config(
    host: str,
    port: int,
    *,
    certfile: Path | None = None,
    keyfile: Path | None = None,
    graceful_timeout: float = 10.0,
) -> Config:
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    # Hypercorn speaks HTTP/2 via ALPN with TLS, and h2c prior knowledge without.
    config.alpn_protocols = ["h2", "http/1.1"]
    if certfile and keyfile:
        config.certfile = str(certfile)
        config.keyfile = str(keyfile)
    config.graceful_timeout = graceful_timeout
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    # Long-TTFT streams must not be cut by idle timeouts between keepalive frames.
    config.keep_alive_timeout = 75.0
    # Many concurrent streams per HTTP/2 connection from the edge's pool.
    config.h2_max_concurrent_streams = 256
    # Hypercorn closes a connection after 1,000 requests by default, and on HTTP/2 that
    # GOAWAY cuts the streams still open on it: every 1,000th request an edge's long-lived
    # connection failed a few requests (and three in a row opened the core's breaker).
    config.keep_alive_max_requests = MAX_REQUESTS_PER_CONNECTION
    return config


async def serve(
    app: ASGIApp, config: Config, shutdown_trigger: Callable[[], Awaitable[object]]
) -> None:
    """Hypercorn's ``serve``, with connections that end when their client hangs up
    (``shared.hangup``)."""
    hangup.install()
    await hypercorn_serve(app, config, shutdown_trigger=shutdown_trigger)  # type: ignore[arg-type]


async def serve_until_signal(app: ASGIApp, config: Config) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await serve(app, config, stop.wait)


EventLoop = Literal["auto", "uvloop", "asyncio"]


def loop_factory(name: EventLoop) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when asked (or, for auto, when installed); None: asyncio's own."""
    if name == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if name == "uvloop":
            raise SystemExit("event_loop=uvloop, but uvloop is not installed") from None
        return None
    return uvloop.new_event_loop


def run(app: ASGIApp, config: Config, loop: EventLoop = "asyncio") -> None:
    with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
        runner.run(serve_until_signal(app, config))
