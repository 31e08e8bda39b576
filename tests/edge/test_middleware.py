"""The edge's outermost middleware: every answer names its tier, and its overhead counts
from the request's arrival there (issue 35: the figure missed most of what the edge adds)."""

from __future__ import annotations

import asyncio
import time

from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from edge.http.middleware import TierHeaders, arrived


def test_overhead_counts_from_arrival_at_the_outermost_layer() -> None:
    seen: list[float] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(time.perf_counter() - arrived(scope))
        await asyncio.sleep(0.05)  # what inner layers and the handler spend
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    r = TestClient(TierHeaders(app)).get("/")
    assert r.headers["x-edgecore-tier"] == "edge"
    assert float(r.headers["x-edgecore-overhead-ms"]) >= 50
    assert 0 <= seen[0] < 0.05  # the stamp came before the inner app ran


def test_an_answer_that_sets_its_own_headers_keeps_them() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"x-edgecore-tier", b"core"), (b"x-edgecore-overhead-ms", b"1.00")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}"})

    r = TestClient(TierHeaders(app)).get("/")
    assert (r.headers["x-edgecore-tier"], r.headers["x-edgecore-overhead-ms"]) == ("core", "1.00")
