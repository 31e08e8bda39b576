"""The pool's pure parts: engine load parsing, affinity, replica choice, admission queues,
pool configuration and the edge token. No servers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from core.admission import Admission, Rejected
from core.auth import CoreAuth
from core.balancer import (
    Candidate,
    EngineLoad,
    affinity_key,
    choose,
    external_load,
    parse_engine_load,
    rendezvous,
)
from core.pool_config import PoolConfigError, ReplicaConfig, load_pool
from core.replica import Replica
from core.settings import CoreSettings, EngineConfig, SpeculativeConfig

VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 7.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 100.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 20.0
"""


# The fixture's page with one request running, and with none.
ONE_RUNNING = VLLM_METRICS.replace(" 3.0", " 0.0").replace(" 2.0", " 0.0")
IDLE = ONE_RUNNING.replace(" 1.0", " 0.0")


def _replica() -> Replica:
    """A replica run elsewhere (unmanaged), for its bookkeeping."""
    config = ReplicaConfig(name="r0", engine=EngineConfig(), manage=False, max_in_flight=2)
    return Replica(config, Path("."), 5.0, None, lambda: None)


def _engine(handler: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url="http://engine", transport=httpx.MockTransport(handler))


def test_engine_load_from_prometheus_text() -> None:
    load = parse_engine_load(VLLM_METRICS)
    assert load == EngineLoad(running=4.0, waiting=2.0, kv_usage=0.5, tokens=120.0)
    assert parse_engine_load("") == EngineLoad()
    assert external_load(load, ours=2) == 4.0 and external_load(load, ours=9) == 0.0
    # Busy since the previous read: its gauges count; idle since then: they are stale.
    assert external_load(load, ours=2, previous=EngineLoad(tokens=90.0)) == 4.0
    assert external_load(load, ours=0, previous=EngineLoad(running=1.0, tokens=120.0)) == 0.0


def test_our_request_that_ends_during_a_metrics_read_is_not_another_gateways() -> None:
    # The engine counted our request (running 1) while we read /metrics; it ended before
    # the answer arrived. Taking in_flight (now 0) as "ours" would call it external load and
    # send the conversation's next turn elsewhere for a whole poll interval.
    replica = _replica()

    async def run() -> None:
        lease = replica.take()

        def engine(request: httpx.Request) -> httpx.Response:
            replica.give_back(lease)  # finishes while the engine is answering
            return httpx.Response(200, text=ONE_RUNNING)

        replica.client = _engine(engine)
        await replica.poll_load()
        await replica.client.aclose()

    asyncio.run(run())
    assert replica.in_flight == 0 and replica.load.running == 1.0
    assert replica.external == 0.0 and replica.reachable


def test_a_request_of_ours_that_ended_between_reads_is_not_another_gateways() -> None:
    # Our request ran and ended between two reads; the engine's gauges still show it
    # (stale until its next step), and the engine did work since the last read.
    replica = _replica()
    pages = [IDLE, ONE_RUNNING.replace(" 20.0", " 40.0"), ONE_RUNNING.replace(" 20.0", " 40.0")]

    async def run() -> list[float]:
        replica.client = _engine(lambda _: httpx.Response(200, text=pages.pop(0)))
        seen = []
        await replica.poll_load()
        replica.give_back(replica.take())  # ours, between the reads
        await replica.poll_load()
        seen.append(replica.external)
        await replica.poll_load()  # no token since: the "running" request is a stale gauge
        seen.append(replica.external)
        await replica.client.aclose()
        return seen

    assert asyncio.run(run()) == [0.0, 0.0]


def test_our_request_that_ended_during_the_previous_read_is_not_another_gateways() -> None:
    # CI failure (stop 51): the last of a test's requests ended while the engine answered a
    # read; the read after it still showed it running (the gauge of the engine's last
    # step, taken after the earlier read was sent) with tokens moved. Counting ours only
    # from the end of the earlier read called it another gateway's, so the balancer kept
    # a conversation's second copy on the busy replica instead of the idle one.
    replica = _replica()
    moved = ONE_RUNNING.replace(" 20.0", " 24.0")  # its last tokens, after the first read
    pages = [ONE_RUNNING, moved, moved]

    async def run() -> list[float]:
        lease = replica.take()

        def engine(request: httpx.Request) -> httpx.Response:
            if replica.in_flight:
                replica.give_back(lease)  # finishes while the engine answers the first read
            return httpx.Response(200, text=pages.pop(0))

        replica.client = _engine(engine)
        seen = []
        for _ in pages[:]:
            await replica.poll_load()
            seen.append(replica.external)
        await replica.client.aclose()
        return seen

    assert asyncio.run(run()) == [0.0, 0.0, 0.0]


