"""Supervising ``edgecore up``'s children: restart one that dies, with backoff, stop them all
on a signal or a crash loop (a child dying more than ``MAX_RESTARTS`` times within
``RESTART_WINDOW_S``), and the status file ``edgecore status`` prints (``format_status``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from shared.process import ChildProcess, ProcInfo, descendants, kill_leftovers

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
