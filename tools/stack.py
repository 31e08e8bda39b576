"""``edgecore up``: Redis, core (with its engine) and edge on one machine, as child processes.

Each child runs in its own process group and logs to ``<home>/logs``. A child that dies is
restarted with backoff (the core restarts its own vLLM engine); every restart is printed and
recorded in ``<home>/up-status.json``, which ``edgecore status`` prints. Ctrl-C or SIGTERM
stops them all in reverse order, and nothing is left behind; so does a crash loop (a child
dying more than ``MAX_RESTARTS`` times within ``RESTART_WINDOW_S``), with a message saying so.
The supervision and the status file are ``tools.supervisor``'s; this module starts the stack.
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

from shared.process import ChildProcess, kill_leftovers, wait_http_ok
from shared.redis_server import redis_command, redis_env
from tools.supervisor import STATUS_FILE, Supervised, Supervisor


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


# The request the banner suggests (and tests/tools/test_up.py replays): deterministic, so the
# second identical call is a cache hit.
EXAMPLE_BODY = {
    "model": "auto",
    "temperature": 0,
    "stream": True,
    "messages": [{"role": "user", "content": "What is the capital of France?"}],
}


def dev_key(home: Path) -> tuple[Path, str]:
    """The development tenant's keys file and its key (kept in plain text for dev only)."""
    from edge.tenancy.keys import add_key

    keys_file, plain = home / "dev-keys.toml", home / "dev-key.txt"
    if not (keys_file.exists() and plain.exists()):
        keys_file.unlink(missing_ok=True)
        plain.write_text(add_key(keys_file, "dev"))
        plain.chmod(0o600)
    return keys_file, plain.read_text().strip()


def _banner(ports: StackPorts, log_dir: Path, key: str, status_file: Path) -> str:
    url = f"http://{ports.host}:{ports.edge}"
    body = json.dumps(EXAMPLE_BODY)
    return f"""
edgecore is up.
  edge   {url}   (OpenAI-compatible: /v1/chat/completions, /v1/models, /metrics)
  core   http://{ports.host}:{ports.core}   (vLLM engine on :{ports.engine})
  redis  redis://{ports.host}:{ports.redis}
  logs   {log_dir}
  status {status_file}   (edgecore status; children that die are restarted)
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


def _children(
    home: Path, ports: StackPorts, log_dir: Path, keys_file: Path, redis_dir: Path
) -> list[ChildProcess]:
    redis_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        EDGECORE_HOME=str(home),
        EDGECORE_CORE_HOST=ports.host,
        EDGECORE_CORE_PORT=str(ports.core),
        EDGECORE_CORE_ENGINE__PORT=str(ports.engine),
        EDGECORE_EDGE_HOST=ports.host,
        EDGECORE_EDGE_PORT=str(ports.edge),
        EDGECORE_EDGE_CORE__URL=f"http://{ports.host}:{ports.core}",
        EDGECORE_EDGE_REDIS__URL=f"redis://{ports.host}:{ports.redis}/0",
        EDGECORE_EDGE_KEYS_FILE=str(keys_file),
    )
    # The core admits only edges with its token: generated here, handed to both.
    token = env.get("EDGECORE_CORE_AUTH_TOKEN") or core_token(home)
    env.update(EDGECORE_CORE_AUTH_TOKEN=token, EDGECORE_EDGE_CORE__TOKEN=token)
    me = [sys.executable, "-m", "tools.cli"]
    # Persistent: a Redis restarted after a crash comes back with the cache and its index.
    redis = redis_command(port=ports.redis, data_dir=redis_dir, bind=ports.host, persist=True)
    commands = [
        ("redis", redis, redis_env(home)),
        ("core", [*me, "core", "serve"], env),
        ("edge", [*me, "edge", "serve"], env),
    ]
    # Each child owns its log file; it stays open for the child's lifetime (restarts append).
    return [
        ChildProcess(name, argv, env=e, output=open(log_dir / f"{name}.log", "ab"))
        for name, argv, e in commands
    ]


async def up(
    home: Path,
    ports: StackPorts,
    *,
    status_file: Path | None = None,
    redis_dir: Path | None = None,
) -> int:
    log_dir = home / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    keys_file, key = dev_key(home)
    status_file = status_file or home / STATUS_FILE
    status_file.parent.mkdir(parents=True, exist_ok=True)
    redis_dir = redis_dir or home / "redis" / "data"
    redis, core, edge = _children(home, ports, log_dir, keys_file, redis_dir)
    url = f"http://{ports.host}:{{}}/readyz".format

    async def redis_ready(c: ChildProcess) -> None:
        await wait_redis(ports.redis, ports.host, 30, c)

    async def core_ready(c: ChildProcess) -> None:
        await wait_http_ok(url(ports.core), timeout=900, child=c)

    async def edge_ready(c: ChildProcess) -> None:
        await wait_http_ok(url(ports.edge), timeout=300, child=c)

    children = [
        Supervised(redis, redis_ready, log_dir / "redis.log"),
        Supervised(core, core_ready, log_dir / "core.log"),
        Supervised(edge, edge_ready, log_dir / "edge.log"),
    ]
    stop = asyncio.Event()
    sup = Supervisor(children, status_file, stop)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    started: list[Supervised] = []
    tasks: list[asyncio.Task[None]] = []
    notes = {
        "redis": f"starting redis on :{ports.redis} (data in {redis_dir}) ...",
        "core": f"starting core on :{ports.core} (the vLLM engine takes ~30-90 s on a CPU) ...",
        "edge": f"starting edge on :{ports.edge} ...",
    }
    try:
        sup.write_status()
        # Start in order, each ready before the next; a child that dies now fails `up`.
        for s in children:
            print(notes[s.name], flush=True)
            await s.start()
            started.append(s)
            sup.write_status()
            await _until(stop, s.ready(s.child))
            s.state = "running"
        sup.state = "running"
        sup.observe()
        sup.write_status()
        print(_banner(ports, log_dir, key, status_file), flush=True)
        tasks = [asyncio.create_task(sup.watch(s), name=f"watch-{s.name}") for s in children]
        tasks.append(asyncio.create_task(sup.monitor(), name="monitor"))
        await stop.wait()
        if sup.failed:
            print(f"edgecore up: {sup.message}", file=sys.stderr, flush=True)
            return 1
        return 0
    except (RuntimeError, TimeoutError) as exc:
        sup.failed = True
        sup.message = f"edgecore up failed: {exc}; logs in {log_dir}"
        print(sup.message, file=sys.stderr)
        return 1
    except asyncio.CancelledError:
        return 130
    finally:
        for t in tasks:
            t.cancel()
        sup.state = "stopping"
        sup.write_status()
        print("stopping ...", flush=True)
        sup.observe()
        for s in reversed(started):
            await s.child.stop()
            kill_leftovers(s.leftovers)
            s.state = "stopped"
        sup.engine = None
        sup.state = "failed" if sup.failed else "stopped"
        sup.write_status()
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
