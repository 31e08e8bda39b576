"""Streaming responses that never leave upstream work running behind a closed client."""

from __future__ import annotations

import asyncio

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


class EventStreamResponse(StreamingResponse):
    """A streaming response that always closes its iterator when it ends.

    Starlette cancels the sending task when the client disconnects, but leaves the body
    generator suspended until garbage collection; closing it here runs the generator's
    ``finally`` at once, which is where upstream work (an engine request, a local
    generation) is cancelled.
    """

    media_type = "text/event-stream"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                # Shielded: the server may be cancelling this very task because the client
                # left, and the cleanup is exactly what must still run.
                await asyncio.shield(aclose())
