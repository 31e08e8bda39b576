"""Bad input gets a clear OpenAI-style error with the right status, never a 500 or a trace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.conftest import Keys

pytestmark = pytest.mark.slow

URL = "/v1/chat/completions"
OK_MESSAGES = [{"role": "user", "content": "hi"}]


Api = Callable[..., httpx.Response]


@pytest.fixture
def api(edge_url: str, keys: Keys) -> Api:
    """POST to the edge's chat endpoint as tenant alpha."""

    def post(**kw: Any) -> httpx.Response:
        headers = {"content-type": "application/json", **keys.auth(), **kw.pop("headers", {})}
        return httpx.post(edge_url + URL, headers=headers, timeout=30, **kw)

    return post


def assert_error(r: httpx.Response, status: int, param: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    assert "Traceback" not in r.text
    assert r.headers["x-edgecore-tier"] == "edge" and "x-edgecore-overhead-ms" in r.headers
    if param is not None:
        assert err["param"] is not None and err["param"].startswith(param), err
    return dict(err)


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"",
        b"[]",
        b"\xff\xfe\x00",
        b'{"model": "auto", "messages": [',
        b'{"model": "auto", "messages": [{"role": "user", "content": "\\ud800"}]}',
    ],
)
def test_malformed_json_is_400(api: Api, body: bytes) -> None:
    assert_error(api(content=body), 400)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "auto", "messages": []}, "messages"),
        ({"model": "auto"}, "messages"),
        ({"messages": OK_MESSAGES}, "model"),
        ({"model": 7, "messages": OK_MESSAGES}, "model"),
        ({"model": "auto", "messages": "hi"}, "messages"),
        ({"model": "auto", "messages": [{"role": "wizard", "content": "x"}]}, "messages.0.role"),
        ({"model": "auto", "messages": OK_MESSAGES, "temperature": "hot"}, "temperature"),
        ({"model": "auto", "messages": OK_MESSAGES, "temperature": 3}, "temperature"),
        ({"model": "auto", "messages": OK_MESSAGES, "max_tokens": -1}, "max_tokens"),
        ({"model": "auto", "messages": OK_MESSAGES, "n": 3}, "n"),
        ({"model": "auto", "messages": OK_MESSAGES, "stream": "yes"}, "stream"),
    ],
)
def test_wrong_fields_are_400_naming_the_field(api: Api, body: dict[str, Any], param: str) -> None:
    assert_error(api(json=body), 400, param)


def test_unknown_model_is_404(api: Api) -> None:
    err = assert_error(api(json={"model": "gpt-9", "messages": OK_MESSAGES}), 404, "model")
    assert err["code"] == "model_not_found"


def test_oversized_body_is_413(api: Api) -> None:
    huge = {"model": "auto", "messages": [{"role": "user", "content": "x" * (2 * 1024 * 1024)}]}
    assert_error(api(json=huge), 413)


def test_oversized_body_without_length_is_413(api: Api) -> None:
    def chunks() -> Any:
        yield b'{"model": "auto", "messages": [{"role": "user", "content": "'
        for _ in range(40):
            yield b"x" * 65536
        yield b'"}]}'

    assert_error(api(content=chunks()), 413)


def test_max_tokens_ceiling_is_400(api: Api) -> None:
    body = {"model": "auto", "messages": OK_MESSAGES, "max_tokens": 10**6}
    assert_error(api(json=body), 400, "max_tokens")


def test_too_many_messages_is_400(api: Api) -> None:
    body = {"model": "auto", "messages": OK_MESSAGES * 300}
    assert_error(api(json=body), 400, "messages")


def test_wrong_method_and_path(edge_url: str) -> None:
    r = httpx.get(edge_url + URL)
    assert r.status_code == 405 and r.json()["error"]["message"]
    r = httpx.get(edge_url + "/v1/nothing")
    assert r.status_code == 404 and r.json()["error"]["message"]
