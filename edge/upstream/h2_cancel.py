"""Cancel an HTTP/2 stream that httpx is still receiving.

httpcore (1.0.x) does not send RST_STREAM when a response is closed before its end
(encode/httpcore#943, #1022; the fix in PR #1098 is not released). The core would then
never learn that the edge's client left and would keep its engine generating, and h2's
count of open streams drifts until the connection refuses new streams. Until httpcore
fixes it, we reset the stream ourselves through the connection's h2 state.

This touches httpcore internals; every step is guarded, and a version without them just
falls back to closing the response (the old behaviour). ``tests/test_disconnects.py`` proves the
abort end to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import h2.errors
import httpx

log = logging.getLogger("edgecore.edge.h2")


def _h2_stream(response: httpx.Response) -> tuple[Any, Any] | None:
    # (httpx's BoundAsyncStream, when a client sent it) -> AsyncResponseStream
    #   -> httpcore PoolByteStream -> HTTP2ConnectionByteStream(_connection, _request, _stream_id)
    stream: Any = response.stream
    connection = None
    for _ in range(4):
        connection = getattr(stream, "_connection", None)
        if connection is not None:
            break
        stream = getattr(stream, "_stream", None) or getattr(stream, "_httpcore_stream", None)
        if stream is None:
            return None
    if connection is None or not hasattr(connection, "_h2_state"):
        return None  # HTTP/1.1: closing the response closes the connection, which is enough
    return connection, stream


async def close_early(response: httpx.Response) -> None:
    """Reset the response's HTTP/2 stream (CANCEL) if it is still open, then close it.

    Shielded from cancellation: it usually runs because the task around it is being
    cancelled (the client left), and it must finish anyway.
    """
    await asyncio.shield(_close_early(response))


async def _close_early(response: httpx.Response) -> None:
    found = _h2_stream(response)
    if found is not None:
        connection, stream = found
        stream_id = stream._stream_id
        try:
            h2_stream = connection._h2_state.streams.get(stream_id)
            if h2_stream is not None and not h2_stream.closed:
                connection._h2_state.reset_stream(stream_id, error_code=h2.errors.ErrorCodes.CANCEL)
                await connection._write_outgoing_data(stream._request)
        except Exception as exc:  # never let cleanup fail the request path
            log.warning("could not reset HTTP/2 stream %s: %r", stream_id, exc)
    with contextlib.suppress(Exception):
        await response.aclose()
