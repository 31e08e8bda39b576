"""A response from a core, with the bookkeeping to release its stream."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from functools import partial

import httpx

from edge.upstream.cores import Connection, Core
from edge.upstream.errors import CoreStalled
from edge.upstream.h2_cancel import close_early
from shared.race import batches


@dataclass
class Upstream:
    """A response from a core, with the bookkeeping to release its stream."""

    response: httpx.Response
    core: Core
    connection: Connection
    # Time spent waiting on the core: its response headers, then its first bytes or its
    # whole body (the tier's share, which the edge's overhead figure leaves out).
    waited_s: float = 0.0
    _released: bool = False

    async def close(self) -> None:
        """Close (resetting the HTTP/2 stream if unfinished) and release the slot; idempotent."""
        if not self._released:
            self._released = True
            self.connection.active -= 1
        await close_early(self.response)

    def succeeded(self) -> None:
        self.core.breaker.success()

    def failed(self) -> None:
        """The core failed mid-answer (not a client cancel)."""
        self.core.breaker.failure()

    async def chunks(self, keepalive_s: float | None = None) -> AsyncGenerator[bytes | None, None]:
        """The response's bytes, whatever arrived together as one chunk (a relay writes it
        once); ``None`` after ``keepalive_s`` of silence; CoreStalled after ``idle_s``
        without any, or as soon as the probe finds the core down while this waits. (httpx's
        own read timeout is not enough on HTTP/2: any stream's data on the connection resets
        it.)"""
        idle_s = self.core.timeouts.idle_s
        read = batches(
            self.response.aiter_bytes(), keepalive_s, self.core.down,
            partial(CoreStalled, "the core stopped answering (its health probe failed)"),
            idle_s=idle_s, stalled=partial(CoreStalled, f"the core sent nothing for {idle_s:g}s"),
        )  # fmt: skip
        since: float | None = time.perf_counter()
        async with contextlib.aclosing(read) as chunks:
            async for batch in chunks:
                if since is not None:
                    self.waited_s += time.perf_counter() - since
                    since = None
                yield None if batch is None else b"".join(batch)

    async def read(self) -> bytes:
        """The whole body (a JSON answer); the time it took is the core's."""
        since = time.perf_counter()
        try:
            return await self.response.aread()
        finally:
            self.waited_s += time.perf_counter() - since
