"""Keys, tenants and limits at the edge, against real servers (Redis, edges, core)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from edge.tenancy.keys import add_key, dump_keys_file, hash_key, load_keys_file
from tests.conftest import Keys, metric, start_edge

pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"


def ask(url: str, key: str | None, content: str, **kw: object) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    body = {"model": "edge-smollm2-135m", "temperature": 0, "max_tokens": 16,
            "messages": [{"role": "user", "content": content}], **kw}  # fmt: skip
    return httpx.post(url + CHAT, json=body, headers=headers, timeout=60)


def test_missing_wrong_and_revoked_keys_are_401(edge_url: str, keys: Keys, tmp_path: Path) -> None:
    for key in (None, "ec-wrong", "Basic abc"):
        r = ask(edge_url, key, "hi")
        assert r.status_code == 401, r.text
        assert r.json()["error"]["code"] == "invalid_api_key"
        assert r.headers["www-authenticate"].startswith("Bearer")
    assert httpx.get(edge_url + "/v1/models").status_code == 401


def test_revoking_a_key_takes_effect_without_restart(
    models_dir: Path, log_dir: Path, redis_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "keys.toml"
    key = add_key(path, "temp")
    edge = start_edge("edge-revoke", log_dir, models_dir, redis__url=redis_url,
                      keys_file=str(path), core__url="http://127.0.0.1:9")  # fmt: skip
    auth = {"authorization": f"Bearer {key}"}
    try:
        assert httpx.get(edge.url + "/v1/models", headers=auth).is_success
        tenants = load_keys_file(path)
        tenants["temp"] = tenants["temp"].model_copy(update={"keys": ()})
        path.write_text(dump_keys_file(tenants))
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            r = httpx.get(edge.url + "/v1/models", headers=auth)
            if r.status_code == 401:
                break
            time.sleep(0.5)
        assert r.status_code == 401
    finally:
        edge.stop()


def test_keys_file_holds_only_hashes(keys: Keys) -> None:
    text = keys.file.read_text()
    assert keys.alpha not in text and hash_key(keys.alpha) in text


def test_a_default_tenant_is_written_as_an_older_edge_reads_it(tmp_path: Path) -> None:
    # Fields added since (cache_scope) are left out at their defaults: a keys file written
    # by `edgecore keys add` still loads in an edge that predates them.
    path = tmp_path / "keys.toml"
    add_key(path, "acme")
    assert "cache_scope" not in path.read_text()
    tenants = load_keys_file(path)
    tenants["acme"] = tenants["acme"].model_copy(update={"cache_scope": "user"})
    path.write_text(dump_keys_file(tenants))
    assert load_keys_file(path)["acme"].cache_scope == "user"


def complete(url: str, key: str, text: str, **kw: object) -> str:
    """A prompt built on `text` whose answer finished, so that it is cached.

    Only complete answers are stored, and a 135M model at temperature 0 now and then runs
    to max_tokens on some prompt; these tests are about who shares the cache, so a prompt
    that loops is swapped for the next one rather than failing the test.
    """
    for _ in range(5):
        prompt = f"{text} ({uuid.uuid4().hex[:8]})"
        first = ask(url, key, prompt, **kw)
        assert first.status_code == 200, first.text
        if first.json()["choices"][0]["finish_reason"] == "stop":
            return prompt
    raise AssertionError(f"no answer to {text!r} finished in five prompts")


def test_identical_prompts_from_two_tenants_never_share_cache(edge_url: str, keys: Keys) -> None:
    extra = {"repetition_penalty": 1.1, "max_tokens": 128}
    prompt = complete(edge_url, keys.alpha, "Say hello.", **extra)
    again = None
    for _ in range(20):
        again = ask(edge_url, keys.alpha, prompt, **extra)
        if again.headers["x-edgecore-tier"] == "cache":
            break
    assert again is not None and again.headers["x-edgecore-tier"] == "cache"
    probe = ask(edge_url, keys.beta, prompt, **extra)
    assert probe.headers["x-edgecore-tier"] == "edge"
    assert probe.headers["x-edgecore-cache"] == "miss"


def test_a_tenant_scoped_to_users_shares_answers_only_with_the_same_user(
    edge_url: str, keys: Keys
) -> None:
    extra = {"repetition_penalty": 1.1, "max_tokens": 128}
    prompt = complete(edge_url, keys.personal, "Say goodbye.", user="ann", **extra)
    again = None
    for _ in range(20):
        again = ask(edge_url, keys.personal, prompt, user="ann", **extra)
        if again.headers["x-edgecore-tier"] == "cache":
            break
    assert again is not None and again.headers["x-edgecore-tier"] == "cache"
    probe = ask(edge_url, keys.personal, prompt, user="bob", **extra)
    assert probe.headers["x-edgecore-tier"] == "edge"
    assert probe.headers["x-edgecore-cache"] == "miss"
    anonymous = ask(edge_url, keys.personal, prompt, **extra)
    assert anonymous.headers["x-edgecore-cache"] == "bypass"


def test_models_are_limited_per_tenant(edge_url: str, keys: Keys) -> None:
    models = httpx.get(edge_url + "/v1/models", headers=keys.auth(keys.edge_only)).json()
    assert [m["id"] for m in models["data"]] == ["edge-smollm2-135m"]
    r = ask(edge_url, keys.edge_only, "hi", model="smollm2-135m-instruct")
    assert r.status_code == 403 and r.json()["error"]["code"] == "model_not_allowed"


@pytest.fixture(scope="module")
def second_edge(
    core_url: str, redis_url: str, models_dir: Path, log_dir: Path, keys: Keys
) -> Iterator[str]:
    server = start_edge("edge-2", log_dir, models_dir, core__url=core_url, redis__url=redis_url,
                        keys_file=str(keys.file))  # fmt: skip
    yield server.url
    server.stop()


def test_rate_limit_is_shared_across_edges(edge_url: str, second_edge: str, keys: Keys) -> None:
    # Tenant "limited" has 3 requests a minute, counted in Redis by both edges together.
    statuses = []
    for i in range(5):
        url = edge_url if i % 2 == 0 else second_edge
        r = ask(url, keys.limited, f"hi {i}", max_tokens=1)
        statuses.append(r.status_code)
        if r.status_code == 429:
            assert int(r.headers["retry-after"]) >= 1
            assert r.json()["error"]["code"] == "rate_limit_exceeded"
    assert statuses.count(200) == 3 and statuses[3:] == [429, 429], statuses


def test_request_id_reaches_the_engine(edge_url: str, keys: Keys) -> None:
    rid = f"trace-{uuid.uuid4().hex[:12]}"
    body = {"model": "smollm2-135m-instruct", "max_tokens": 2,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    r = httpx.post(edge_url + CHAT, json=body, headers={**keys.auth(), "x-request-id": rid},
                   timeout=60)  # fmt: skip
    assert r.headers["x-request-id"] == rid
    assert rid in r.json()["id"]  # vLLM names its completion after the request id it got


def test_injected_ids_and_model_names_are_not_reflected_in_headers(
    edge_url: str, keys: Keys
) -> None:
    headers = {**keys.auth(), "x-request-id": ("é" * 200).encode()}
    body = {"model": "a\r\nset-cookie: a=b", "messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(edge_url + CHAT, headers=headers, json=body)
    assert r.status_code == 404
    assert "set-cookie" not in {k.lower() for k in r.headers}
    assert r.headers["x-request-id"].startswith("edge-")  # not the client's junk


def test_a_tenant_s_core_priority_reaches_the_core_admission(
    edge_url: str, core_url: str, keys: Keys
) -> None:
    before = metric(core_url, "edgecore_core_admitted_total", 'priority="batch"')
    r = ask(edge_url, keys.batch, f"Say the word {uuid.uuid4().hex[:6]}.",
            model="smollm2-135m-instruct", max_tokens=4)  # fmt: skip
    assert r.status_code == 200 and r.headers["x-edgecore-tier"] == "core", r.text
    assert metric(core_url, "edgecore_core_admitted_total", 'priority="batch"') == before + 1
