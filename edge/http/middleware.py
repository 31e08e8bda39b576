"""Pure ASGI middleware (BaseHTTPMiddleware would hide client disconnects from handlers)."""

from __future__ import annotations

import time

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shared import hangup


class TierHeaders:
    """Make sure every API response names its tier and the edge's overhead.

    The outermost layer: it stamps the request's arrival (``scope["state"]["arrived"]``),
    from which every answer counts its overhead, so the other middleware, body reading and
    validation are inside the figure. Served by ``shared.serve``, the arrival is when the
    request's bytes were read, before Hypercorn parsed them (``shared.hangup.received``).
    Answers set their own headers; anything else (validation errors, 404s) was answered by
    the edge alone, so the whole time to the first byte is overhead.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = hangup.received() or time.perf_counter()
        scope.setdefault("state", {})["arrived"] = started

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if "x-edgecore-tier" not in headers:
                    headers["x-edgecore-tier"] = "edge"
                if "x-edgecore-overhead-ms" not in headers:
                    elapsed = (time.perf_counter() - started) * 1000.0
                    headers["x-edgecore-overhead-ms"] = f"{elapsed:.2f}"
            await send(message)

        await self.app(scope, receive, send_with_headers)


def arrived(scope: Scope) -> float:
    """When ``TierHeaders`` saw the request (now, for an app built without it)."""
    state = scope.get("state") or {}
    value = state.get("arrived")
    return value if isinstance(value, float) else time.perf_counter()
