"""Child processes that are always cleaned up: own process group, TERM, then KILL."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import psutil

log = logging.getLogger("edgecore.process")


class ChildProcess:
    """A supervised child in its own session, so stopping it also stops its children
    (vLLM's engine core, Redis modules' threads) and nothing is orphaned."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        output: IO[bytes] | int | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.output = output
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def children_cpu_s(self) -> float | None:
        """CPU seconds (user + system) its descendants have used, not counting itself: for
        vLLM, the engine core and its workers, which compute while the API server waits.
        None when it is not running or no child could be read."""
        if self.proc is None or self.proc.returncode is not None:
            return None
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return None
        total, read = 0.0, False
        for child in children:
            with contextlib.suppress(psutil.Error):
                times = child.cpu_times()
                total += times.user + times.system
                read = True
        return total if read else None

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode if self.proc else None

    async def start(self) -> None:
        log.info("starting %s: %s", self.name, " ".join(self.argv))
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            env=self.env,
            cwd=self.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=self.output,
            stderr=asyncio.subprocess.STDOUT if self.output is not None else None,
            start_new_session=True,
        )

    async def wait(self) -> int:
        assert self.proc is not None
        return await self.proc.wait()

    async def stop(self, timeout: float = 15.0) -> None:
        """TERM the whole group, wait up to ``timeout``, then KILL what is left."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        if self.proc.returncode is None:
            _signal_group(pgid, signal.SIGTERM)
            _signal_group(pgid, signal.SIGCONT)  # a frozen (SIGSTOPped) child must see the TERM
            try:
                async with asyncio.timeout(timeout):
                    await self.proc.wait()
            except TimeoutError:
                log.warning("%s did not stop in %.0fs; killing", self.name, timeout)
        # The leader may be gone while workers in its group linger: KILL the group anyway.
        _signal_group(pgid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            await self.proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def wait_http_ok(
    url: str,
    *,
    timeout: float,
    child: ChildProcess | None = None,
    interval: float = 0.5,
) -> None:
    """Poll ``url`` until it answers 200; fail fast if ``child`` exits meanwhile."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2.0) as client:
        while True:
            if child is not None and not child.running:
                raise RuntimeError(f"{child.name} exited with code {child.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} not ready after {timeout:.0f}s")
            await asyncio.sleep(interval)


# --- descendants (Linux /proc): what a dead child leaves behind ------------------------------


@dataclass(frozen=True)
class ProcInfo:
    """One process as /proc shows it; ``start`` (clock ticks after boot) tells a reused pid."""

    pid: int
    ppid: int
    session: int
    start: int
    cmdline: str


def proc_info(pid: int) -> ProcInfo | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces and ")"
    if fields[0] == "Z":
        return None  # a zombie: already dead, only waiting for its parent to reap it
    cmdline = raw.replace(b"\0", b" ").decode(errors="replace").strip()
    return ProcInfo(pid, int(fields[1]), int(fields[3]), int(fields[19]), cmdline)


def descendants(pid: int) -> list[ProcInfo]:
    """Every live process below ``pid`` (children, their children, ...); [] without /proc."""
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    by_parent: dict[int, list[ProcInfo]] = {}
    for p in pids:
        info = proc_info(p)
        if info is not None:
            by_parent.setdefault(info.ppid, []).append(info)
    found: list[ProcInfo] = []
    todo = [pid]
    while todo:
        for info in by_parent.get(todo.pop(), []):
            found.append(info)
            todo.append(info.pid)
    return found


def kill_leftovers(procs: Sequence[ProcInfo]) -> list[ProcInfo]:
    """SIGKILL those of ``procs`` that still run (same pid and start time) and their groups
    where they lead one; returns the ones it killed."""
    killed = []
    for p in procs:
        now = proc_info(p.pid)
        if now is None or now.start != p.start:
            continue  # gone, or the pid now belongs to someone else
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(p.pid) == p.pid:
                os.killpg(p.pid, signal.SIGKILL)
            os.kill(p.pid, signal.SIGKILL)
            killed.append(p)
    return killed
