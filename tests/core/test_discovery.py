"""Engine discovery (core/discovery.py): one replica per address a headless Service's name
resolves to, driven here by a resolver that answers whatever the test says."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterable
from pathlib import Path

import pytest

from core.discovery import Discovery, resolve_dns, template_from
from core.pool import Pool
from core.pool_config import PoolConfigError, ReplicaConfig, load_pool
from core.settings import CoreSettings, EngineConfig


class Answers:
    """A resolver answering from a list, one entry per call; an exception is raised."""

    def __init__(self, *answers: list[str] | BaseException) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Iterable[str]:
        self.asked.append((host, port))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


class Members:
    def __init__(self) -> None:
        self.replicas: dict[str, ReplicaConfig] = {}
        self.removed: list[str] = []

    def add_replica(self, config: ReplicaConfig) -> object:
        assert config.name not in self.replicas
        self.replicas[config.name] = config
        return config

    def remove_replica(self, name: str) -> None:
        del self.replicas[name]
        self.removed.append(name)


def template(port: int = 8000, max_in_flight: int = 128) -> ReplicaConfig:
    engine = EngineConfig(host="edgecore-engine-pods", port=port, max_num_seqs=max_in_flight)
    return ReplicaConfig(name="r0", engine=engine, manage=True, max_in_flight=max_in_flight)


def test_replicas_follow_the_changing_answer() -> None:
    answers = Answers(
        ["10.0.0.1", "10.0.0.2"],
        ["10.0.0.2", "10.0.0.3", "10.0.0.2"],  # duplicates (one per port family) count once
        socket.gaierror(socket.EAI_NONAME, "Name or service not known"),  # no ready pod
        ["10.0.0.3"],
        [],
    )
    members = Members()
    d = Discovery("edgecore-engine-pods", template(), members, resolver=answers)

    async def run() -> list[tuple[bool, list[str]]]:
        seen = []
        for _ in range(5):
            ok = await d.refresh()
            seen.append((ok, sorted(members.replicas)))
        return seen

    assert asyncio.run(run()) == [
        (True, ["10.0.0.1", "10.0.0.2"]),
        (True, ["10.0.0.2", "10.0.0.3"]),
        (False, ["10.0.0.2", "10.0.0.3"]),  # a failed lookup changes nothing
        (True, ["10.0.0.3"]),
        (True, []),
    ]
    assert members.removed == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert answers.asked == [("edgecore-engine-pods", 8000)] * 5
    assert d.failures == 0
    # Each replica is the template at the pod's address, never started by this core.
    assert d.config_for("10.0.0.9").engine.base_url == "http://10.0.0.9:8000"
    assert not d.config_for("10.0.0.9").manage
    assert d.config_for("fd00::a").engine.base_url == "http://[fd00::a]:8000"


def test_a_hanging_lookup_is_a_failed_one() -> None:
    async def hang(host: str, port: int) -> list[str]:
        await asyncio.sleep(60)
        return ["10.0.0.1"]

    members = Members()
    d = Discovery("svc", template(), members, timeout_s=0.01, resolver=hang)
    assert asyncio.run(d.refresh()) is False
    assert not members.replicas and d.failures == 1


def test_run_forever_keeps_going_after_failures() -> None:
    answers = Answers(OSError("down"), ["10.0.0.1"], *[["10.0.0.1"]] * 100)
    members = Members()
    d = Discovery("svc", template(), members, interval_s=0.001, resolver=answers)

    async def run() -> None:
        d.start()
        for _ in range(200):
            if members.replicas:
                break
            await asyncio.sleep(0.005)
        await d.stop()

    asyncio.run(run())
    assert list(members.replicas) == ["10.0.0.1"]


@pytest.fixture
def discovery_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("EDGECORE_CORE_"):
            monkeypatch.delenv(name)
    # What the chart sets (infra/helm/edgecore/templates/core.yaml).
    monkeypatch.setenv("EDGECORE_CORE_HOME", str(tmp_path))
    monkeypatch.setenv("EDGECORE_CORE_MANAGE_ENGINE", "false")
    monkeypatch.setenv("EDGECORE_CORE_DISCOVERY__DNS_NAME", "edgecore-engine-pods")
    monkeypatch.setenv("EDGECORE_CORE_ENGINE__PORT", "9")  # discard: connections fail fast
    monkeypatch.setenv("EDGECORE_CORE_ENGINE__MAX_NUM_SEQS", "16")
    monkeypatch.setenv("EDGECORE_CORE_ENGINE_API_KEY", "engine-secret")
    return monkeypatch


def test_the_pool_gets_one_replica_per_pod_capped_at_max_num_seqs(
    discovery_env: pytest.MonkeyPatch,
) -> None:
    settings = CoreSettings()
    tpl = template_from(load_pool(settings))
    answers = Answers(["127.0.0.2", "127.0.0.3"], ["127.0.0.3"])

    async def run() -> None:
        pool = Pool(settings, [])
        d = Discovery("edgecore-engine-pods", tpl, pool, resolver=answers)
        assert not pool.available()
        await d.refresh()
        assert sorted(pool.by_name) == ["127.0.0.2", "127.0.0.3"]
        # In-flight caps: max_num_seqs per engine pod, so the pool takes 16 x pods at once.
        assert sum(r.config.max_in_flight for r in pool.replicas) == 32
        gone = pool.by_name["127.0.0.2"]
        assert gone.client.headers["authorization"] == "Bearer engine-secret"
        assert str(gone.client.base_url) == "http://127.0.0.2:9"
        lease = gone.take()  # a request in flight when the pod leaves finishes there
        await d.refresh()
        assert list(pool.by_name) == ["127.0.0.3"] and gone.admin == "draining"
        assert not gone.client.is_closed
        pool.release(lease)
        for _ in range(100):
            if gone.client.is_closed:
                break
            await asyncio.sleep(0.01)
        assert gone.client.is_closed and gone.admin == "drained"
        await pool.stop()

    asyncio.run(run())


def test_discovery_needs_a_single_template(discovery_env: pytest.MonkeyPatch) -> None:
    discovery_env.setenv("EDGECORE_CORE_POOL__REPLICAS", "2")
    with pytest.raises(PoolConfigError, match=r"discovery\.dns_name"):
        template_from(load_pool(CoreSettings()))


def test_dns_resolver_answers_addresses() -> None:
    addresses = asyncio.run(resolve_dns("localhost", 80))
    assert addresses and all(a in ("127.0.0.1", "::1") for a in addresses), addresses
