"""Tie upstream work to the client's connection: when the client leaves, the work stops."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from starlette.types import Receive

from shared.race import first_or_stop

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
    return await first_or_stop(work, wait_for_disconnect(receive), ClientDisconnected, on_abandon)
