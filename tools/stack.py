"""``edgecore up``: Redis, core (with its engine) and edge on one machine, as child processes.

Each child runs in its own process group and logs to ``<home>/logs``. A child that dies is
restarted with backoff (the core restarts its own vLLM engine); every restart is printed and
recorded in ``<home>/up-status.json``, which ``edgecore status`` prints. Ctrl-C or SIGTERM
stops them all in reverse order, and nothing is left behind; so does a crash loop (a child
dying more than ``MAX_RESTARTS`` times within ``RESTART_WINDOW_S``), with a message saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from shared.process import ChildProcess, ProcInfo, descendants, kill_leftovers, wait_http_ok
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
        EDGECORE_EDGE_CORE_URL=f"http://{ports.host}:{ports.core}",
        EDGECORE_EDGE_REDIS_URL=f"redis://{ports.host}:{ports.redis}/0",
        EDGECORE_EDGE_KEYS_FILE=str(keys_file),
    )
    # The core admits only edges with its token: generated here, handed to both.
    token = env.get("EDGECORE_CORE_AUTH_TOKEN") or core_token(home)
    env.update(EDGECORE_CORE_AUTH_TOKEN=token, EDGECORE_EDGE_CORE_TOKEN=token)
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


# --- supervision ---------------------------------------------------------------------------

RESTART_WINDOW_S = 60.0
MAX_RESTARTS = 5  # within the window; the next crash of the same child stops everything
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0


def describe_exit(code: int | None) -> str:
    if code is None:
        return "-"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _now() -> str:
    return time.strftime("%H:%M:%S")


def _iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))


class Supervised:
    """One child of ``up``, its readiness check and its restart record."""

    def __init__(
        self,
        child: ChildProcess,
        ready: Callable[[ChildProcess], Awaitable[None]],
        log_path: Path,
    ) -> None:
        self.child = child
        self.ready = ready
        self.log_path = log_path
        self.state = "starting"
        self.restarts = 0
        self.last_exit: int | None = None
        self.last_exit_at: float | None = None
        self.started_at: float | None = None
        self.recent: deque[float] = deque()  # monotonic times of recent crashes
        self.unready = 0  # crashes in a row without getting ready in between
        self.leftovers: list[ProcInfo] = []  # its descendants, as last seen

    @property
    def name(self) -> str:
        return self.child.name

    async def start(self) -> None:
        await self.child.start()
        self.started_at = time.time()
        self.state = "starting"

    def crashed(self, code: int, now: float) -> int:
        """Record a crash; how many count towards a crash loop: those within the window, or
        those in a row that never got ready (a core whose engine fails after 90 s each time)."""
        self.last_exit, self.last_exit_at = code, time.time()
        self.unready = 0 if self.state == "running" else self.unready + 1
        self.recent.append(now)
        while self.recent and now - self.recent[0] > RESTART_WINDOW_S:
            self.recent.popleft()
        return max(len(self.recent), self.unready)

    def status(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "pid": self.child.pid if self.child.running else None,
            "restarts": self.restarts,
            "last_exit_code": self.last_exit,
            "last_exit": describe_exit(self.last_exit) if self.last_exit is not None else None,
            "last_exit_at": _iso(self.last_exit_at),
            "started_at": _iso(self.started_at),
            "log": str(self.log_path),
        }


class Supervisor:
    """Restart a child that dies, with backoff; stop everything on a signal or a crash loop.

    The vLLM engine is the core's child, and the core supervises it (core/engine.py: restart
    with backoff). ``up`` only watches it: its pid and the restarts it saw go to the status
    file. When the core itself dies, the engine it leaves behind (its own session) is killed
    before the core starts again, or the new core's engine would find its port taken.
    """

    def __init__(self, children: list[Supervised], status_file: Path, stop: asyncio.Event):
        self.children = children
        self.status_file = status_file
        self.stop = stop
        self.state = "starting"
        self.message: str | None = None
        self.failed = False
        self.started_at = time.time()
        self.events: deque[dict[str, Any]] = deque(maxlen=100)
        self.engine: ProcInfo | None = None
        self.engine_restarts = 0

    def say(self, text: str, *, error: bool = False) -> None:
        print(f"{_now()} {text}", file=sys.stderr if error else sys.stdout, flush=True)

    def event(self, name: str, what: str, **detail: Any) -> None:
        self.events.append({"at": _iso(time.time()), "child": name, "event": what, **detail})
        self.write_status()

    def write_status(self) -> None:
        children = {s.name: s.status() for s in self.children}
        core = next((s for s in self.children if s.name == "core"), None)
        if core is not None:
            children["engine"] = {
                "state": "running" if self.engine is not None else "absent",
                "pid": self.engine.pid if self.engine else None,
                "restarts": self.engine_restarts,
                "supervised_by": "core",
                "log": str(core.log_path),
            }
        body = {
            "pid": os.getpid(),
            "state": self.state,
            "message": self.message,
            "started_at": _iso(self.started_at),
            "updated_at": _iso(time.time()),
            "restart_policy": {
                "max_restarts": MAX_RESTARTS,
                "window_s": RESTART_WINDOW_S,
                "backoff_s": [FIRST_BACKOFF_S, MAX_BACKOFF_S],
            },
            "children": children,
            "events": list(self.events),
        }
        tmp = self.status_file.with_name(self.status_file.name + ".tmp")
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps(body, indent=2) + "\n")
            tmp.replace(self.status_file)  # readers never see half a file

    def observe(self) -> None:
        """Remember each child's descendants (to clean up after it) and the core's engine."""
        for s in self.children:
            if s.child.running and s.child.pid is not None:
                s.leftovers = descendants(s.child.pid)
            if s.name == "core" and s.child.running:
                # The engine runs in its own session (pid == session id) under the core.
                engine = next((p for p in s.leftovers if p.session == p.pid), None)
                if engine is None:
                    continue  # between two engines: keep the last one seen
                old = self.engine
                if old is not None and (engine.pid, engine.start) != (old.pid, old.start):
                    self.engine_restarts += 1
                    self.say(f"engine restarted by the core (pid {engine.pid})")
                    self.event("engine", "restarted by the core", pid=engine.pid)
                self.engine = engine

    async def monitor(self) -> None:
        while True:
            self.observe()
            self.write_status()
            await asyncio.sleep(1.0)

    async def watch(self, s: Supervised) -> None:
        """Restart ``s`` whenever it dies, until a stop or a crash loop."""
        while True:
            code = await s.child.wait()
            if self.stop.is_set():
                return
            crashes = s.crashed(code, time.monotonic())
            why = describe_exit(code)
            if crashes > MAX_RESTARTS:
                within = (
                    f"within {RESTART_WINDOW_S:.0f} s"
                    if len(s.recent) > MAX_RESTARTS
                    else "in a row without getting ready"
                )
                self.message = (
                    f"{s.name} died {crashes} times {within} (last: {why}); "
                    f"giving up and stopping everything. See {s.log_path}"
                )
                s.state = "failed"
                self.failed = True
                self.event(s.name, "crash loop", exit=why, exit_code=code)
                self.stop.set()
                return
            delay = min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** (crashes - 1))
            s.state = "restarting"
            s.restarts += 1
            self.say(
                f"{s.name} (pid {s.child.pid}) died: {why}; restarting in {delay:g} s "
                f"(restart {s.restarts}; more than {MAX_RESTARTS} crashes within "
                f"{RESTART_WINDOW_S:.0f} s, or in a row before ready, stop everything)",
                error=True,
            )
            self.event(s.name, "died", exit=why, exit_code=code, restart_in_s=delay)
            await s.child.stop(timeout=5)  # what is left of its process group
            killed = kill_leftovers(s.leftovers)
            if s.name == "core":
                self.engine = None  # the next core starts its own: not an engine restart
            if killed:
                names = ", ".join(f"{p.pid} ({p.cmdline[:60]})" for p in killed)
                self.say(f"killed what {s.name} left behind: {names}")
            s.leftovers = []
            await asyncio.sleep(delay)
            if self.stop.is_set():
                return
            await s.start()
            self.event(s.name, "restarted", pid=s.child.pid, restarts=s.restarts)
            try:
                await s.ready(s.child)
            except (RuntimeError, TimeoutError) as exc:
                self.say(f"{s.name} did not come back: {exc}", error=True)
                continue  # it died (counted as the next crash) or is still not ready
            s.state = "running"
            self.say(f"{s.name} is back (pid {s.child.pid})")
            self.event(s.name, "ready", pid=s.child.pid)


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


# --- `edgecore status` ---------------------------------------------------------------------

STATUS_FILE = "up-status.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def format_status(status: dict[str, Any]) -> str:
    """What ``edgecore status`` prints: the stack, each child, the recent restarts."""
    up_pid = int(status.get("pid") or 0)
    state = status.get("state", "?")
    if state in ("starting", "running", "stopping") and not (up_pid and _alive(up_pid)):
        state = f"gone (was {state}; `edgecore up` pid {up_pid} no longer runs)"
    lines = [f"edgecore up (pid {up_pid}): {state}, since {status.get('started_at')}"]
    if status.get("message"):
        lines.append(f"  {status['message']}")
    lines.append(f"  {'child':<8}{'state':<12}{'pid':>8}{'restarts':>10}  last exit")
    for name, c in (status.get("children") or {}).items():
        last = c.get("last_exit") or "-"
        if c.get("last_exit_at"):
            last += f" at {c['last_exit_at']}"
        if c.get("supervised_by"):
            last = f"(supervised by the {c['supervised_by']}; restarts seen by up)"
        pid = c.get("pid") or "-"
        lines.append(
            f"  {name:<8}{c.get('state', '?'):<12}{pid!s:>8}{c.get('restarts', 0):>10}  {last}"
        )
    events = status.get("events") or []
    if events:
        lines.append("  recent events:")
        for e in events[-10:]:
            extra = ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("at", "child", "event"))
            lines.append(
                f"    {e['at']} {e['child']}: {e['event']}" + (f" ({extra})" if extra else "")
            )
    return "\n".join(lines)
