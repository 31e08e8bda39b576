"""Tie upstream work to the client's connection: when the client leaves, the work stops."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


class RememberDisconnect:
    """Pure ASGI middleware: once ``receive`` has returned ``http.disconnect``, every later
    call returns it again at once.

    Hypercorn sends the message once. A handler that races its work against the client
    (``cancel_on_disconnect``) and whose work finishes just as the client leaves has taken
    that one message; the streamed answer it then starts (Starlette's own disconnect
    listener) would wait for it forever, generating for nobody. Uvicorn repeats the
    message; this gives every server the same contract.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        gone: Message | None = None

        async def remembering() -> Message:
            nonlocal gone
            if gone is not None:
                return gone
            message = await receive()
            if message["type"] == "http.disconnect":
                gone = message
            return message

        await self.app(scope, remembering, send)
