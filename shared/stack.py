"""``edgecore up``: Redis, core (with its engine) and edge on one machine, as child processes.

Each child runs in its own process group and logs to ``<home>/logs``; Ctrl-C or SIGTERM
stops them all in reverse order, and nothing is left behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path

from redis.asyncio import Redis

from shared.process import ChildProcess, wait_http_ok
from shared.redis_server import redis_command, redis_env


@dataclass
class StackPorts:
    edge: int = 8080
    core: int = 8090
    engine: int = 8091
    redis: int = 6390
    host: str = "127.0.0.1"


async def wait_redis(port: int, host: str, timeout: float, child: ChildProcess) -> None:
    deadline = time.monotonic() + timeout
    client = Redis(host=host, port=port, socket_connect_timeout=1.0)
    try:
        while True:
            if not child.running:
                raise RuntimeError(f"redis exited with code {child.returncode}")
            try:
                if await client.ping():
                    return
            except Exception:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"redis on port {port} not ready") from None
            await asyncio.sleep(0.2)
    finally:
        await client.aclose()


# The request the banner suggests (and tests/test_up.py replays): deterministic, so the
# second identical call is a cache hit.
EXAMPLE_BODY = {
    "model": "auto",
    "temperature": 0,
    "stream": True,
    "messages": [{"role": "user", "content": "What is the capital of France?"}],
}


def dev_key(home: Path) -> tuple[Path, str]:
    """The development tenant's keys file and its key (kept in plain text for dev only)."""
    from edge.tenants import add_key

    keys_file, plain = home / "dev-keys.toml", home / "dev-key.txt"
    if not (keys_file.exists() and plain.exists()):
        keys_file.unlink(missing_ok=True)
        plain.write_text(add_key(keys_file, "dev"))
        plain.chmod(0o600)
    return keys_file, plain.read_text().strip()


def _banner(ports: StackPorts, log_dir: Path, key: str) -> str:
    url = f"http://{ports.host}:{ports.edge}"
    body = json.dumps(EXAMPLE_BODY)
    return f"""
edgecore is up.
  edge   {url}   (OpenAI-compatible: /v1/chat/completions, /v1/models, /metrics)
  core   http://{ports.host}:{ports.core}   (vLLM engine on :{ports.engine})
  redis  redis://{ports.host}:{ports.redis}
  logs   {log_dir}
  key    {key}   (development key; production edges use EDGECORE_EDGE_KEYS_FILE)

Try it (run it twice: the second answer comes from the cache, x-edgecore-tier: cache):

  curl -sN {url}/v1/chat/completions -D - -H 'authorization: Bearer {key}' \\
    -H 'content-type: application/json' -d '{body}'

From Python (pip install openai):

  from openai import OpenAI
  client = OpenAI(base_url="{url}/v1", api_key="{key}")
  r = client.chat.completions.create(model="auto", temperature=0,
      messages=[{{"role": "user", "content": "Name three primary colours."}}])
  print(r.choices[0].message.content)

Ctrl-C stops everything.
"""


def core_token(home: Path) -> str:
    """The development core's edge token: made once, readable by this user only."""
    path = home / "dev-core-token.txt"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    return path.read_text().strip()


def _children(home: Path, ports: StackPorts, log_dir: Path, keys_file: Path) -> list[ChildProcess]:
    redis_dir = home / "redis" / "data"
    redis_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        EDGECORE_HOME=str(home),
        EDGECORE_CORE_HOST=ports.host,
        EDGECORE_CORE_PORT=str(ports.core),
        EDGECORE_CORE_ENGINE__PORT=str(ports.engine),
        EDGECORE_EDGE_HOST=ports.host,
        EDGECORE_EDGE_PORT=str(ports.edge),
        EDGECORE_EDGE_CORE_URL=f"http://{ports.host}:{ports.core}",
        EDGECORE_EDGE_REDIS_URL=f"redis://{ports.host}:{ports.redis}/0",
        EDGECORE_EDGE_KEYS_FILE=str(keys_file),
    )
    # The core admits only edges with its token: generated here, handed to both.
    token = env.get("EDGECORE_CORE_AUTH_TOKEN") or core_token(home)
    env.update(EDGECORE_CORE_AUTH_TOKEN=token, EDGECORE_EDGE_CORE_TOKEN=token)
    me = [sys.executable, "-m", "shared.cli"]
    redis = redis_command(port=ports.redis, data_dir=redis_dir, bind=ports.host)
    commands = [
        ("redis", redis, redis_env(home)),
        ("core", [*me, "core", "serve"], env),
        ("edge", [*me, "edge", "serve"], env),
    ]
    # Each child owns its log file; it stays open for the child's lifetime.
    return [
        ChildProcess(name, argv, env=e, output=open(log_dir / f"{name}.log", "ab"))
        for name, argv, e in commands
    ]


async def up(home: Path, ports: StackPorts) -> int:
    log_dir = home / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    keys_file, key = dev_key(home)
    children = _children(home, ports, log_dir, keys_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    started: list[ChildProcess] = []
    try:
        redis, core, edge = children
        print(f"starting redis on :{ports.redis} ...", flush=True)
        await redis.start()
        started.append(redis)
        await wait_redis(ports.redis, ports.host, 30, redis)
        print(
            f"starting core on :{ports.core} (the vLLM engine takes ~30-90 s on a CPU) ...",
            flush=True,
        )
        await core.start()
        started.append(core)
        await _until(
            stop, wait_http_ok(f"http://{ports.host}:{ports.core}/readyz", timeout=900, child=core)
        )
        print(f"starting edge on :{ports.edge} ...", flush=True)
        await edge.start()
        started.append(edge)
        await _until(
            stop, wait_http_ok(f"http://{ports.host}:{ports.edge}/readyz", timeout=300, child=edge)
        )
        print(_banner(ports, log_dir, key), flush=True)
        waits = [asyncio.create_task(c.wait()) for c in started]
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait([stopper, *waits], return_when=asyncio.FIRST_COMPLETED)
        for t in [stopper, *waits]:
            t.cancel()
        for c in started:
            if not c.running:
                print(
                    f"{c.name} exited with code {c.returncode}; see {log_dir}/{c.name}.log",
                    file=sys.stderr,
                )
                return 1
        return 0
    except (RuntimeError, TimeoutError) as exc:
        print(f"edgecore up failed: {exc}; logs in {log_dir}", file=sys.stderr)
        return 1
    except asyncio.CancelledError:
        return 130
    finally:
        print("stopping ...", flush=True)
        for c in reversed(started):
            await c.stop()
        print("stopped.", flush=True)


async def _until(stop: asyncio.Event, work: Awaitable[None]) -> None:
    """Await ``work`` unless a stop signal comes first."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([task, stopper], return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if task not in done:
        task.cancel()
        raise asyncio.CancelledError()
    task.result()
