"""Forward progress (core/progress.py, issue 33): an engine whose scheduler hangs while its
``/health`` stays 200 is found from its token counters, the relays and a canary; a slow but
alive one is not. The decisions with an injected clock; the replica with a fake engine."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from core.pool_config import ReplicaConfig
from core.progress import Progress, ProgressPolicy
from core.replica import Replica
from core.settings import EngineConfig

POLICY = ProgressPolicy(timeout_s=3.0, prefill_tokens_per_s=1000.0, canary_idle_s=30.0)


def test_silence_with_work_in_flight_is_a_wedge() -> None:
    p = Progress(POLICY, now=0.0)
    p.counters(0.0, tokens=100)
    p.started(0.0)
    assert not p.check(2.0, busy=True)
    p.counters(2.0, tokens=100)  # the counters stand still
    assert not p.check(3.0, busy=True)
    assert p.check(3.1, busy=True) and p.wedged and p.wedges == 1
    assert not p.check(10.0, busy=True)  # found once, not at every poll
    assert p.counters(11.0, tokens=101)  # it moved: the wedge is over
    assert not p.wedged and p.recoveries == 1


def test_an_idle_engine_is_never_wedged_by_silence() -> None:
    p = Progress(POLICY, now=0.0)
    for t in range(0, 600, 1):
        assert not p.check(float(t), busy=False)
    assert p.silent_s(600.0, busy=False) == 0.0


def test_silence_counts_from_when_work_arrived() -> None:
    p = Progress(POLICY, now=0.0)  # idle for a minute: its last progress is long ago
    assert not p.check(60.0, busy=False)
    p.started(60.0)
    assert not p.check(62.0, busy=True)
    assert p.check(63.5, busy=True)


def test_a_long_prefill_gets_its_allowance() -> None:
    p = Progress(POLICY, now=0.0)
    p.started(0.0)
    # 8,000 prompt tokens at 1,000/s: 8 s more before a first token is overdue.
    assert not p.check(10.0, busy=True, prefill_tokens=8000)
    assert p.check(11.5, busy=True, prefill_tokens=8000)


def test_a_slow_but_alive_engine_is_never_evicted() -> None:
    """CPU-starved at a 50 % duty cycle (SIGSTOP 1 s / SIGCONT 1 s): its counters move at
    least every 2 s, so over ten minutes it is never found wedged."""
    p = Progress(POLICY, now=0.0)
    p.started(0.0)
    tokens, t = 0, 0.0
    while t < 600:
        t += 0.25  # a metrics poll
        if int(t) % 2 == 0:  # running half of each 2 s
            tokens += 1
        p.counters(t, tokens)
        assert not p.check(t, busy=True), f"evicted at {t}s"
    assert p.wedges == 0


def test_an_engine_slow_by_nature_gets_a_longer_allowance() -> None:
    """A CPU engine sharing two cores with two others takes ~2 s a step while it works:
    its allowance grows towards four times that, so a 3.5 s step is slow, not a wedge; a
    frozen one is still found (at 4 x its pace, at most 10 x the timeout)."""
    p = Progress(POLICY, now=0.0)
    p.started(0.0)
    t = 0.0
    for _ in range(40):
        t += 2.0
        p.moved(t)
    assert 7.8 < p.allowance_s() < 8.0
    assert not p.check(t + 3.5, busy=True)
    assert p.check(t + 8.5, busy=True)  # frozen: found after its allowance
    before = p.allowance_s()
    assert p.moved(t + 60.0)  # thawed after a minute: that silence is no pace to learn
    assert p.allowance_s() == before


def test_one_slow_step_barely_moves_the_allowance() -> None:
    """An engine catching up after a thaw takes 3 s once: the next wedge is still found
    at about the timeout, not at four times that step."""
    p = Progress(POLICY, now=0.0)
    p.started(0.0)
    p.moved(3.0)
    assert p.allowance_s() == 3.0  # its pace is now 0.3 s: 4 x that is under the timeout


def test_the_learned_allowance_is_capped() -> None:
    p = Progress(POLICY, now=0.0)
    p.started(0.0)
    for t in range(100, 5000, 100):
        p.moved(float(t))  # 100 s steps (never flagged: busy but unchecked)
    assert p.allowance_s() == 30.0


def test_a_restarted_engine_resets_its_counters_and_that_is_progress() -> None:
    p = Progress(POLICY, now=0.0)
    p.counters(0.0, tokens=5000)
    p.started(0.0)
    assert p.check(4.0, busy=True)
    assert p.counters(5.0, tokens=0)  # a new process: counters from zero


def test_canaries_for_idle_and_for_wedged_engines() -> None:
    p = Progress(POLICY, now=0.0)
    assert not p.canary_due(10.0, busy=False)
    assert p.canary_due(30.0, busy=False)
    assert not p.canary_due(31.0, busy=False)  # one per interval
    assert p.canary_due(60.0, busy=False)
    assert not p.canary_due(200.0, busy=True)  # real traffic is the probe
    assert p.lost() and not p.lost()  # a canary got no answer: wedged, once
    assert p.canary_due(203.5, busy=True)  # wedged: re-checked every timeout_s
    assert not p.canary_due(204.0, busy=True)


def test_an_engine_that_computes_is_slow_not_wedged() -> None:
    # A batch of prefills on a contended CPU: silent for 4 s while its worker runs at 100 %
    # (bench.chaos, right after a 50 % duty-cycle starve). A spinning hang is still found.
    p = Progress(POLICY, now=0.0)
    p.started(0.0)
    assert not p.check(4.0, busy=True, computing=True)
    assert not p.check(29.9, busy=True, computing=True)
    assert p.check(30.1, busy=True, computing=True)
    # A frozen scheduler computes nothing: found at the plain allowance.
    p = Progress(POLICY, now=0.0)
    p.started(0.0)
    assert p.check(3.1, busy=True, computing=False)


def test_off_means_off() -> None:
    p = Progress(ProgressPolicy(timeout_s=0.0, canary_idle_s=0.0), now=0.0)
    p.started(0.0)
    assert not p.check(1e6, busy=True) and not p.lost()
    assert not p.canary_due(1e6, busy=False)
    p = Progress(ProgressPolicy(timeout_s=0.0, canary_idle_s=30.0), now=0.0)
    assert not p.canary_due(1e6, busy=False)  # the watch off: no canaries either


# --- the replica acting on it ----------------------------------------------------------------


METRICS = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 1.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} TOKENS
"""


