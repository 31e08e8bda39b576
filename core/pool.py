"""The pool: replicas, the admission queue in front of them, the load poller, and the
operations the core team runs on it (drain, undrain, restart)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from typing import IO, Any, Literal

from core.admission import Admission, Priority
from core.balancer import choose
from core.engine import EngineHealth
from core.pool_config import ReplicaConfig
from core.progress import ProgressPolicy
from core.replica import Lease, Replica
from core.settings import CoreSettings
from shared.repeats import RepeatLog
from shared.tasks import cancel_and_wait

log = logging.getLogger("edgecore.core.pool")

AfterDrain = Literal["idle", "stop"]


class UnknownReplica(KeyError):
    pass


class Pool:
    def __init__(
        self,
        settings: CoreSettings,
        replicas: list[ReplicaConfig],
        log_file: IO[bytes] | None = None,
    ) -> None:
        self.settings = settings
        self.health = EngineHealth(
            settings.health.interval_s,
            settings.health.timeout_s,
            settings.health.wedged_restart_s,
        )
        self.progress = ProgressPolicy(
            settings.health.progress_timeout_s,
            settings.health.prefill_tokens_per_s,
            settings.health.canary_idle_s,
        )
        self.replicas = [
            Replica(
                c, settings.home, settings.request_timeout_s, log_file, self._changed,
                health=self.health, progress=self.progress,
            )
            for c in replicas
        ]  # fmt: skip
        self.by_name = {r.name: r for r in self.replicas}
        self.admission: Admission[Lease] = Admission(
            {
                "interactive": settings.admission.queue_interactive,
                "batch": settings.admission.queue_batch,
            },
            self._pick,
            self._give_back,
            self.available,
        )
        self.affinity: Counter[str] = Counter()
        self.evicted = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._poller: asyncio.Task[None] | None = None

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        for r in self.replicas:
            if r.engine is not None:
                r.engine.start()
        self._poller = asyncio.create_task(self._poll_forever(), name="pool-poller")

    async def stop(self) -> None:
        await cancel_and_wait([self._poller, *self._tasks])
        # Engines stop in parallel: each may take its TERM grace period.
        await asyncio.gather(*(r.aclose() for r in self.replicas))

    async def _poll_forever(self) -> None:
        # poll_load handles an engine's own failures; anything else is a bug, and it must
        # neither end the poller (load and reachability would freeze) nor flood the log.
        bugs = RepeatLog(log, "engine load poll failed")
        while True:
            try:
                await asyncio.gather(*(r.poll_load() for r in self.replicas))
                now = time.monotonic()
                for r in self.replicas:
                    r.watch(now)  # forward progress, and canaries for idle engines
                self.admission.dispatch()  # an engine run elsewhere may have come back
                bugs.succeeded()
            except Exception as exc:
                bugs.failed(exc)
            await asyncio.sleep(self.settings.pool.metrics_interval_s)

    def _changed(self) -> None:
        # Readiness flipped somewhere: queued requests may now have a place to go.
        self.admission.dispatch()

    # --- admission -----------------------------------------------------------------------

    def available(self) -> bool:
        return any(r.admitting for r in self.replicas)

    def _pick(self, key: str | None, exclude: frozenset[str]) -> Lease | None:
        open_ = [r for r in self.replicas if r.admitting and r.name not in exclude]
        choice = choose([r.candidate() for r in open_], key, self.settings.pool.affinity_slack)
        if choice is None:
            return None
        self.affinity[choice.affinity] += 1
        return self.by_name[choice.name].take()

    def _give_back(self, lease: Lease) -> None:
        lease.replica.give_back(lease)

    async def admit(
        self,
        priority: Priority,
        key: str | None,
        timeout: float,
        exclude: frozenset[str] = frozenset(),
    ) -> Lease:
        return await self.admission.admit(priority, key, timeout, exclude)

    def release(self, lease: Lease, *, failed: bool = False) -> None:
        """The request is over (or never reached the engine: ``failed``)."""
        if failed:
            lease.replica.suspect()
        if lease.replica.give_back(lease):
            self.admission.dispatch()

    # --- operations ----------------------------------------------------------------------

    def replica(self, name: str) -> Replica:
        try:
            return self.by_name[name]
        except KeyError:
            raise UnknownReplica(name) from None

    def _background(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def drain(self, name: str, deadline_s: float | None, then: AfterDrain) -> Replica:
        """Stop admitting to ``name`` now; in the background let its requests finish until
        the deadline, end the rest, then leave it idle or stop its engine."""
        r = self.replica(name)
        if r.admin in ("draining",):
            return r
        r.admin = "draining"
        self._background(self._drain(r, deadline_s or self.settings.pool.drain_timeout_s, then),
                         f"drain-{name}")  # fmt: skip
        return r

    async def _drain(self, r: Replica, deadline_s: float, then: AfterDrain) -> None:
        log.info("draining %s (%d in flight, deadline %.0fs)", r.name, r.in_flight, deadline_s)
        try:
            async with asyncio.timeout(deadline_s):
                await r.idle.wait()
        except TimeoutError:
            log.warning("drain of %s: %d requests past the deadline; ending them",
                        r.name, r.in_flight)  # fmt: skip
            for lease in list(r.leases):
                lease.evicted.set()
                self.evicted += 1
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10):
                    await r.idle.wait()
        if r.admin != "draining":
            return  # undrained meanwhile
        if then == "stop" and r.engine is not None:
            await r.engine.stop()
            r.admin = "stopped"
        else:
            r.admin = "drained"
        log.info("%s is %s", r.name, r.admin)

    def undrain(self, name: str) -> Replica:
        r = self.replica(name)
        if r.engine is not None and not r.engine.running:
            r.engine.start()
        r.admin = "active"
        self.admission.dispatch()
        return r

    def restart(self, name: str, deadline_s: float | None) -> Replica:
        """Drain (with its deadline), stop the engine, start it again, take traffic."""
        r = self.replica(name)
        if r.engine is None:
            raise ValueError(f"replica {name!r} runs elsewhere; restart it there")

        async def run() -> None:
            r.admin = "draining"
            await self._drain(r, deadline_s or self.settings.pool.drain_timeout_s, "stop")
            self.undrain(name)

        self._background(run(), f"restart-{name}")
        return r

    # --- membership (core/discovery.py: engines run elsewhere, one replica per pod) -------

    def add_replica(self, config: ReplicaConfig) -> Replica:
        """A new replica; it takes traffic once its first load poll reaches the engine."""
        if config.name in self.by_name:
            raise ValueError(f"replica {config.name!r} exists")
        r = Replica(config, self.settings.home, self.settings.request_timeout_s, None,
                    self._changed, health=self.health, progress=self.progress)  # fmt: skip
        self.replicas.append(r)
        self.by_name[r.name] = r
        self._background(self._first_poll(r), f"poll-{r.name}")
        return r

    async def _first_poll(self, r: Replica) -> None:
        await r.poll_load()
        self.admission.dispatch()

    def remove_replica(self, name: str, deadline_s: float | None = None) -> None:
        """Take ``name`` out now (nothing new is sent to it); its requests finish, up to
        the drain deadline, in the background, then its client closes."""
        r = self.replica(name)
        self.replicas.remove(r)
        del self.by_name[name]
        r.admin = "draining"

        async def run() -> None:
            await self._drain(r, deadline_s or self.settings.pool.drain_timeout_s, "idle")
            await r.aclose()

        self._background(run(), f"remove-{name}")

    def status(self) -> list[dict[str, Any]]:
        return [r.status() for r in self.replicas]
