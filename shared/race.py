"""Racing upstream work against a stop signal (a client that left, an evicted lease, a core
found down): the two loops the edge and the core both need, written once.

``first_or_stop`` awaits one piece of work; ``batches`` reads a stream with a keepalive timer.
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

    The work runs in this task, and one watcher task cancels it when ``stop`` finishes:
    every request runs a few of these, and a race of two tasks under ``asyncio.wait``
    cost about twice as much. A cancel aimed at the caller meanwhile stays a cancel. Work
    that swallowed the cancel and finished anyway still holds resources: ``on_abandon``
    gets its result (an open response to close).
    """
    task = asyncio.current_task()
    assert task is not None
    waiting, fired = True, False

    def stop_now(watcher: asyncio.Future[object]) -> None:
        nonlocal fired
        # Only while waiting: a late callback must not cancel what the caller does next.
        if waiting and not watcher.cancelled():
            fired = True
            task.cancel()

    watcher = asyncio.ensure_future(stop)
    watcher.add_done_callback(stop_now)
    try:
        result = await work
    except asyncio.CancelledError:
        if fired and task.uncancel() == 0:
            raise stopped() from None
        raise
    finally:
        waiting = False
        watcher.cancel()
    if fired:  # the work finished although it was cancelled
        task.uncancel()
        if on_abandon is not None:
            await on_abandon(result)
        raise stopped()
    return result


async def batches(
    chunks: AsyncIterator[T],
    interval_s: float | None,
    stop: asyncio.Event | None = None,
    stopped: Callable[[], BaseException] | None = None,
    *,
    idle_s: float | None = None,
    stalled: Callable[[], BaseException] | None = None,
    ahead: int = 64,
) -> AsyncGenerator[list[T] | None, None]:
    """Yield every chunk that arrived since the last yield, as one list; ``None`` whenever
    none arrived for ``interval_s`` seconds; raise ``stalled()`` once none arrived for
    ``idle_s``; raise ``stopped()`` as soon as ``stop`` is set (chunks already there win;
    without ``stopped`` the stream just ends).

    One reader task per stream reads ahead (at most ``ahead`` chunks), and no timer ever
    cancels it, so nothing is lost. What piled up while the consumer was busy (sending to
    a client) comes out as one batch: a relay writes it once instead of once per chunk.
    """
    buf: list[T] = []
    wake = asyncio.Event()  # for the consumer: chunks, the end, or the stop
    room = asyncio.Event()  # for the reader: the consumer took the batch
    room.set()
    ended = False
    error: Exception | None = None

    async def pump() -> None:
        nonlocal ended, error
        try:
            async for chunk in chunks:
                buf.append(chunk)
                wake.set()
                if len(buf) >= ahead:
                    room.clear()
                    await room.wait()
        except Exception as exc:
            error = exc
        finally:
            ended = True
            wake.set()
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:  # stopped while suspended at a yield: close it now
                await aclose()

    reader = asyncio.ensure_future(pump())
    watcher: asyncio.Future[Any] | None = None
    if stop is not None:
        watcher = asyncio.ensure_future(stop.wait())
        watcher.add_done_callback(lambda _: wake.set())
    loop = asyncio.get_running_loop()
    heard = loop.time()
    # One timer for the silences, re-armed when it fires, not on every chunk: a token a
    # chunk, arming and cancelling a timeout per wait was a third of this loop's cost.
    due: float | None = None  # when the wait under way times out (None: not waiting)
    timer: asyncio.TimerHandle | None = None
    timed_out = False

    def ring() -> None:
        nonlocal timer, timed_out
        timer = None
        if due is None:
            return  # nobody waits: the next wait arms again
        if loop.time() < due:
            timer = loop.call_at(due, ring)  # the wait moved on since this was armed
            return
        timed_out = True
        wake.set()

    try:
        while True:
            if not (buf or ended or (stop is not None and stop.is_set())):
                wait = interval_s
                if idle_s is not None:
                    left = heard + idle_s - loop.time()
                    wait = left if wait is None else min(wait, left)
                wake.clear()
                timed_out = False
                if wait is not None:
                    due = loop.time() + max(wait, 0.0)
                    if timer is not None and timer.when() > due:
                        timer.cancel()
                        timer = None
                    if timer is None:
                        timer = loop.call_at(due, ring)
                try:
                    await wake.wait()
                finally:
                    due = None
                if timed_out and not (buf or ended or (stop is not None and stop.is_set())):
                    if idle_s is not None and loop.time() - heard >= idle_s:
                        raise (stalled or TimeoutError)()
                    yield None
                    continue
            if buf:
                batch = buf.copy()
                buf.clear()
                room.set()
                heard = loop.time()
                yield batch
                # Time spent by the consumer is not the source's silence.
                heard = loop.time()
            elif error is not None:
                raise error
            elif ended:
                return
            elif stopped is None:
                return
            else:
                raise stopped()
    finally:
        if timer is not None:
            timer.cancel()
        if watcher is not None:
            watcher.cancel()
        reader.cancel()
        await asyncio.wait({reader})