class FakeEngine:
    """/health is always 200 (the API server is up); /metrics counters move only while the
    scheduler runs; a canary is answered only then."""

    def __init__(self) -> None:
        self.running = True
        self.tokens = 0
        self.canaries = 0
        self.frozen = asyncio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200)
        if request.url.path == "/metrics":
            if self.running:
                self.tokens += 1
            return httpx.Response(200, text=METRICS.replace("TOKENS", str(self.tokens)))
        if request.url.path == "/v1/completions":
            self.canaries += 1
            if not self.running:
                await asyncio.sleep(3600)
            return httpx.Response(200, json={"choices": [{"text": "!"}]})
        return httpx.Response(404)


def replica_with(engine: FakeEngine, policy: ProgressPolicy) -> tuple[Replica, list[int]]:
    config = ReplicaConfig(name="r0", engine=EngineConfig(), manage=False, max_in_flight=4)
    changes: list[int] = []
    replica = Replica(config, Path("."), 5.0, None, lambda: changes.append(1), progress=policy)
    replica.client = httpx.AsyncClient(
        base_url="http://engine", transport=httpx.MockTransport(engine)
    )
    return replica, changes


async def until(replica: Replica, done: Callable[[], bool], *, poll: bool = True) -> None:
    """Run the pool's once-a-poll duties (a metrics read, the progress watch) until
    ``done`` or 3 s."""
    deadline = time.monotonic() + 3.0
    while not done() and time.monotonic() < deadline:
        if poll:
            await replica.poll_load()
        replica.watch(time.monotonic())
        await asyncio.sleep(0.05)


