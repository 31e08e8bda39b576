"""The benchmarks' fake upstream (bench.fake_upstream): its answer, at once or a token at a
time (``--gap-ms``: a proxy's cost per token)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import MutableMapping
from typing import Any

from bench.fake_upstream import make_app


async def _stream(gap_s: float) -> list[tuple[float, bytes]]:
    """The body's parts as the app sends them, each with its time (httpx's ASGI transport
    would hand over the whole body at once)."""
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions",
             "headers": [(b"content-type", b"application/json")], "query_string": b"",
             "http_version": "1.1", "scheme": "http", "server": ("fake", 80)}  # fmt: skip
    requested = False
    sent: list[tuple[float, bytes]] = []
    t = time.perf_counter()

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": json.dumps(body).encode()}
        await asyncio.sleep(3600)  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            sent.append((time.perf_counter() - t, message["body"]))

    await make_app(3, gap_s)(scope, receive, send)
    return sent


def test_the_tokens_come_apart_with_a_gap_and_together_without() -> None:
    spaced = asyncio.run(_stream(0.05))
    events = [raw.strip() for _, raw in spaced]
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert [c["choices"][0]["delta"]["content"] for c in chunks[:-1]] == ["", " w0", " w1", " w2"]
    assert chunks[-1]["usage"]["completion_tokens"] == 3 and events[-1] == b"data: [DONE]"
    assert spaced[-1][0] >= 0.14  # three gaps of 50 ms, a token each
    assert asyncio.run(_stream(0.0))[-1][0] < 0.1
