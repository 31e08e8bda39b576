"""Child processes that are always cleaned up: own process group, TERM, then KILL."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Mapping, Sequence
from typing import IO

import httpx

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
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
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