def test_the_canary_is_ours() -> None:
    # The idle-replica canary is this core's request; the engine's gauges showing it (or
    # its stale trace) are not another gateway's load.
    replica = _replica()
    pages = [IDLE, ONE_RUNNING.replace(" 20.0", " 21.0"), ONE_RUNNING.replace(" 20.0", " 21.0")]

    async def run() -> list[float]:
        answered = asyncio.Event()

        async def engine(request: httpx.Request) -> httpx.Response:
            if request.url.path == "/v1/completions":
                await answered.wait()
                return httpx.Response(200, json={"choices": [{"text": "!"}]})
            return httpx.Response(200, text=pages.pop(0))

        replica.client = _engine(engine)
        await replica.poll_load()
        replica.progress.canary_at = replica.progress.last = -1e9  # idle for ages: due
        replica.reachable = True
        replica.watch(0.0)
        assert replica._canary is not None
        await asyncio.sleep(0)
        await replica.poll_load()  # the canary runs
        seen = [replica.external]
        answered.set()
        await replica._canary
        await replica.poll_load()  # it ended; its stale gauge is the only trace
        seen.append(replica.external)
        await replica.client.aclose()
        return seen

    assert asyncio.run(run()) == [0.0, 0.0]


def chat(system: str | None, *turns: str) -> dict[str, object]:
    messages = [{"role": "system", "content": system}] if system else []
    roles = ["user", "assistant"]
    messages += [{"role": roles[i % 2], "content": t} for i, t in enumerate(turns)]
    return {"model": "m", "messages": messages}


def test_affinity_key_follows_the_conversation_prefix() -> None:
    first = affinity_key(chat("You are a pirate.", "hello"))
    later = affinity_key(chat("You are a pirate.", "hello", "arr", "more", "and more"))
    assert first is not None and first == later  # later turns keep the conversation's replica
    assert affinity_key(chat("You are a poet.", "hello")) != first
    assert affinity_key(chat(None, "q1")) == affinity_key(chat(None, "q1", "a1", "q2"))
    assert affinity_key({"model": "m", "messages": []}) is None
    assert affinity_key(chat(None, "q"), session="abc") == affinity_key(chat(None, "x"), "abc")


def test_least_loaded_without_a_key() -> None:
    a = Candidate("a", in_flight=3, limit=8)
    b = Candidate("b", in_flight=1, limit=8)
    # c runs other gateways' requests: 5 running + 1 waiting, none of them ours.
    load = EngineLoad(running=5, waiting=1)
    c = Candidate("c", in_flight=0, limit=8, load=load, external=external_load(load, 0))
    choice = choose([a, b, c], None, slack=0.25)
    assert choice is not None and (choice.name, choice.affinity) == ("b", "none")
    full = [Candidate("a", 8, 8), Candidate("b", 8, 8)]
    assert choose(full, None, 0.25) is None


def test_affinity_holds_until_the_preferred_replica_is_busier_than_the_slack() -> None:
    names = ["a", "b", "c"]
    key = "p:conversation"
    owner = rendezvous(key, names)
    idle = [Candidate(n, 0, 8) for n in names]
    assert choose(idle, key, 0.25) == choose(idle, key, 0.25)
    assert choose(idle, key, 0.25).name == owner  # type: ignore[union-attr]
    slightly = [Candidate(n, 1 if n == owner else 0, 8) for n in names]
    assert choose(slightly, key, 0.25).affinity == "hit"  # type: ignore[union-attr]
    busy = [Candidate(n, 4 if n == owner else 0, 8) for n in names]
    fallback = choose(busy, key, 0.25)
    assert fallback is not None and fallback.name != owner and fallback.affinity == "fallback"


