"""Relaying one chat request to a replica's engine, tied to the caller and to the lease.

The engine request is an httpx stream in both modes: closing it before the end closes the
connection, and vLLM aborts the request (frees its KV blocks and batch slot). That happens
when the caller leaves (before or after the first token) and when a drain deadline evicts
the lease.

Both steps are spans of the request's trace (``core.admit``, ``core.engine``); the engine
request carries ``traceparent``, so vLLM's own spans (``--otlp-traces-endpoint``) join it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from typing import TYPE_CHECKING, TypeVar

import httpx

from core.replica import Lease
from shared import tracing
from shared.race import batches, first_or_stop

if TYPE_CHECKING:
    from core.admission import Priority
    from core.pool import Pool

T = TypeVar("T")


class Evicted(Exception):
    """The replica's drain deadline passed while this request was still running."""


async def unless_evicted(lease: Lease, work: Awaitable[T]) -> T:
    """Await ``work`` unless the lease is evicted first (then cancel it and raise)."""
    if lease.evicted.is_set():
        raise Evicted()
    return await first_or_stop(work, lease.evicted.wait(), Evicted, _close_late)


async def _close_late(late: object) -> None:
    """A response that came just as the lease was evicted: close it (errors ignored)."""
    if isinstance(late, httpx.Response):
        with contextlib.suppress(BaseException):
            await late.aclose()


@tracing.traced("core.admit")
async def admit(
    pool: Pool, priority: Priority, key: str | None, timeout: float, exclude: frozenset[str]
) -> Lease:
    """Wait in the admission queue for a replica (a span: queueing shows in the trace)."""
    lease = await pool.admit(priority, key, timeout, exclude)
    tracing.set_attributes(edgecore__replica=lease.replica.name, edgecore__priority=priority)
    return lease


@tracing.traced("core.engine")
async def send(
    lease: Lease, body: bytes, headers: dict[str, str], path: str = "/v1/chat/completions"
) -> httpx.Response:
    """Send the request to the lease's engine (streamed), with this trace's traceparent;
    the span ends when the engine's response headers arrive."""
    client = lease.replica.client
    request = client.build_request(
        "POST", path, content=body, headers=tracing.inject(dict(headers))
    )
    tracing.set_attributes(edgecore__replica=lease.replica.name)
    response = await unless_evicted(lease, client.send(request, stream=True))
    tracing.set_attributes(http__response__status_code=response.status_code)
    return response


async def chunks(
    response: httpx.Response, lease: Lease, keepalive_s: float
) -> AsyncGenerator[bytes | None, None]:
    """The engine's bytes, whatever arrived together as one chunk (one write to the edge);
    ``None`` after ``keepalive_s`` of silence; Evicted on eviction.

    The read is never cancelled by the timer, so nothing is lost.
    """
    raw: AsyncIterator[bytes] = response.aiter_raw()
    async with contextlib.aclosing(batches(raw, keepalive_s, lease.evicted, Evicted)) as read:
        async for batch in read:
            yield None if batch is None else b"".join(batch)
