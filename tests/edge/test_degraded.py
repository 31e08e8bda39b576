"""A dead dependency degrades the service; it never hangs it or turns into a 500."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port, start, start_edge, wait_ready

pytestmark = pytest.mark.slow

LONG = "Summarise in one sentence: " + "The quick brown fox jumps over the lazy dog. " * 30


class DeadRedis:
    """Redis's port, gone bad: every connection is accepted and closed at once (counted, so
    a test can tell whether the edge tried Redis at all)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted: list[float] = []  # when each connection came (monotonic)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            self.accepted.append(time.monotonic())
            conn.close()


@pytest.fixture(scope="module")
def dead_redis() -> Iterator[DeadRedis]:
    redis = DeadRedis()
    yield redis
    redis.sock.close()


@pytest.fixture(scope="module")
def orphan_edge(models_dir: Path, log_dir: Path, dead_redis: DeadRedis) -> Iterator[str]:
    """An edge whose core is unreachable (nothing listens) and whose Redis drops every
    connection."""
    server = start_edge(
        "edge-orphan",
        log_dir,
        models_dir,
        core__url=f"http://127.0.0.1:{free_port()}",
        redis__url=f"redis://127.0.0.1:{dead_redis.port}/0",
        # Longer than any test here, so "inside the back-off" holds on a slow machine too.
        redis__backoff_s="600",
        route__policy="core",  # everything tries the core first, so every request degrades
    )
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
def strict_edge(models_dir: Path, log_dir: Path, redis_url: str) -> Iterator[str]:
    """Core unreachable and policy '503': no silent fallback."""
    server = start_edge(
        "edge-strict",
        log_dir,
        models_dir,
        redis__url=redis_url,
        core__url=f"http://127.0.0.1:{free_port()}",
        core__unavailable_policy="503",
        route__policy="core",
    )
    yield server.url
    server.stop()


def chat(url: str, content: str, **kw: object) -> httpx.Response:
    body = {
        "model": "auto",
        "temperature": 0,
        "max_tokens": 8,
        "messages": [{"role": "user", "content": content}],
        **kw,
    }
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=60)


def test_core_down_falls_back_to_the_edge_model(orphan_edge: str) -> None:
    t = time.monotonic()
    r = chat(orphan_edge, LONG)
    assert r.status_code == 200, r.text
    assert r.headers["x-edgecore-tier"] == "edge"
    assert r.headers["x-edgecore-degraded"] == "core-unreachable"
    assert time.monotonic() - t < 30


def test_core_down_and_core_model_named_is_503(orphan_edge: str) -> None:
    r = chat(orphan_edge, "hi", model="smollm2-135m-instruct")
    assert r.status_code == 503 and int(r.headers["retry-after"]) > 0
    assert r.json()["error"]["code"] == "core_unavailable"


def test_core_down_with_503_policy(strict_edge: str) -> None:
    r = chat(strict_edge, LONG)
    assert r.status_code == 503
    assert int(r.headers["retry-after"]) > 0
    assert r.json()["error"]["code"] == "core_unavailable"


def test_redis_down_bypasses_the_cache(orphan_edge: str, dead_redis: DeadRedis) -> None:
    r = chat(orphan_edge, "Say hi.")
    assert r.status_code == 200 and r.headers["x-edgecore-cache"] == "error"
    assert dead_redis.accepted  # it tried (now, or at start: the back-off began then)
    tried = len(dead_redis.accepted)
    r = chat(orphan_edge, "Say hi.")  # inside the back-off: no Redis round trip at all
    assert r.status_code == 200 and r.headers["x-edgecore-cache"] == "error"
    assert len(dead_redis.accepted) == tried


def test_readyz_reports_what_is_degraded(orphan_edge: str, strict_edge: str) -> None:
    body = httpx.get(orphan_edge + "/readyz").json()
    assert body["status"] == "degraded"
    assert set(body["degraded"]) >= {"core", "redis"}
    body = httpx.get(strict_edge + "/readyz").json()
    assert body["degraded"] == ["core"]


@pytest.fixture(scope="module")
def saturated_core(log_dir: Path) -> Iterator[str]:
    port = free_port()
    server = start(
        "fake-core-429",
        [sys.executable, "-m", "bench.fake_upstream", str(port), "--status", "429"],
        dict(os.environ),
        log_dir,
        f"http://127.0.0.1:{port}",
    )
    wait_ready(server, "/readyz", timeout=30)
    yield server.url
    server.stop()


def test_core_429_sends_borderline_prompts_to_the_edge(
    saturated_core: str, models_dir: Path, log_dir: Path, redis_url: str, trained_router: Path
) -> None:
    # Fixed mode with a very low threshold: every scored prompt leans core, and a wide band
    # makes each one borderline.
    edge = start_edge(
        "edge-saturated", log_dir, models_dir, core__url=saturated_core, redis__url=redis_url,
        route__mode="fixed", route__threshold="0.001", route__band="10",
    )  # fmt: skip
    try:
        first = chat(edge.url, "Tell me about lighthouses.", temperature=0.7)
        assert first.status_code == 200
        assert first.headers["x-edgecore-degraded"] == "core-saturated"  # core said 429
        calls = int(httpx.get(saturated_core + "/calls").text)
        assert calls == 1
        second = chat(edge.url, "Tell me about harbours.", temperature=0.7)
        assert second.headers["x-edgecore-tier"] == "edge"
        assert second.headers["x-edgecore-degraded"] == "core-saturated"
        # Decided at the edge: the saturated core was not asked again.
        assert int(httpx.get(saturated_core + "/calls").text) == calls
        metrics = httpx.get(edge.url + "/metrics").text
        assert 'edgecore_route_decisions_total{reason="core_saturated",tier="edge"} 1.0' in metrics
    finally:
        edge.stop()