def test_rendezvous_moves_only_the_leaving_replicas_keys() -> None:
    keys = [f"p:{i}" for i in range(200)]
    before = {k: rendezvous(k, ["a", "b", "c"]) for k in keys}
    after = {k: rendezvous(k, ["a", "c"]) for k in keys}
    assert {before[k] for k in keys} == {"a", "b", "c"}
    assert all(after[k] == before[k] for k in keys if before[k] != "b")


class Slots:
    """A fake pool: ``free`` slots; pick takes one, release gives it back."""

    def __init__(self, free: int) -> None:
        self.free = free

    def pick(self, key: str | None, exclude: frozenset[str]) -> str | None:
        if self.free <= 0:
            return None
        self.free -= 1
        return "slot"

    def release(self, lease: str) -> None:
        self.free += 1


def admission(slots: Slots, interactive: int = 2, batch: int = 2) -> Admission[str]:
    return Admission({"interactive": interactive, "batch": batch}, slots.pick, slots.release,
                     lambda: True)  # fmt: skip


def test_queue_full_and_deadline_are_rejected() -> None:
    async def run() -> None:
        slots = Slots(1)
        adm = admission(slots, interactive=1)
        assert await adm.admit("interactive", None, 1.0) == "slot"
        waiting = asyncio.create_task(adm.admit("interactive", None, 0.2))
        await asyncio.sleep(0)
        with pytest.raises(Rejected) as full:
            await adm.admit("interactive", None, 1.0)
        assert full.value.reason == "queue_full"
        with pytest.raises(Rejected) as late:
            await waiting
        assert late.value.reason == "queue_timeout"
        assert adm.depth("interactive") == 0
        assert adm.rejected[("interactive", "queue_full")] == 1

    asyncio.run(run())


def test_interactive_goes_before_batch_and_cancelled_waiters_leave() -> None:
    async def run() -> None:
        slots = Slots(0)
        adm = admission(slots)
        order: list[str] = []

        async def wait(priority: str) -> None:
            await adm.admit(priority, None, 5.0)  # type: ignore[arg-type]
            order.append(priority)

        batch = asyncio.create_task(wait("batch"))
        await asyncio.sleep(0)
        gone = asyncio.create_task(wait("interactive"))
        interactive = asyncio.create_task(wait("interactive"))
        await asyncio.sleep(0)
        gone.cancel()  # the caller left while queued
        await asyncio.sleep(0)
        assert adm.depth("interactive") == 1
        slots.free = 2
        adm.dispatch()
        await asyncio.gather(batch, interactive)
        assert order == ["interactive", "batch"]

    asyncio.run(run())


def test_no_replica_is_a_503_at_once() -> None:
    async def run() -> None:
        adm: Admission[str] = Admission({"interactive": 5, "batch": 5}, Slots(0).pick,
                                        Slots(0).release, lambda: False)  # fmt: skip
        with pytest.raises(Rejected) as exc:
            await adm.admit("interactive", None, 10.0)
        assert exc.value.reason == "no_replica"

    asyncio.run(run())


