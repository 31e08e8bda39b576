"""Tie upstream work to the client's connection: when the client leaves, the work stops."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from starlette.types import Receive

T = TypeVar("T")

# Status recorded for requests whose client left (nginx's convention); nobody receives it.
CLIENT_CLOSED = 499


class ClientDisconnected(Exception):
    """The client closed the connection before the answer was ready."""


async def wait_for_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def cancel_on_disconnect(
    receive: Receive,
    work: Awaitable[T],
    on_abandon: Callable[[T], Awaitable[None]] | None = None,
) -> T:
    """Await ``work``; if the client disconnects first, cancel it and raise.

    Only call this after the request body has been read: it consumes ``receive``.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(wait_for_disconnect(receive))
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        watcher.cancel()
    if task in done:
        return task.result()
    task.cancel()
    try:
        late = await task
    except (asyncio.CancelledError, Exception):
        pass
    else:
        # The work finished just as the client left: its result still holds resources.
        if on_abandon is not None:
            await on_abandon(late)
    raise ClientDisconnected()
