"""What every benchmark here shares: ports, percentiles, a Redis, an edge, results on disk."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from shared.paths import default_home
from shared.redis_server import redis_command, redis_env

RESULTS = Path("bench/results")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    """Milliseconds in, milliseconds out."""
    return {
        "n": len(values),
        "p50_ms": round(pct(values, 0.5), 3),
        "p95_ms": round(pct(values, 0.95), 3),
        "p99_ms": round(pct(values, 0.99), 3),
        "mean_ms": round(statistics.fmean(values), 3),
    }


async def load(
    op: Callable[[int], Awaitable[None]], *, requests: int, clients: int
) -> dict[str, float]:
    """Run ``requests`` calls of ``op`` from ``clients`` concurrent workers; ms per call."""
    latencies: list[float] = []
    counter = iter(range(requests))

    async def worker() -> None:
        for i in counter:
            t = time.perf_counter()
            await op(i)
            latencies.append((time.perf_counter() - t) * 1000.0)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    wall = time.perf_counter() - t0
    return {**summary(latencies), "clients": clients, "per_s": round(requests / wall, 1)}


@contextlib.contextmanager
def redis_server() -> Iterator[int]:
    """The bundled Redis Stack on a free port, for the length of a benchmark."""
    port = free_port()
    proc = subprocess.Popen(
        redis_command(port=port, data_dir=Path(tempfile.mkdtemp())),
        env=redis_env(default_home()),
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def edge_server(log: Path, **settings: str) -> Iterator[str]:
    """``edgecore edge serve`` on a free port with ``EDGECORE_EDGE_*`` settings."""
    port = free_port()
    env = dict(os.environ, EDGECORE_EDGE_PORT=str(port))
    env.update({f"EDGECORE_EDGE_{k.upper()}": v for k, v in settings.items()})
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "shared.cli", "edge", "serve"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 300
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"edge did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def save(name: str, results: dict[str, Any], out: Path | None = None) -> Path:
    path = out or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")
    return path