def test_a_wedged_replica_leaves_rotation_and_comes_back() -> None:
    policy = ProgressPolicy(timeout_s=0.2, prefill_tokens_per_s=1000.0, canary_idle_s=0.0)

    async def run() -> None:
        engine = FakeEngine()
        replica, changes = replica_with(engine, policy)
        await replica.poll_load()
        assert replica.admitting
        lease = replica.take()
        engine.running = False  # EngineCore SIGSTOPped; the API server still answers
        await until(replica, lambda: not replica.admitting)
        assert not replica.admitting and replica.state == "wedged"
        assert lease.evicted.is_set() and lease.reason == "unhealthy"
        assert replica.progress.wedges == 1 and changes
        replica.give_back(lease)
        engine.running = True  # SIGCONT
        await until(replica, lambda: replica.admitting)
        assert replica.admitting and replica.state == "ready"
        await replica.aclose()

    asyncio.run(run())


def test_an_idle_wedged_replica_is_found_by_its_canary() -> None:
    policy = ProgressPolicy(timeout_s=0.2, prefill_tokens_per_s=1000.0, canary_idle_s=0.1)

    async def run() -> None:
        engine = FakeEngine()
        replica, _ = replica_with(engine, policy)
        await replica.poll_load()
        engine.running = False
        await until(replica, lambda: not replica.admitting, poll=False)  # no traffic either
        assert replica.state == "wedged" and engine.canaries >= 1
        engine.running = True
        await until(replica, lambda: replica.admitting, poll=False)  # the next canary answers
        assert replica.admitting
        await replica.aclose()

    asyncio.run(run())


class FakeSupervised:
    """A supervised engine's CPU clock, as ``Engine.cpu_s`` reads it."""

    def __init__(self) -> None:
        self.cpu = 0.0

    def cpu_s(self) -> float:
        return self.cpu


def test_a_replica_reads_whether_its_engine_computes() -> None:
    policy = ProgressPolicy(timeout_s=0.2, prefill_tokens_per_s=1000.0, canary_idle_s=0.0)
    replica, _ = replica_with(FakeEngine(), policy)
    supervised = FakeSupervised()
    replica.engine = supervised  # type: ignore[assignment]
    assert not replica.computing(0.0)  # nothing to compare with yet
    supervised.cpu = 0.9
    assert replica.computing(1.0)  # 90 % of a core
    supervised.cpu = 0.92
    assert not replica.computing(2.0)  # 2 %: the scheduler stopped
    supervised.cpu = 0.1  # a restarted engine: its clock starts over
    assert not replica.computing(3.0)
    replica.engine = None  # an engine run elsewhere: unknown, never "computing"
    assert not replica.computing(4.0)


def test_a_busy_healthy_replica_stays_in_rotation() -> None:
    policy = ProgressPolicy(timeout_s=0.2, prefill_tokens_per_s=1000.0, canary_idle_s=0.0)

    async def run() -> None:
        engine = FakeEngine()
        replica, _ = replica_with(engine, policy)
        lease = replica.take()
        for _ in range(20):  # a second of polls while it generates
            await replica.poll_load()
            replica.watch(time.monotonic())
            await asyncio.sleep(0.05)
        assert replica.admitting and replica.progress.wedges == 0
        replica.give_back(lease)
        await replica.aclose()

    asyncio.run(run())


def test_a_slow_health_probe_keeps_streams_that_move() -> None:
    """A missed /health (an API server busy streaming) ends nothing whose work moved while
    the probe waited; with no progress in that time it ends what runs (a frozen engine)."""
    policy = ProgressPolicy(timeout_s=0.2, prefill_tokens_per_s=1000.0, canary_idle_s=0.0)

    async def run() -> None:
        replica, _ = replica_with(FakeEngine(), policy)
        lease = replica.take()
        replica.progressed()  # a byte on its stream just now
        replica.probe_missed()
        assert not lease.evicted.is_set()
        replica.progress.last -= replica.health.timeout_s  # nothing since the probe began
        replica.probe_missed()
        assert lease.evicted.is_set() and lease.reason == "unhealthy"
        replica.give_back(lease)
        await replica.aclose()

    asyncio.run(run())
