"""Relaying one chat request to a replica's engine, tied to the caller and to the lease.

The engine request is an httpx stream in both modes: closing it before the end closes the
connection, and vLLM aborts the request (frees its KV blocks and batch slot). That happens
when the caller leaves (before or after the first token) and when a drain deadline evicts
the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from typing import Any, TypeVar

import httpx

from core.replica import Lease

T = TypeVar("T")


class Evicted(Exception):
    """The replica's drain deadline passed while this request was still running."""


async def unless_evicted(lease: Lease, work: Awaitable[T]) -> T:
    """Await ``work`` unless the lease is evicted first (then cancel it and raise)."""
    if lease.evicted.is_set():
        raise Evicted()
    task = asyncio.ensure_future(work)
    evict = asyncio.ensure_future(lease.evicted.wait())
    try:
        done, _ = await asyncio.wait({task, evict}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    finally:
        evict.cancel()
    if task in done:
        return task.result()
    task.cancel()
    with contextlib.suppress(BaseException):
        late = await task
        if isinstance(late, httpx.Response):
            await late.aclose()
    raise Evicted()


async def chunks(
    response: httpx.Response, lease: Lease, keepalive_s: float
) -> AsyncGenerator[bytes | None, None]:
    """The engine's bytes; ``None`` after ``keepalive_s`` of silence; Evicted on eviction.

    One read is pending at a time and never cancelled by the timer, so nothing is lost.
    """
    raw: AsyncIterator[bytes] = response.aiter_raw()
    evict: asyncio.Future[Any] = asyncio.ensure_future(lease.evicted.wait())
    pending: asyncio.Future[Any] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(raw))
            done, _ = await asyncio.wait(
                {pending, evict}, timeout=keepalive_s, return_when=asyncio.FIRST_COMPLETED
            )
            if pending in done:
                try:
                    chunk = pending.result()
                except StopAsyncIteration:
                    return
                finally:
                    pending = None
                yield chunk
            elif evict in done:
                raise Evicted()
            else:
                yield None
    finally:
        evict.cancel()
        if pending is not None:
            pending.cancel()
