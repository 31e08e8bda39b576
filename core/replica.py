"""One replica of the pool: its engine (supervised here or run elsewhere), its HTTP client,
what this core has in flight on it, its last known load, and its administrative state."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import httpx

from core.balancer import Candidate, EngineLoad, external_load, parse_engine_load
from core.engine import Engine, EngineHealth
from core.pool_config import ReplicaConfig
from core.progress import COMPUTING_SHARE, Progress, ProgressPolicy
from shared.tasks import cancel_and_wait

log = logging.getLogger("edgecore.core.replica")

# active: takes traffic when healthy; draining: finishes what it has, takes nothing new;
# drained: idle, engine still up; stopped: drained and its engine stopped.
AdminState = Literal["active", "draining", "drained", "stopped"]


@dataclass(eq=False)
class Lease:
    """A request's hold on a replica slot, from admission to the end of its answer."""

    replica: Replica
    evicted: asyncio.Event = field(default_factory=asyncio.Event)
    released: bool = False
    # Why it was evicted: "drained" (drain deadline) or "unhealthy" (the engine stopped
    # answering or making progress; a request with no first byte yet may go elsewhere).
    reason: str = "drained"
    # Prompt tokens (estimated) still in prefill: until the first byte, the engine may be
    # silent this much longer before it counts as wedged.
    prefill_tokens: int = 0


