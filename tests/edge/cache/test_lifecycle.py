"""Cache lifecycle at a real edge: absolute TTL, per-tenant cap, invalidation, admin API."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from edge.tenancy.keys import hash_key
from tests.conftest import Keys, free_port, start_edge

pytestmark = pytest.mark.slow

TTL_S = 5


@pytest.fixture(scope="module")
def edge(models_dir: Path, log_dir: Path, redis_url: str, keys: Keys) -> Iterator[str]:
    server = start_edge(
        "edge-cache", log_dir, models_dir, redis__url=redis_url, keys_file=str(keys.file),
        core__url=f"http://127.0.0.1:{free_port()}", cache__ttl_s=str(TTL_S),
        cache__index=f"edgecore:test-lifecycle:{uuid.uuid4().hex[:6]}",
        admin_keys=json.dumps([hash_key(keys.admin)]),
    )  # fmt: skip
    yield server.url
    server.stop()


def ask(edge: str, key: str, prompt: str) -> httpx.Response:
    body = {"model": "edge-smollm2-135m", "temperature": 0, "max_tokens": 128,
            "messages": [{"role": "user", "content": prompt}]}  # fmt: skip
    r = httpx.post(edge + "/v1/chat/completions", json=body, timeout=60,
                   headers={"authorization": f"Bearer {key}"})  # fmt: skip
    assert r.status_code == 200, r.text
    return r


@dataclass
class Cached:
    prompt: str
    hit: httpx.Response
    # Monotonic bounds of the store (its TTL starts there): the stored answer came back at
    # ``answered`` and the store runs just after it, before the first hit came back
    # (``hit_at``). The model's generation on loaded cores can take seconds, so the time
    # the question was asked bounds nothing.
    answered: float
    hit_at: float


def cached(edge: str, key: str) -> Cached:
    """A fresh prompt, asked until its answer is stored (the store runs just after a
    response). SmolLM2-135M now and then runs a prompt to ``max_tokens`` (an emoji loop, seen
    in CI); such an answer is never stored, so another prompt is tried."""
    for _ in range(5):
        p = prompt()
        finish = ask(edge, key, p).json()["choices"][0]["finish_reason"]
        answered = time.monotonic()
        if finish == "stop":
            break
    else:
        raise AssertionError("the edge model finished none of 5 prompts")
    for _ in range(30):
        r = ask(edge, key, p)
        if r.headers["x-edgecore-tier"] == "cache":
            return Cached(p, r, answered, time.monotonic())
        time.sleep(0.1)
    raise AssertionError("answer never cached")


def admin(edge: str, keys: Keys, method: str, path: str, **kw: object) -> httpx.Response:
    return httpx.request(method, edge + path, headers={"authorization": f"Bearer {keys.admin}"},
                         timeout=30, **kw)  # type: ignore[arg-type]  # fmt: skip


def prompt() -> str:
    return f"Say hello. ({uuid.uuid4().hex[:8]})"


def test_ttl_is_absolute(edge: str, keys: Keys) -> None:
    entry = cached(edge, keys.alpha)
    p = entry.prompt
    # Hits inside the TTL do not extend it; a hit is asked for only while the reply, too,
    # surely comes back before the entry can expire.
    while time.monotonic() - entry.answered < TTL_S - 2:
        assert ask(edge, keys.alpha, p).headers["x-edgecore-tier"] == "cache"
        time.sleep(0.5)
    time.sleep(max(0.0, TTL_S + 1 - (time.monotonic() - entry.hit_at)))
    assert ask(edge, keys.alpha, p).headers["x-edgecore-cache"] == "miss"


def test_admin_api_needs_the_admin_key(edge: str, keys: Keys) -> None:
    for auth in (None, "Bearer nope", f"Bearer {keys.alpha}"):
        headers = {"authorization": auth} if auth else {}
        r = httpx.get(edge + "/admin/cache/stats", headers=headers)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_admin_key"
    assert admin(edge, keys, "GET", "/admin/cache/stats").status_code == 200


def test_invalidation_by_tenant_and_by_entry(edge: str, keys: Keys) -> None:
    pa = cached(edge, keys.alpha).prompt
    b = cached(edge, keys.beta)
    pb, hit_b = b.prompt, b.hit
    stats = admin(edge, keys, "GET", "/admin/cache/stats").json()
    assert stats["by_tenant"]["alpha"] >= 1 and stats["by_tenant"]["beta"] >= 1
    r = admin(edge, keys, "POST", "/admin/cache/invalidate", json={"tenant": "alpha"})
    assert r.status_code == 200 and r.json()["deleted"] >= 1
    assert ask(edge, keys.alpha, pa).headers["x-edgecore-cache"] == "miss"
    assert ask(edge, keys.beta, pb).headers["x-edgecore-tier"] == "cache"
    entry = hit_b.headers["x-edgecore-cache-entry"]
    assert admin(edge, keys, "DELETE", f"/admin/cache/entries/{entry}").json() == {"deleted": 1}
    assert ask(edge, keys.beta, pb).headers["x-edgecore-cache"] == "miss"
    assert admin(edge, keys, "DELETE", f"/admin/cache/entries/{entry}").status_code == 404
    assert admin(edge, keys, "POST", "/admin/cache/invalidate", json={}).status_code == 400


def test_invalidation_by_model_and_age(edge: str, keys: Keys) -> None:
    p = cached(edge, keys.alpha).prompt
    young = admin(edge, keys, "POST", "/admin/cache/invalidate", json={"older_than_s": 60})
    assert young.json()["deleted"] == 0
    other = admin(edge, keys, "POST", "/admin/cache/invalidate", json={"model": "another-model"})
    assert other.json()["deleted"] == 0
    r = admin(edge, keys, "POST", "/admin/cache/invalidate", json={"model": "edge-smollm2-135m"})
    assert r.json()["deleted"] >= 1
    assert ask(edge, keys.alpha, p).headers["x-edgecore-cache"] == "miss"


def test_per_tenant_cap_evicts_the_oldest(edge: str, keys: Keys) -> None:
    prompts = [cached(edge, keys.capped).prompt for _ in range(3)]
    assert ask(edge, keys.capped, prompts[0]).headers["x-edgecore-cache"] == "miss"
    # (that miss stored prompts[0] again, evicting prompts[1]; prompts[2] stays)
    assert ask(edge, keys.capped, prompts[2]).headers["x-edgecore-tier"] == "cache"
    stats = admin(edge, keys, "GET", "/admin/cache/stats").json()
    assert stats["by_tenant"]["capped"] == 2
