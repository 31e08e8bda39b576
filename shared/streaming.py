"""Streaming responses that never leave upstream work running behind a closed client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from shared.disconnect import ClientDisconnected, wait_for_disconnect
from shared.race import first_or_stop


class EventStreamResponse(StreamingResponse):
    """A streaming response that always closes its iterator when it ends.

    Starlette cancels the sending task when the client disconnects, but leaves the body
    generator suspended until garbage collection, and never starts it at all if the client
    left before the first byte. Closing it here, plus ``on_close`` for what the generator
    does not own yet, releases upstream work at once (an engine request, a generation).

    ``opening``: headers known only once the first event is ready (the edge's overhead up
    to its first byte); with it the response starts then, with that event, instead of at
    once. A long wait is still no silence: the tiers send keepalive comments.
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        content: AsyncIterator[bytes],
        *,
        headers: Mapping[str, str] | None = None,
        on_close: Callable[[], Awaitable[None]] | None = None,
        opening: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        super().__init__(content, headers=headers)
        self.on_close = on_close
        self.opening = opening

    async def stream_response(self, send: Send) -> None:
        if self.opening is None:
            await super().stream_response(send)
            return
        events = aiter(self.body_iterator)
        first = await anext(events, None)
        self.raw_headers += [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.opening().items()
        ]
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})  # fmt: skip
        if first is not None:
            await send({"type": "http.response.body", "body": first, "more_body": True})
            async for chunk in events:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Streamed while listening for the client's disconnect, as Starlette does for ASGI
        # servers before 2.4 (Hypercorn: 2.1), but with one watcher task that cancels this
        # one: Starlette's anyio task group cost 140-220 us a response here, a race of two
        # tasks 110 us, against 7 us for the stream itself.
        try:
            with contextlib.suppress(ClientDisconnected):  # the client left: stop quietly
                await first_or_stop(
                    self.stream_response(send), wait_for_disconnect(receive), ClientDisconnected
                )
            if self.background is not None:
                await self.background()
        finally:
            # Shielded: the server may be cancelling this very task because the client
            # left, and the cleanup is exactly what must still run.
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await asyncio.shield(aclose())
            if self.on_close is not None:
                await asyncio.shield(self.on_close())


class Releasing(Response):
    """Wrap a response so ``release`` runs when it is fully sent (or abandoned).

    A streamed answer outlives its handler; a concurrency slot must last as long.
    """

    def __init__(self, response: Response, release: Callable[[], None]) -> None:
        # Deliberately not Response.__init__: this only delegates to ``response``.
        self.response = response
        self.release = release
        self.status_code = response.status_code
        self.raw_headers = response.raw_headers
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.response(scope, receive, send)
        finally:
            self.release()
