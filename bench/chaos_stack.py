"""The stack chaos runs against: ``edgecore up`` on free ports, its children's pids (from the
status file) and their resident memory.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import _stop_group, free_port


class Stack:
    """``edgecore up`` on free ports, with its status file and Redis data in a temp dir."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.ports = {name: free_port() for name in ("edge", "core", "engine", "redis")}
        self.status_file = workdir / "up-status.json"
        self.log = workdir / "up.log"
        self.edge = f"http://127.0.0.1:{self.ports['edge']}"
        self.key = ""
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 900) -> None:
        argv = [sys.executable, "-m", "tools.cli", "up"]
        argv += [f"--{name}-port={port}" for name, port in self.ports.items()]
        argv += [f"--status-file={self.status_file}", f"--redis-dir={self.workdir / 'redis'}"]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while "edgecore is up" not in self.log.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"stack did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(1)
        key = re.search(r"Bearer (ec-[\w-]+)", self.log.read_text())
        if key is None:
            raise SystemExit("no development key in the banner")
        self.key = key.group(1)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            _stop_group(self.proc, 5)
        return self.proc.returncode

    def status(self) -> dict[str, Any]:
        with contextlib.suppress(OSError, ValueError):
            data: dict[str, Any] = json.loads(self.status_file.read_text())
            return data
        return {}

    @property
    def core(self) -> str:
        return f"http://127.0.0.1:{self.ports['core']}"

    def pid(self, component: str) -> int | None:
        """A child's pid; "scheduler": vLLM's EngineCore process, under the engine."""
        if component == "scheduler":
            return scheduler_pid(self.pid("engine"))
        child = self.status().get("children", {}).get(component, {})
        pid = child.get("pid")
        return int(pid) if pid else None


def scheduler_pid(engine: int | None) -> int | None:
    """vLLM's EngineCore (it names itself VLLM::EngineCore) among the engine's processes."""
    import psutil  # type: ignore[import-untyped]

    if engine is None:
        return None
    with contextlib.suppress(psutil.NoSuchProcess):
        for p in psutil.Process(engine).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                if "EngineCore" in p.name() + " ".join(p.cmdline()):
                    return int(p.pid)
    return None


def rss_mb(stack: Stack, *, private: bool = False) -> dict[str, float | None]:
    """Resident memory of each part (with its descendants; the core's without its engine).
    ``private``: without file-backed and shared pages (RSS minus psutil's ``shared``), what a
    leak grows; RSS also counts the pages of mapped files, such as the edge model's weights,
    which come in as prompts touch them and which the kernel may drop."""
    import psutil  # type: ignore[import-untyped]

    out: dict[str, float | None] = {}
    engine = stack.pid("engine")
    pids = {name: stack.pid(name) for name in ("redis", "core", "engine", "edge")}
    pids["up"] = stack.proc.pid if stack.proc else None
    for name, pid in pids.items():
        if pid is None:
            out[name] = None
            continue
        try:
            root = psutil.Process(pid)
            procs = [root]
            if name != "up":
                procs += root.children(recursive=True)
            skip = set()
            if name == "core" and engine is not None:
                with contextlib.suppress(psutil.NoSuchProcess):
                    e = psutil.Process(engine)
                    skip = {e.pid, *(c.pid for c in e.children(recursive=True))}
            total = 0
            for p in procs:
                if p.pid not in skip:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        info = p.memory_info()
                        total += info.rss - info.shared if private else info.rss
            out[name] = round(total / 2**20, 1)
        except psutil.NoSuchProcess:
            out[name] = None
    return out
