"""Waiting for a core's first byte: bounded by a deadline and by the core's ``down`` event,
timed (the core's share of the edge's overhead figure), and a request abandoned before its
response headers gets its HTTP/2 stream reset.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import h2.errors
import httpx

from edge.upstream.errors import CoreUnavailable
from edge.upstream.h2_cancel import close_early

log = logging.getLogger("edgecore.edge.core")


class Waited:
    """httpx trace hook: how long the request waited for the core's response headers once it
    was sent (the core's time, which the edge's overhead figure leaves out: the edge's own
    work on either side of it, HTTP/2 framing included, stays in). Every event goes on to
    ``inner``."""

    def __init__(self, inner: Callable[[str, dict[str, Any]], Awaitable[None]]) -> None:
        self.inner = inner
        self.seconds = 0.0
        self._since = 0.0

    async def __call__(self, name: str, info: dict[str, Any]) -> None:
        if name.endswith(".receive_response_headers.started"):
            self._since = time.perf_counter()
        elif name.endswith(".receive_response_headers.complete"):
            self.seconds = time.perf_counter() - self._since
        await self.inner(name, info)


class ResetIfAbandoned:
    """httpx trace hook: a request abandoned before its response headers (the client left,
    the first-byte deadline passed, the core was found frozen) gets its HTTP/2 stream reset.

    httpcore 1.0 forgets such a stream without telling the core (see edge/h2_cancel.py), so
    the core would go on answering nobody: a JSON answer's headers only come with the whole
    answer. Every step is guarded; without the internals the old behaviour remains.
    """

    _STEPS = (
        "http2.send_request_headers.failed",
        "http2.send_request_body.failed",
        "http2.receive_response_headers.failed",
    )

    def __init__(self, transport: httpx.AsyncHTTPTransport) -> None:
        self.transport = transport
        self.stream_id: int | None = None
        self.request: Any = None  # httpcore's request (its write timeout)

    async def __call__(self, name: str, info: dict[str, Any]) -> None:
        if name == "http2.send_request_headers.started":
            self.stream_id, self.request = info.get("stream_id"), info.get("request")
        elif name in self._STEPS and isinstance(info.get("exception"), asyncio.CancelledError):
            await self._reset()

    async def _reset(self) -> None:
        stream_id = self.stream_id
        try:
            for pooled in getattr(getattr(self.transport, "_pool", None), "connections", []):
                conn: Any = getattr(pooled, "_connection", None)
                if conn is None or stream_id not in getattr(conn, "_events", {}):
                    continue
                h2_stream = conn._h2_state.streams.get(stream_id)
                if h2_stream is not None and not h2_stream.closed:
                    conn._h2_state.reset_stream(stream_id, error_code=h2.errors.ErrorCodes.CANCEL)
                    await asyncio.shield(conn._write_outgoing_data(self.request))
                return
        except Exception as exc:  # never let cleanup fail the request path
            log.debug("could not reset HTTP/2 stream %s: %r", stream_id, exc)


async def first_byte(
    send: Awaitable[httpx.Response], down: asyncio.Event, deadline_s: float
) -> httpx.Response:
    """``send``'s response headers, or CoreUnavailable when the deadline passes or the core
    is found down first (a frozen core would otherwise hold the request to the deadline)."""
    task = asyncio.ensure_future(send)
    dead: asyncio.Future[Any] = asyncio.ensure_future(down.wait())
    try:
        done, _ = await asyncio.wait(
            {task, dead}, timeout=deadline_s, return_when=asyncio.FIRST_COMPLETED
        )
    except BaseException:
        abandon(task)
        raise
    finally:
        dead.cancel()
    if task in done:
        return task.result()
    abandon(task)
    if down.is_set():
        raise CoreUnavailable("core-down", "its health probe failed while we waited")
    raise CoreUnavailable("core-timeout", f"no first byte in {deadline_s:g}s")


def abandon(task: asyncio.Future[httpx.Response]) -> None:
    """Stop waiting for ``task``; close its response if it came anyway."""

    def close_late(done: asyncio.Future[httpx.Response]) -> None:
        if not done.cancelled() and done.exception() is None:
            late = asyncio.ensure_future(close_early(done.result()))
            _LATE.add(late)
            late.add_done_callback(_LATE.discard)

    task.add_done_callback(close_late)
    task.cancel()


_LATE: set[asyncio.Future[None]] = set()  # closes in flight (a strong reference)
