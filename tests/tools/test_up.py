"""``edgecore up``: starts everything, the printed request works twice (second from the
cache), a Redis killed with SIGKILL is restarted with its data while the stack stays up, and
SIGTERM leaves no process behind. One stack start serves all of it (it costs minutes)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
import redis

from tests.conftest import free_port
from tools.stack import EXAMPLE_BODY

pytestmark = pytest.mark.slow


def test_up_serves_caches_and_stops_cleanly(models_dir: Path, tmp_path: Path) -> None:
    ports = {name: free_port() for name in ("edge", "core", "engine", "redis")}
    env = dict(
        os.environ,
        EDGECORE_EDGE_MODELS_DIR=str(models_dir),
        EDGECORE_CORE_ENGINE__MODEL=str(models_dir / "smollm2-135m-instruct-hf"),
    )
    argv = [sys.executable, "-m", "tools.cli", "up"]
    argv += [f"--{name}-port={port}" for name, port in ports.items()]
    status_file = tmp_path / "up-status.json"
    argv += [f"--status-file={status_file}", f"--redis-dir={tmp_path / 'redis'}"]
    out = tmp_path / "up.log"
    with out.open("wb") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 900
        while "edgecore is up" not in out.read_text():
            assert proc.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(1)
        banner = out.read_text()
        edge = f"http://127.0.0.1:{ports['edge']}"
        assert f"curl -sN {edge}/v1/chat/completions" in banner
        key = re.search(r"Bearer (ec-[\w-]+)", banner)
        assert key is not None, banner
        auth = {"authorization": f"Bearer {key.group(1)}"}
        assert httpx.post(edge + "/v1/chat/completions", json=EXAMPLE_BODY).status_code == 401

        tiers = []
        for _ in range(2):
            with httpx.stream(
                "POST", edge + "/v1/chat/completions", json=EXAMPLE_BODY, headers=auth, timeout=120
            ) as r:
                assert r.status_code == 200
                text = r.read().decode()
                tiers.append(r.headers["x-edgecore-tier"])
            assert text.rstrip().endswith("data: [DONE]")
            time.sleep(0.3)  # the cache store runs just after the stream ends
        assert tiers == ["edge", "cache"], tiers

        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 3  # redis, core (+ its engine), edge

        _redis_killed_and_restarted(proc, ports["redis"], status_file, edge, auth, out)
        children += psutil.Process(proc.pid).children(recursive=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    _, alive = psutil.wait_procs(children, timeout=30)
    assert not alive, [p.cmdline() for p in alive]
    assert proc.returncode == 0, out.read_text()[-3000:]


def _redis_killed_and_restarted(
    proc: subprocess.Popen[bytes],
    port: int,
    status_file: Path,
    edge: str,
    auth: dict[str, str],
    out: Path,
) -> None:
    """SIGKILL Redis: ``up`` restarts it within 15 s from its append-only file, nothing else
    stops, the edge answers meanwhile, and the cached answer is served again afterwards."""
    status = json.loads(status_file.read_text())
    assert status["state"] == "running", status
    pid = status["children"]["redis"]["pid"]
    client = redis.Redis(port=port, socket_timeout=2)
    entries = client.dbsize()
    assert entries > 0
    time.sleep(1.5)  # the append-only file is fsynced once a second
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    while True:
        try:
            if client.ping():
                break
        except redis.RedisError:
            pass
        assert time.monotonic() - killed < 15, out.read_text()[-3000:]
        time.sleep(0.2)
    assert proc.poll() is None, out.read_text()[-3000:]
    assert client.dbsize() >= entries  # the cache survived the restart
    r = httpx.post(edge + "/v1/chat/completions", json=EXAMPLE_BODY, headers=auth, timeout=120)
    assert r.status_code == 200, r.text
    assert r.text.rstrip().endswith("data: [DONE]")
    # Once the edge's back-off from the failed Redis ends, the cached answer comes back.
    deadline, tier = time.monotonic() + 60, ""
    while tier != "cache" and time.monotonic() < deadline:
        time.sleep(1)
        r = httpx.post(edge + "/v1/chat/completions", json=EXAMPLE_BODY, headers=auth, timeout=120)
        assert r.status_code == 200, r.text
        tier = r.headers["x-edgecore-tier"]
    assert tier == "cache"

    deadline = time.monotonic() + 10  # the status file is rewritten every second
    while True:
        status = json.loads(status_file.read_text())
        redis_status = status["children"]["redis"]
        if redis_status["state"] == "running" and redis_status["pid"] not in (None, pid):
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.5)
    assert redis_status["restarts"] == 1 and redis_status["last_exit_code"] == -9, status
    assert [s["restarts"] for n, s in status["children"].items() if n != "redis"] == [0, 0, 0]
    assert "redis (pid" in out.read_text() and "redis is back" in out.read_text()
    shown = subprocess.run(
        [sys.executable, "-m", "tools.cli", "status", f"--file={status_file}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert re.search(r"redis\s+running\s+\d+\s+1\s+killed by SIGKILL", shown), shown
