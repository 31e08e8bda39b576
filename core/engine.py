"""Supervise one vLLM OpenAI server process: start, wait for health, restart on crash, stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from core.settings import EngineConfig
from shared.process import ChildProcess
from shared.tasks import cancel_and_wait

log = logging.getLogger("edgecore.core.engine")


def engine_env(config: EngineConfig, home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        VLLM_CACHE_ROOT=str(home / "vllm-cache"),
        TORCHINDUCTOR_CACHE_DIR=str(home / "inductor-cache"),
    )
    if config.cpu_kv_cache_gib:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(config.cpu_kv_cache_gib))
    if config.cpu_threads_bind:
        # Replicas sharing a CPU box each get their own cores instead of all binding the same.
        env["VLLM_CPU_OMP_THREADS_BIND"] = config.cpu_threads_bind
    if config.visible_devices:
        env["CUDA_VISIBLE_DEVICES"] = config.visible_devices
    return env


@dataclass(frozen=True)
class EngineHealth:
    """How an engine's health is watched (CoreSettings.engine_health_*)."""

    interval_s: float = 1.0  # between /health probes of a ready engine
    timeout_s: float = 2.0  # a probe not answered by then failed (a frozen engine)
    wedged_restart_s: float = 60.0  # unhealthy this long after being ready: restart; 0: never


class Engine:
    """One engine process. ``ready`` is true while its ``/health`` answers 200 within
    ``health.timeout_s``.

    ``on_change`` runs whenever readiness flips, so the pool can move queued requests;
    ``on_stall`` when a ready engine stops answering its probe (not when it merely exits),
    so the replica can end what waits on it. An engine that stays unhealthy for
    ``health.wedged_restart_s`` after it was ready is killed and restarted.
    """

    def __init__(
        self,
        config: EngineConfig,
        home: Path,
        log_file: IO[bytes] | None = None,
        on_change: Callable[[], None] | None = None,
        name: str = "engine",
        *,
        health: EngineHealth | None = None,
        on_stall: Callable[[], None] | None = None,
    ):
        self.config = config
        self.home = home
        self.log_file = log_file
        self.name = name
        self.on_change = on_change
        self.on_stall = on_stall
        self.health = health or EngineHealth()
        self.ready = asyncio.Event()
        self.restarts = 0
        self.wedged = 0  # restarts because it stopped answering (not because it exited)
        self._child: ChildProcess | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._wedged = False

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child else None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def cpu_s(self) -> float | None:
        """CPU seconds the engine's scheduler and workers have used (not its API server)."""
        return self._child.children_cpu_s() if self._child else None

    def start(self) -> None:
        """Start supervising (again, after ``stop``)."""
        if self.running:
            return
        self._stopping = False
        self._wedged = False
        self._task = asyncio.create_task(self._supervise(), name=f"{self.name}-supervisor")

    def _set_ready(self, ready: bool) -> None:
        if ready == self.ready.is_set():
            return
        if ready:
            self.ready.set()
        else:
            self.ready.clear()
        if self.on_change is not None:
            self.on_change()

    async def wait_ready(self, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            await self.ready.wait()

    def suspect(self) -> None:
        """A request failed to connect: not ready until the next health check passes."""
        self._set_ready(False)

    def set_wedged(self, wedged: bool) -> None:
        """The replica found it making no progress (core/progress.py) while /health says
        200: it counts as unhealthy for the restart clock, until progress resumes."""
        self._wedged = wedged

    async def _supervise(self) -> None:
        backoff = 1.0
        while not self._stopping:
            self._wedged = False  # a new process: the replica's canary says if it works
            self._child = ChildProcess(
                "vllm-engine",
                self.config.command(),
                env=engine_env(self.config, self.home),
                output=self.log_file,
            )
            await self._child.start()
            started = time.monotonic()
            health = asyncio.create_task(self._watch_health())
            code = await self._child.wait()
            health.cancel()
            self._set_ready(False)
            if self._stopping:
                return
            if time.monotonic() - started > 300:
                backoff = 1.0  # it ran fine for a while: this is a new crash, not a crash loop
            # A crash: restart with capped exponential backoff so a broken config doesn't spin.
            self.restarts += 1
            log.error("%s exited with %s; restarting in %.0fs", self.name, code, backoff)
            await self._child.stop(timeout=5)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 60.0)

    async def _watch_health(self) -> None:
        url = self.config.base_url + "/health"
        child = self._child
        h = self.health
        was_ready = False  # in this process's life: a starting engine is not wedged
        unhealthy_since: float | None = None
        async with httpx.AsyncClient(timeout=h.timeout_s) as client:
            while True:
                ok = False
                with contextlib.suppress(httpx.HTTPError):
                    ok = (await client.get(url)).status_code == 200
                if ok and not self.ready.is_set():
                    log.info("%s ready at %s", self.name, self.config.base_url)
                stalled = not ok and self.ready.is_set()
                self._set_ready(ok)
                if stalled:
                    log.warning("%s did not answer /health in %gs: unhealthy", self.name,
                                h.timeout_s)  # fmt: skip
                    if self.on_stall is not None:
                        self.on_stall()
                now = time.monotonic()
                if ok and not self._wedged:
                    was_ready, unhealthy_since = True, None
                elif was_ready:
                    unhealthy_since = unhealthy_since or now
                    if h.wedged_restart_s and now - unhealthy_since >= h.wedged_restart_s:
                        why = "no progress" if ok else "no answer to /health"
                        log.error("%s unhealthy (%s) for %.0fs: wedged; restarting it",
                                  self.name, why, now - unhealthy_since)  # fmt: skip
                        self.wedged += 1
                        if child is not None:
                            # TERM, then KILL after 5 s (a stopped process only dies of KILL);
                            # the supervisor then restarts it as after a crash.
                            await child.stop(timeout=5)
                        return
                await asyncio.sleep(h.interval_s if ok else min(0.5, h.interval_s))

    async def stop(self) -> None:
        self._stopping = True
        if self._child is not None:
            await self._child.stop(timeout=20)
        await cancel_and_wait([self._task])
        self._set_ready(False)
