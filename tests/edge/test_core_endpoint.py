"""``Core.endpoint``: the URL a request goes to, parsed once per path, exactly as httpx
would merge the path with the client's base URL (a prefix path included)."""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest

from edge.upstream.breaker import CircuitBreaker
from edge.upstream.cores import Connection, Core, Timeouts


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


def test_a_core_request_is_what_a_client_with_its_token_would_send() -> None:
    """The pool builds its requests itself (no AsyncClient.build_request per request): the
    same URL, body and headers as a client with the core's token as default header."""
    base, token = "https://core.example/api", {"authorization": "Bearer edge-secret"}
    core = Core(
        base, 0, CircuitBreaker(), 64, 4, Timeouts(1, 1, 1), ssl.create_default_context(),
        headers=token,
    )  # fmt: skip
    timeout = httpx.Timeout(5.0, connect=1.0).as_dict()
    payload, headers = {"model": "m", "stream": True}, {"x-request-id": "r1"}
    request = core.request("/v1/chat/completions", payload, headers, {"timeout": timeout})
    expected = httpx.Client(base_url=base, headers=token).build_request(
        "POST", "/v1/chat/completions", json=payload, headers=headers
    )
    assert request.url == expected.url and request.content == expected.content
    for name in ("authorization", "x-request-id", "content-type", "content-length", "host"):
        assert request.headers[name] == expected.headers[name], name
    assert request.extensions["timeout"] == timeout


def test_a_connection_answers_as_a_client_would() -> None:
    def core(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"asked": request.url.path})

    async def check() -> None:
        conn = Connection(httpx.MockTransport(core), {})  # type: ignore[arg-type]
        request = httpx.Request("POST", "http://core/v1/responses", json={})
        answer = await conn.send(request, stream=False)  # read whole, as client.send does
        assert answer.request is request and answer.json() == {"asked": "/v1/responses"}
        streamed = await conn.send(request)
        assert [chunk async for chunk in streamed.aiter_bytes()] == [answer.content]
        await conn.aclose()

    asyncio.run(check())