# --- configuration -----------------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in list(os.environ):
        if name.startswith("EDGECORE_CORE_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_replicas_from_env_get_their_own_ports_and_cores(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("EDGECORE_CORE_POOL__REPLICAS", "2")
    clean_env.setenv("EDGECORE_CORE_POOL__PROFILE", "cpu-dev")
    clean_env.setenv("EDGECORE_CORE_ENGINE__PORT", "9000")
    clean_env.setenv("EDGECORE_CORE_ENGINE__CPU_THREADS_BIND", "split")
    clean_env.setenv("EDGECORE_CORE_ENGINE__MAX_NUM_SEQS", "8")
    replicas = load_pool(CoreSettings())
    assert [r.name for r in replicas] == ["r0", "r1"]
    assert [r.engine.port for r in replicas] == [9000, 9001]
    binds = [r.engine.cpu_threads_bind for r in replicas]
    assert binds[0] != binds[1] and all(binds)
    assert all(r.max_in_flight == 8 and r.engine.enforce_eager for r in replicas)


def test_one_replica_by_default_is_todays_single_engine(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("EDGECORE_CORE_ENGINE__PORT", "8123")
    (replica,) = load_pool(CoreSettings())
    assert replica.engine.port == 8123 and replica.manage and replica.name == "r0"


def test_pool_file_with_gpu_replicas(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "pool.toml"
    path.write_text(
        'profile = "llama-3.3-70b-tp4-eagle3"\n'
        '[engine]\nvisible_devices = "split"\n'
        '[engine.speculative]\nmethod = "eagle3"\nmodel = "/models/eagle3"\n'
        "disable_by_batch_size = 32\n"
        '[[replicas]]\nname = "left"\n'
        '[[replicas]]\nname = "right"\nmax_in_flight = 16\n'
    )
    clean_env.setenv("EDGECORE_CORE_POOL__FILE", str(path))
    left, right = load_pool(CoreSettings())
    assert (left.engine.visible_devices, right.engine.visible_devices) == ("0,1,2,3", "4,5,6,7")
    assert left.engine.tensor_parallel_size == 4 and left.max_in_flight == 128
    assert right.max_in_flight == 16
    argv = left.engine.command(python="py")
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    # vLLM 0.32 stops speculating past a batch size through its dynamic schedule.
    assert spec["num_speculative_tokens_per_batch_size"] == [[1, 31, 3], [32, 32, 0]]
    assert "disable_by_batch_size" not in spec


@pytest.mark.parametrize(
    ("toml", "field"),
    [
        ("[engine]\ntensor_parallel_size = 0\n", "replicas[0].engine.tensor_parallel_size"),
        ("[engine]\nmax_modl_len = 5\n", "max_modl_len"),
        ("replicas = 0\n", "replicas"),
        ('[[replicas]]\nname = "a"\n[[replicas]]\nname = "a"\n', "replicas.name"),
        (
            '[[replicas]]\nname = "a"\nengine = { port = 9 }\n'
            "[[replicas]]\nengine = { port = 9 }\n",
            "replicas.engine.port",
        ),
        ('profile = "nope"\n', "pool.profile"),
        ('[engine.speculative]\nmethod = "eagle3"\n', "draft model"),
        ("replica = 2\n", "replica"),
        ("[engine\n", "invalid TOML"),
    ],
)
def test_bad_pool_config_names_the_field(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, toml: str, field: str
) -> None:
    path = tmp_path / "pool.toml"
    path.write_text(toml)
    clean_env.setenv("EDGECORE_CORE_POOL__FILE", str(path))
    with pytest.raises(PoolConfigError, match=field.replace("[", r"\[").replace("]", r"\]")):
        load_pool(CoreSettings())


def test_prod_needs_the_edge_token_and_admin_key(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("EDGECORE_CORE_PROFILE", "prod")
    with pytest.raises(PoolConfigError, match="auth_token and admin_key"):
        load_pool(CoreSettings())
    clean_env.setenv("EDGECORE_CORE_AUTH_TOKEN", "t")
    clean_env.setenv("EDGECORE_CORE_ADMIN_KEY", "k")
    assert len(load_pool(CoreSettings())) == 1


def test_speculation_without_a_batch_limit_is_passed_as_is() -> None:
    spec = SpeculativeConfig(method="ngram", num_speculative_tokens=4, prompt_lookup_max=3)
    assert spec.vllm_json() == {"method": "ngram", "num_speculative_tokens": 4,
                                "prompt_lookup_max": 3}  # fmt: skip


# --- the edge token ----------------------------------------------------------------------


def test_edge_token_and_admin_key() -> None:
    async def ok(request: object) -> PlainTextResponse:
        return PlainTextResponse("ok")

    inner = Starlette(routes=[Route("/v1/x", ok), Route("/readyz", ok), Route("/admin/x", ok)])
    client = TestClient(CoreAuth(inner, "tok", "adm"))
    assert client.get("/v1/x").status_code == 401
    r = client.get("/v1/x", headers={"authorization": "Bearer nope"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert client.get("/v1/x", headers={"authorization": "Bearer tok"}).text == "ok"
    assert client.get("/readyz").text == "ok"  # probes stay open
    assert client.get("/admin/x", headers={"authorization": "Bearer tok"}).status_code == 401
    assert client.get("/admin/x", headers={"authorization": "Bearer adm"}).text == "ok"
    no_admin = TestClient(CoreAuth(inner, None, None))
    assert no_admin.get("/v1/x").text == "ok"  # dev: open, and the core says so at start
    assert no_admin.get("/admin/x").status_code == 404