class Replica:
    def __init__(
        self,
        config: ReplicaConfig,
        home: Path,
        request_timeout_s: float,
        log_file: IO[bytes] | None,
        on_change: Callable[[], None],
        *,
        health: EngineHealth | None = None,
        progress: ProgressPolicy | None = None,
    ) -> None:
        self.config = config
        self.name = config.name
        self.health = health or EngineHealth()
        self.on_change = on_change
        self.progress = Progress(progress or ProgressPolicy(), time.monotonic())
        self._canary: asyncio.Task[None] | None = None
        self._cpu: tuple[float, float] | None = None  # (when, the engine's CPU seconds)
        self.engine = (
            Engine(
                config.engine, home, log_file, on_change, name=f"engine {config.name}",
                health=self.health, on_stall=self.probe_missed,
            )
            if config.manage
            else None
        )  # fmt: skip
        self.client = httpx.AsyncClient(
            base_url=config.engine.base_url,
            timeout=httpx.Timeout(request_timeout_s, connect=5.0),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100),
            headers=(
                {"authorization": f"Bearer {config.api_key.get_secret_value()}"}
                if config.api_key
                else None
            ),
        )
        self.admin: AdminState = "active"
        self.in_flight = 0
        self.leases: set[Lease] = set()
        self.idle = asyncio.Event()
        self.idle.set()
        self.load = EngineLoad()
        self.external = 0.0
        self.load_at: float | None = None
        self.reachable = False  # last /metrics read worked (engines run elsewhere)
        self.served = 0
        # Most requests of ours (canary included) on the engine since the last /metrics
        # read was sent: see poll_load.
        self._peak_since_poll = 0

    # --- state ---------------------------------------------------------------------------

    @property
    def up(self) -> bool:
        """The engine answers: /health (supervised) or /metrics (run elsewhere)."""
        if self.engine is not None:
            return self.engine.ready.is_set()
        return self.reachable

    @property
    def healthy(self) -> bool:
        return self.up and not self.progress.wedged

    @property
    def admitting(self) -> bool:
        return self.admin == "active" and self.healthy

    @property
    def state(self) -> str:
        """One word for people: ready, starting, restarting, down, draining, drained, stopped."""
        if self.admin != "active":
            return self.admin
        if self.healthy:
            return "ready"
        if self.progress.wedged:
            return "wedged"
        if self.engine is not None:
            return "restarting" if self.engine.restarts else "starting"
        return "down"

    def candidate(self) -> Candidate:
        return Candidate(
            self.name, self.in_flight, self.config.max_in_flight, self.load, self.external
        )

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "url": self.config.engine.base_url,
            "managed": self.engine is not None,
            "pid": self.engine.pid if self.engine else None,
            "restarts": self.engine.restarts if self.engine else 0,
            "wedges": self.progress.wedges,
            "in_flight": self.in_flight,
            "max_in_flight": self.config.max_in_flight,
            "served": self.served,
            "engine_running": self.load.running,
            "engine_waiting": self.load.waiting,
            "kv_cache_usage": self.load.kv_usage,
            "load_age_s": round(time.monotonic() - self.load_at, 2) if self.load_at else None,
        }

    # --- leases --------------------------------------------------------------------------

    def take(self) -> Lease:
        lease = Lease(self)
        self.leases.add(lease)
        if self.in_flight == 0:
            self.progress.started(time.monotonic())
        self.in_flight += 1
        self.served += 1
        self._peak_since_poll = max(self._peak_since_poll, self._ours())
        self.idle.clear()
        return lease

    def give_back(self, lease: Lease) -> bool:
        """Release ``lease``; False if it was already released (idempotent)."""
        if lease.released:
            return False
        lease.released = True
        self.leases.discard(lease)
        self.in_flight -= 1
        if self.in_flight == 0:
            self.idle.set()
        return True

    def probe_missed(self) -> None:
        """The engine did not answer its ``/health`` probe in time (``Engine.on_stall``):
        ``stalled``, unless its work moved while the probe waited. An API server busy
        streaming can be slow to answer (seen on 2 shared cores: over 2 s) while its
        streams are fine. It takes no new requests until a probe passes, and if its work
        stops moving, the progress watch (``watch``) ends what runs on it."""
        since = time.monotonic() - self.progress.last
        if self.leases and since < self.health.timeout_s:
            log.warning("%s: /health unanswered, but its streams moved %.1fs ago: kept",
                        self.name, since)  # fmt: skip
            return
        self.stalled()

    def stalled(self) -> None:
        """The engine stopped answering, or making progress: end what waits on it. Requests
        without a first byte move to another replica or get 503; streams end with an error
        event (closing them aborts the engine's work when it wakes)."""
        for lease in list(self.leases):
            lease.reason = "unhealthy"
            lease.evicted.set()

    # --- forward progress (core/progress.py) -----------------------------------------------

    def progressed(self) -> None:
        """A relay saw the engine work: a byte on a stream, or a complete answer."""
        if self.progress.moved(time.monotonic()):
            self._recovered("it answered again")

    def silent_s(self) -> float:
        return self.progress.silent_s(time.monotonic(), self.in_flight > 0)

    def prefill_tokens(self) -> int:
        return sum(lease.prefill_tokens for lease in self.leases)

    def computing(self, now: float) -> bool:
        """Whether a supervised engine's processes used ``COMPUTING_SHARE`` of a core since
        the last call (False when unknown: an engine run elsewhere)."""
        cpu = self.engine.cpu_s() if self.engine is not None else None
        previous, self._cpu = self._cpu, (now, cpu) if cpu is not None else None
        if cpu is None or previous is None or now <= previous[0]:
            return False
        return (cpu - previous[1]) / (now - previous[0]) >= COMPUTING_SHARE

    def watch(self, now: float) -> None:
        """Once per metrics poll: find a wedge, and send a canary if one is due."""
        busy = self.in_flight > 0
        if self.progress.check(now, busy, self.prefill_tokens(), self.computing(now)):
            silent = self.progress.silent_s(now, busy)
            self._wedge(f"no progress for {silent:.1f}s with {self.in_flight} request(s) in flight")
        if self.up and not self._canary_running and self.progress.canary_due(now, busy):
            self._canary = asyncio.create_task(self.canary(), name=f"canary-{self.name}")
            self._peak_since_poll = max(self._peak_since_poll, self._ours())  # ours too

    async def canary(self) -> None:
        """One generated token, bounded by the progress timeout: a wedge found while idle
        (and the way back out of one)."""
        body = {"model": self.config.engine.served_model_name, "prompt": "Hi",
                "max_tokens": 1, "temperature": 0}  # fmt: skip
        try:
            async with asyncio.timeout(self.progress.allowance_s() + self.health.timeout_s):
                r = await self.client.post("/v1/completions", json=body)
        except TimeoutError:
            if self.progress.lost():
                self._wedge("a one-token canary got no answer in time")
            return
        except httpx.HTTPError:
            return  # not answering at all: the health probe's business
        if r.status_code == 200:
            self.progressed()
        else:  # a refusal is an answer: the engine works (the request was wrong for it)
            log.warning("%s: canary answered HTTP %d: %s", self.name, r.status_code, r.text[:200])
            self.progressed()

    def _wedge(self, why: str) -> None:
        log.error("%s is wedged (%s): taking it out of rotation%s", self.name, why,
                  "; restarting it if it stays so" if self.engine is not None else "")  # fmt: skip
        self.stalled()
        if self.engine is not None:
            self.engine.set_wedged(True)
        self.on_change()

    def _recovered(self, why: str) -> None:
        log.warning("%s makes progress again (%s): back in rotation", self.name, why)
        if self.engine is not None:
            self.engine.set_wedged(False)
        self.on_change()

    def suspect(self) -> None:
        """A request could not reach the engine: take no more until health says otherwise."""
        if self.engine is not None:
            self.engine.suspect()
        else:
            self.reachable = False

    # --- background ----------------------------------------------------------------------

    @property
    def _canary_running(self) -> bool:
        return self._canary is not None and not self._canary.done()

    def _ours(self) -> int:
        return self.in_flight + self._canary_running

    async def poll_load(self) -> None:
        """Read the engine's /metrics once (load for the balancer, reachability)."""
        # The engine's gauges describe its last step. If it worked since the previous read
        # (its token counters moved), that step came after the previous read was *sent*;
        # one of ours that ran any time since then (even one that ended during either read)
        # would otherwise look like another gateway's for a whole interval and push this
        # replica's conversations elsewhere. So the peak of ours since the previous read
        # was sent counts as ours; an engine that did no work since has no one else's
        # requests either (external_load).
        earlier, self._peak_since_poll = self._peak_since_poll, self._ours()
        try:
            r = await self.client.get("/metrics", timeout=self.health.timeout_s)
            r.raise_for_status()
            load = parse_engine_load(r.text)
            previous = self.load if self.load_at is not None else None
            ours = max(earlier, self._peak_since_poll)
            self.external = external_load(load, ours, previous)
            self.load = load
            self.load_at = time.monotonic()
            self.reachable = True
            if self.progress.counters(self.load_at, load.tokens):
                self._recovered("its token counters moved")
        except (httpx.HTTPError, ValueError):
            # The next read compares with the last one that worked: keep its window.
            self._peak_since_poll = max(earlier, self._peak_since_poll)
            if self.reachable and self.engine is None:
                self.probe_missed()  # an engine run elsewhere: this poll is its health probe
            self.reachable = False

    async def aclose(self) -> None:
        await cancel_and_wait([self._canary])
        if self.engine is not None:
            await self.engine.stop()
        with contextlib.suppress(Exception):
            await self.client.aclose()
