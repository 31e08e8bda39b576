"""``edgecore up``: starts everything, the printed request works twice (second from the
cache), and SIGTERM leaves no process behind."""

from __future__ import annotations

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

from shared.stack import EXAMPLE_BODY
from tests.conftest import free_port

pytestmark = pytest.mark.slow


def test_up_serves_caches_and_stops_cleanly(models_dir: Path, tmp_path: Path) -> None:
    ports = {name: free_port() for name in ("edge", "core", "engine", "redis")}
    env = dict(
        os.environ,
        EDGECORE_EDGE_MODELS_DIR=str(models_dir),
        EDGECORE_CORE_ENGINE__MODEL=str(models_dir / "smollm2-135m-instruct-hf"),
    )
    argv = [sys.executable, "-m", "shared.cli", "up"]
    argv += [f"--{name}-port={port}" for name, port in ports.items()]
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
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    _, alive = psutil.wait_procs(children, timeout=30)
    assert not alive, [p.cmdline() for p in alive]
    assert proc.returncode == 0, out.read_text()[-3000:]
