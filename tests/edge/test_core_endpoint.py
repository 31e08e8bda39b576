"""``Core.endpoint``: the URL a request goes to, parsed once per path, exactly as httpx
would merge the path with the client's base URL (a prefix path included)."""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest

from edge.upstream.breaker import CircuitBreaker
from edge.upstream.cores import Core, Timeouts


@pytest.mark.parametrize(
    "base",
    ["http://127.0.0.1:8000", "http://core.example:8000/", "https://core.example/api",
     "https://core.example/api/"],
)  # fmt: skip
def test_the_endpoint_is_the_url_httpx_would_build(base: str) -> None:
    async def check() -> None:
        core = Core(
            base, 0, CircuitBreaker(), 64, 4, Timeouts(1, 1, 1), ssl.create_default_context()
        )
        async with httpx.AsyncClient(base_url=base) as client:
            for path in ("/v1/chat/completions", "v1/responses"):
                expected = client.build_request("POST", path).url
                assert core.endpoint(path) == expected
                assert client.build_request("POST", core.endpoint(path)).url == expected
                assert core.endpoint(path) is core.endpoint(path)  # parsed once

    asyncio.run(check())
