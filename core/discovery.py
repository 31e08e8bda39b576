"""Engine discovery: one replica per engine pod, found by DNS.

In Kubernetes the engines sit behind a headless Service (``clusterIP: None``): its name
resolves to the addresses of the ready pods. Resolving it every few seconds and keeping one
replica per address lets the pool balance by each pod's load and keep a conversation on
the pod that holds its prefix in KV cache; a ClusterIP Service would hide the pods behind
one address. DNS needs no RBAC and no Kubernetes client (EndpointSlices would).

A pod that leaves the answer (not ready, deleted, scaled in) is taken out of the pool at
once: nothing new goes to it and what it has in flight finishes, up to the drain deadline.
A failed lookup keeps the pool as it is (a DNS hiccup must not empty it); a Service with no
ready pod answers NXDOMAIN, which is a failed lookup too, and those pods' own health polls
already keep traffic away from them.

The resolver is a constructor argument (``(host, port) -> addresses``), so tests drive the
pool with any sequence of answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from core.pool_config import PoolConfigError, ReplicaConfig
from shared.repeats import RepeatLog
from shared.tasks import cancel_and_wait

log = logging.getLogger("edgecore.core.discovery")

Resolver = Callable[[str, int], Awaitable[Iterable[str]]]


class Members(Protocol):
    """What discovery needs of the pool (core.pool.Pool has these)."""

    def add_replica(self, config: ReplicaConfig) -> object: ...

    def remove_replica(self, name: str) -> None: ...


async def resolve_dns(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (A and AAAA), through the system resolver."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def template_from(replicas: list[ReplicaConfig]) -> ReplicaConfig:
    """The replica every discovered engine copies: the pool's only entry, not managed."""
    if len(replicas) != 1:
        raise PoolConfigError(
            f"discovery.dns_name: the pool must describe one replica (the template of every "
            f"discovered engine), not {len(replicas)}; drop POOL__REPLICAS and the pool file's list"
        )
    return replicas[0].model_copy(update={"manage": False})


def _url_host(address: str) -> str:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    return f"[{ip.compressed}]" if ip.version == 6 else ip.compressed


class Discovery:
    """Keeps ``members`` at one replica per address that ``name`` resolves to."""

    def __init__(
        self,
        name: str,
        template: ReplicaConfig,
        members: Members,
        *,
        interval_s: float = 5.0,
        timeout_s: float = 5.0,
        resolver: Resolver = resolve_dns,
    ) -> None:
        self.name = name
        self.template = template
        self.members = members
        self.interval_s = interval_s
        # A lookup may hang (resolver timeouts x search domains); the app awaits the first
        # one before serving, so each is bounded.
        self.timeout_s = timeout_s
        self.resolver = resolver
        self.current: dict[str, str] = {}  # address -> replica name
        self.failures = 0
        self._task: asyncio.Task[None] | None = None
        # A lookup failing every few seconds for hours is one log line a minute, not 720.
        self._repeats = RepeatLog(log, f"engine discovery: {name} did not resolve (pool kept)")
        self._bugs = RepeatLog(log, "engine discovery: refresh failed")

    def replica_name(self, address: str) -> str:
        # The pod's address: every core replica names an engine the same way, so they
        # agree on each conversation's preferred engine (rendezvous hashing on names).
        return address

    def config_for(self, address: str) -> ReplicaConfig:
        engine = self.template.engine.model_copy(update={"host": _url_host(address)})
        return self.template.model_copy(
            update={"name": self.replica_name(address), "engine": engine, "manage": False}
        )

    async def refresh(self) -> bool:
        """Resolve once and apply the difference; False (pool unchanged) if the lookup failed."""
        try:
            async with asyncio.timeout(self.timeout_s):
                answer = set(await self.resolver(self.name, self.template.engine.port))
        except (OSError, TimeoutError) as exc:  # socket.gaierror is an OSError
            self.failures += 1
            self._repeats.failed(exc, level=logging.WARNING, trace=False)
            return False
        self.failures = 0
        self._repeats.succeeded()
        gone = sorted(set(self.current) - answer)
        new = sorted(answer - set(self.current))
        for address in gone:
            name = self.current.pop(address)
            log.info("engine discovery: %s left %s; draining replica %s",
                     address, self.name, name)  # fmt: skip
            with contextlib.suppress(KeyError):  # removed meanwhile by hand
                self.members.remove_replica(name)
        for address in new:
            config = self.config_for(address)
            log.info("engine discovery: %s joined %s as replica %s",
                     address, self.name, config.name)  # fmt: skip
            self.members.add_replica(config)
            self.current[address] = config.name
        return True

    async def run_forever(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception as exc:  # a bug here must not stop discovery for good
                self._bugs.failed(exc)
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        self._task = asyncio.create_task(self.run_forever(), name="engine-discovery")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait([task])
