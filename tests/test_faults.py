"""Faults injected into real processes: each ends in its defined outcome, nothing hangs,
and the in-flight counters return to zero.

Core gateways here relay to the session's vLLM engine (``--no-engine``), so a gateway can
be killed or frozen (SIGKILL, SIGSTOP) without touching the engine other tests use.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import httpx
import pytest

from shared.redis_server import redis_command, redis_env
from tests.conftest import (
    CorePorts,
    Keys,
    Server,
    eventually,
    free_port,
    gateway,
    metric,
    service_env,
    start,
    start_edge,
    wait_ready,
)

pytestmark = pytest.mark.slow

CORE_MODEL = "smollm2-135m-instruct"
STORY = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]


def stream_events(url: str, key: str, body: dict[str, object]) -> Iterator[str]:
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=60,
                      headers={"authorization": f"Bearer {key}"}) as r:  # fmt: skip
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("data: "):
                yield line[6:]


def test_stalled_core_fails_over_to_the_next(
    engine_url: str, core_url: str, core_ports: CorePorts, models_dir: Path, log_dir: Path,
    keys: Keys,
) -> None:  # fmt: skip
    stalled = gateway("core-stalled", core_ports.engine, log_dir)
    cores = [{"url": stalled.url, "priority": 0}, {"url": core_url, "priority": 1}]
    edge = start_edge(
        "edge-failover", log_dir, models_dir, keys_file=str(keys.file),
        core__cores=json.dumps(cores),
        core__first_byte_timeout_s="2", core__probe_interval_s="600",
        redis__url=f"redis://127.0.0.1:{free_port()}/0",
    )  # fmt: skip
    try:
        os.kill(stalled.proc.pid, signal.SIGSTOP)  # accepts connections, never answers
        body = {
            "model": CORE_MODEL,
            "max_tokens": 4,
            "messages": [{"role": "user", "content": "hi"}],
        }
        t = time.monotonic()
        r = httpx.post(edge.url + "/v1/chat/completions", json=body, headers=keys.auth(),
                       timeout=30)  # fmt: skip
        assert r.status_code == 200 and r.headers["x-edgecore-tier"] == "core"
        assert time.monotonic() - t < 15  # one first-byte deadline, then the next core
        assert metric(edge.url, "edgecore_core_failovers_total") >= 1
        assert eventually(lambda: metric(edge.url, "edgecore_edge_in_flight") == 0)
    finally:
        os.kill(stalled.proc.pid, signal.SIGCONT)
        edge.stop()
        stalled.stop()


def test_core_killed_mid_stream_ends_with_an_error_event(
    engine_url: str, core_ports: CorePorts, models_dir: Path, log_dir: Path, keys: Keys
) -> None:
    doomed = gateway("core-doomed", core_ports.engine, log_dir)
    edge = start_edge(
        "edge-doomed", log_dir, models_dir, keys_file=str(keys.file), core__url=doomed.url,
        redis__url=f"redis://127.0.0.1:{free_port()}/0", core__unavailable_policy="503",
    )  # fmt: skip
    try:
        body = {"model": CORE_MODEL, "stream": True, "max_tokens": 400, "temperature": 0.7,
                "messages": STORY}  # fmt: skip
        events = []
        for data in stream_events(edge.url, keys.alpha, body):
            events.append(data)
            if len(events) == 3:
                os.kill(doomed.proc.pid, signal.SIGKILL)
        assert events[-1] == "[DONE]"
        error = json.loads(events[-2])
        assert error["error"]["code"] == "upstream_error"
        assert eventually(lambda: metric(edge.url, "edgecore_edge_in_flight") == 0)
        assert eventually(lambda: metric(edge.url, "edgecore_core_streams") == 0)
        assert eventually(lambda: metric(engine_url, "vllm:num_requests_running") == 0)
    finally:
        edge.stop()
        doomed.stop()


def test_redis_killed_and_restarted(
    home: Path, models_dir: Path, log_dir: Path, keys: Keys, core_url: str, tmp_path: Path
) -> None:
    port = free_port()
    argv, env = redis_command(port=port, data_dir=tmp_path), redis_env(home)

    def redis() -> Server:
        server = start("redis-flaky", argv, env, log_dir, f"redis://127.0.0.1:{port}")
        time.sleep(0.5)
        return server

    server = redis()
    edge = start_edge(
        "edge-redis-flaky", log_dir, models_dir, keys_file=str(keys.file), core__url=core_url,
        redis__url=server.url, retry_after_s="1",
    )  # fmt: skip
    try:
        body = {"model": "edge-smollm2-135m", "temperature": 0, "max_tokens": 4,
                "messages": [{"role": "user", "content": f"hi {random.random()}"}]}  # fmt: skip

        def ask() -> httpx.Response:
            r = httpx.post(edge.url + "/v1/chat/completions", json=body, headers=keys.auth(),
                           timeout=60)  # fmt: skip
            assert r.status_code == 200, r.text
            return r

        assert ask().headers["x-edgecore-cache"] == "miss"
        server.stop()
        assert ask().headers["x-edgecore-cache"] == "error"  # bypassed, still answered
        server = redis()
        assert eventually(lambda: ask().headers["x-edgecore-cache"] in ("miss", "hit"), 15)
    finally:
        edge.stop()
        server.stop()


def test_random_client_disconnects_leave_nothing_behind(
    edge_url: str, core_url: str, engine_url: str, keys: Keys
) -> None:
    rng = random.Random(7)
    for _ in range(12):
        model = rng.choice([CORE_MODEL, "edge-smollm2-135m", "auto"])
        body = {"model": model, "stream": rng.random() < 0.8, "max_tokens": 200,
                "temperature": 0.7, "messages": STORY}  # fmt: skip
        leave_after = rng.randint(0, 4)
        try:
            timeout = httpx.Timeout(5, read=0.5)
            url = edge_url + "/v1/chat/completions"
            with httpx.stream("POST", url, json=body, headers=keys.auth(), timeout=timeout) as r:
                for n, _ in enumerate(r.iter_lines()):
                    if n >= leave_after:
                        break
        except httpx.ReadTimeout:
            pass  # a non-streamed answer we did not wait for: also a disconnect
    for url, name in [(edge_url, "edgecore_edge_in_flight"), (edge_url, "edgecore_core_streams"),
                      (edge_url, "edgecore_edge_model_running"),
                      (core_url, "edgecore_core_in_flight"),
                      (engine_url, "vllm:num_requests_running")]:  # fmt: skip
        idle = partial(lambda u, n: metric(u, n) == 0, url, name)
        assert eventually(idle), f"{name} = {metric(url, name)} (nothing may be left behind)"


def test_engine_killed_is_restarted_and_the_edge_never_hangs(
    core_url: str, models_dir: Path, log_dir: Path, keys: Keys
) -> None:
    import psutil

    port, engine_port = free_port(), free_port()
    env = service_env(
        EDGECORE_CORE_PORT=str(port), EDGECORE_CORE_ENGINE__PORT=str(engine_port),
        EDGECORE_CORE_ENGINE__MODEL=str(models_dir / "smollm2-135m-instruct-hf"),
    )  # fmt: skip
    core = start("core-restart", [sys.executable, "-m", "tools.cli", "core", "serve"], env,
                 log_dir, f"http://127.0.0.1:{port}")  # fmt: skip
    wait_ready(core, "/readyz", timeout=900)
    edge = start_edge(
        "edge-restart", log_dir, models_dir, keys_file=str(keys.file), core__url=core.url,
        redis__url=f"redis://127.0.0.1:{free_port()}/0", core__probe_interval_s="1",
    )  # fmt: skip
    body = {"model": CORE_MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}

    def ask() -> httpx.Response:
        return httpx.post(edge.url + "/v1/chat/completions", json=body, headers=keys.auth(),
                          timeout=60)  # fmt: skip

    try:
        assert ask().status_code == 200
        engines = [p for p in psutil.Process(core.proc.pid).children()
                   if "vllm.entrypoints" in " ".join(p.cmdline())]  # fmt: skip
        assert len(engines) == 1
        os.killpg(engines[0].pid, signal.SIGKILL)
        t = time.monotonic()
        down = ask()
        assert down.status_code == 503 and int(down.headers["retry-after"]) > 0
        assert time.monotonic() - t < 30
        assert eventually(lambda: httpx.get(core.url + "/readyz").status_code == 200, 600)
        assert httpx.get(core.url + "/readyz").json()["engine_restarts"] >= 1
        assert eventually(lambda: ask().status_code == 200, 30)
    finally:
        edge.stop()
        core.stop()
    assert (
        not psutil.pid_exists(engines[0].pid) or psutil.Process(engines[0].pid).status() == "zombie"
    )
