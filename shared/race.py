"""Racing upstream work against a stop signal (a client that left, an evicted lease, a core
found down): the two loops the edge and the core both need, written once.

``first_or_stop`` awaits one piece of work; ``reads`` reads a stream with a keepalive timer.
The stop signal is an awaitable (``event.wait()``, a disconnect watcher) for the one, an
event for the other; the work is never cancelled by a timer, so nothing is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def first_or_stop(
    work: Awaitable[T],
    stop: Awaitable[object],
    stopped: Callable[[], BaseException],
    on_abandon: Callable[[T], Awaitable[None]] | None = None,
) -> T:
    """Await ``work``; if ``stop`` finishes first, cancel it and raise ``stopped()``.

    Work that finished just as the stop came still holds resources: ``on_abandon`` gets
    its result (an open response to close).
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(stop)
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    finally:
        watcher.cancel()
    if task in done:
        return task.result()
    task.cancel()
    # asyncio.wait, not ``await task``: catching the task's CancelledError would also catch
    # (and lose) a cancel aimed at the caller meanwhile.
    await asyncio.wait({task})
    if not task.cancelled() and task.exception() is None and on_abandon is not None:
        await on_abandon(task.result())
    raise stopped()


async def reads(
    chunks: AsyncIterator[T],
    interval_s: float | None,
    stop: asyncio.Event | None = None,
    stopped: Callable[[], BaseException] | None = None,
) -> AsyncGenerator[T | None, None]:
    """Yield ``chunks``, ``None`` whenever none arrived for ``interval_s`` seconds, and raise
    ``stopped()`` as soon as ``stop`` is set (a chunk already there wins; without
    ``stopped`` the stream just ends).

    One read is pending at a time and never cancelled by the timer, so nothing is lost.
    """
    watcher: asyncio.Future[Any] | None = (
        None if stop is None else asyncio.ensure_future(stop.wait())
    )
    pending: asyncio.Future[T] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(chunks))
            waiting: set[asyncio.Future[Any]] = {pending} if watcher is None else {pending, watcher}
            done, _ = await asyncio.wait(
                waiting, timeout=interval_s, return_when=asyncio.FIRST_COMPLETED
            )
            if pending in done:
                try:
                    chunk = pending.result()
                except StopAsyncIteration:
                    return
                finally:
                    pending = None
                yield chunk
            elif watcher is not None and watcher in done:
                if stopped is None:
                    return
                raise stopped()
            else:
                yield None
    finally:
        if watcher is not None:
            watcher.cancel()
        if pending is not None:
            pending.cancel()
