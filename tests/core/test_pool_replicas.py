"""The pool with two real CPU replicas behind one core: spreading, affinity, drain, crash
and restart, bounded queues, disconnects, authentication.

One core for the module (two vLLM engines, one CPU core each). Each replica takes at most
2 requests at once, the interactive queue holds 2 and the batch queue 1, so "full" is a
handful of held streams. Held streams generate a fixed number of tokens (``min_tokens``),
so they stay open while the test looks; nothing here asserts a duration.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import (
    engine_ports,
    eventually,
    free_port,
    metric,
    service_env,
    start,
    wait_ready,
)

pytestmark = pytest.mark.slow

TOKEN = "pool-test-token"
ADMIN = "pool-test-admin"
MODEL = "smollm2-135m-instruct"


@dataclass
class PoolCore:
    url: str
    pid: int

    def headers(self, **extra: str) -> dict[str, str]:
        return {"authorization": f"Bearer {TOKEN}", **extra}

    def admin(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.request(method, self.url + "/admin" + path, timeout=30,
                             headers={"authorization": f"Bearer {ADMIN}"}, **kwargs)  # fmt: skip

    def replicas(self) -> dict[str, dict[str, Any]]:
        return {r["name"]: r for r in self.admin("GET", "/replicas").json()["replicas"]}

    def engine(self, name: str) -> str:
        url: str = self.replicas()[name]["url"]
        return url

    def ask(self, content: str, system: str | None = None, **body: Any) -> httpx.Response:
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": content})
        payload = {"model": MODEL, "max_tokens": 4, "messages": messages, **body}
        return httpx.post(self.url + "/v1/chat/completions", json=payload,
                          headers=self.headers(), timeout=120)  # fmt: skip


@pytest.fixture(scope="module")
def pool(
    models_dir: Path, log_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PoolCore]:
    import psutil

    pool_file = tmp_path_factory.mktemp("pool") / "pool.toml"
    pool_file.write_text(
        'profile = "cpu-dev"\nreplicas = 2\nmax_in_flight = 2\n'
        f'[engine]\nmodel = "{models_dir / "smollm2-135m-instruct-hf"}"\n'
        'max_model_len = 2048\ncpu_threads_bind = "split"\n'
    )
    port = free_port()
    env = service_env(
        EDGECORE_CORE_PORT=str(port), EDGECORE_CORE_POOL__FILE=str(pool_file),
        EDGECORE_CORE_ENGINE__PORT=str(engine_ports()), EDGECORE_CORE_AUTH_TOKEN=TOKEN,
        EDGECORE_CORE_ADMIN_KEY=ADMIN, EDGECORE_CORE_ADMISSION__QUEUE_INTERACTIVE="2",
        EDGECORE_CORE_ADMISSION__QUEUE_BATCH="1", EDGECORE_CORE_POOL__METRICS_INTERVAL_S="0.5",
        EDGECORE_CORE_RETRY_AFTER_S="3",
        # Queued requests here wait for held streams to be closed, which on 2 loaded cores
        # can take longer than the 30 s default deadline (a 429 queue_timeout in CI). The
        # deadline itself is tested in test_pool_units.
        EDGECORE_CORE_ADMISSION__QUEUE_TIMEOUT_S="300",
    )  # fmt: skip
    server = start("core-pool", [sys.executable, "-m", "tools.cli", "core", "serve"], env,
                   log_dir, f"http://127.0.0.1:{port}")  # fmt: skip
    try:
        wait_ready(server, "/readyz", timeout=900)
        core = PoolCore(server.url, server.proc.pid)
        assert eventually(lambda: all(r["state"] == "ready" for r in core.replicas().values()),
                          600)  # fmt: skip
        yield core
        engines = [p for p in psutil.Process(server.proc.pid).children(recursive=True)]
    finally:
        server.stop()
    # Nothing the core started outlives it (engines, their engine-core workers).
    alive = [p for p in engines if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"orphans: {[p.cmdline()[:4] for p in alive]}"


# --- holding requests open ---------------------------------------------------------------


class Held:
    """A streamed answer kept open after its first event (or queued, if no slot is free)."""

    def __init__(self, core: PoolCore, content: str, **body: Any) -> None:
        self.status: int | None = None
        self.replica: str | None = None
        self.retry_after: str | None = None
        self.error = ""
        self.events: list[str] = []
        self.first = threading.Event()
        self.leave = threading.Event()
        self.done = threading.Event()
        payload = {"model": MODEL, "stream": True, "temperature": 0.7, "max_tokens": 1500,
                   "min_tokens": 1500, "messages": [{"role": "user", "content": content}],
                   **body}  # fmt: skip
        self.thread = threading.Thread(target=self._run, args=(core, payload), daemon=True)
        self.thread.start()

    def _run(self, core: PoolCore, payload: dict[str, Any]) -> None:
        headers = core.headers(**payload.pop("headers", {}))
        try:
            with httpx.stream("POST", core.url + "/v1/chat/completions", json=payload,
                              headers=headers, timeout=300) as r:  # fmt: skip
                self.status = r.status_code
                self.replica = r.headers.get("x-edgecore-replica")
                self.retry_after = r.headers.get("retry-after")
                if r.status_code != 200:
                    self.error = r.read().decode(errors="replace")  # said by a failing assert
                    return
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        self.events.append(line[6:])
                        self.first.set()
                        if self.leave.is_set():
                            return  # leaving mid-stream: the connection closes
        except httpx.HTTPError:
            pass
        finally:
            self.first.set()
            self.done.set()

    def close(self) -> None:
        self.leave.set()
        self.done.wait(300)


@pytest.fixture
def held() -> Iterator[list[Held]]:
    streams: list[Held] = []
    yield streams
    for s in streams:
        s.leave.set()
    for s in streams:
        s.done.wait(300)


def idle(core: PoolCore) -> bool:
    return (
        all(r["in_flight"] == 0 for r in core.replicas().values())
        and metric(core.url, "edgecore_core_queue_depth") == 0
    )


def engines_idle(core: PoolCore) -> bool:
    return all(metric(core.engine(n), "vllm:num_requests_running") == 0 for n in ("r0", "r1"))


# --- tests -------------------------------------------------------------------------------


def test_unauthenticated_calls_get_401(pool: PoolCore) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    url = pool.url + "/v1/chat/completions"
    assert httpx.post(url, json=body).status_code == 401
    wrong = httpx.post(url, json=body, headers={"authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
    # The edge token is not an admin key.
    admin = httpx.get(pool.url + "/admin/replicas", headers=pool.headers())
    assert admin.status_code == 401
    assert httpx.get(pool.url + "/readyz").status_code == 200  # probes stay open


def test_load_spreads_over_both_replicas(pool: PoolCore, held: list[Held]) -> None:
    # Different conversations land on different replicas (by hash, when idle).
    served = {pool.ask(f"Question number {i}: name a colour.").headers["x-edgecore-replica"]
              for i in range(8)}  # fmt: skip
    assert served == {"r0", "r1"}
    # The same conversation twice at once: the second goes to the idle replica.
    held += [Held(pool, "Tell me a story."), Held(pool, "Tell me a story.")]
    for h in held:
        assert h.first.wait(120) and h.status == 200, h.error
    assert {h.replica for h in held} == {"r0", "r1"}
    assert metric(pool.url, "edgecore_core_affinity_total", 'outcome="fallback"') >= 1
    for h in held:
        h.close()
    assert eventually(lambda: idle(pool))


def test_affinity_holds_for_a_repeated_system_prompt(pool: PoolCore) -> None:
    system = "You are a terse assistant for a lighthouse museum. " * 20  # a long shared prefix
    first = pool.ask("What is a lighthouse?", system=system)
    replica = first.headers["x-edgecore-replica"]
    engine = pool.engine(replica)
    hits = metric(engine, "vllm:prefix_cache_hits_total")
    for turn in range(4):
        r = pool.ask("What is a lighthouse?", system=system, temperature=0.7)
        assert r.status_code == 200 and r.headers["x-edgecore-replica"] == replica, turn
    # The engine that kept the conversation reused its cached prefix.
    assert metric(engine, "vllm:prefix_cache_hits_total") > hits


def test_full_queue_answers_429_with_retry_after(pool: PoolCore, held: list[Held]) -> None:
    rejected = metric(pool.url, "edgecore_core_rejected_total", 'reason="queue_full"')
    held += [Held(pool, f"Write a long essay, part {i}.") for i in range(4)]  # 2 per replica
    for h in held:
        assert h.first.wait(120) and h.status == 200, h.error
    # A caller that leaves while queued gives its place up.
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(pool.url + "/v1/chat/completions", headers=pool.headers(),
                   json={"model": MODEL, "messages": [{"role": "user", "content": "wait"}]},
                   timeout=httpx.Timeout(10, read=1.0))  # fmt: skip
    assert eventually(lambda: metric(pool.url, "edgecore_core_queue_depth") == 0)
    queued = [Held(pool, f"Queued question {i}.") for i in range(2)]
    held += queued
    assert eventually(lambda: metric(pool.url, "edgecore_core_queue_depth",
                                     'priority="interactive"') == 2)  # fmt: skip
    over = pool.ask("One too many.")
    assert over.status_code == 429 and int(over.headers["retry-after"]) == 3
    assert over.json()["error"]["code"] == "queue_full"
    # Batch has its own (smaller) queue; a batch request does not take an interactive place.
    batch = Held(pool, "A batch job.", headers={"x-edgecore-priority": "batch"})
    held.append(batch)
    assert eventually(lambda: metric(pool.url, "edgecore_core_queue_depth",
                                     'priority="batch"') == 1)  # fmt: skip
    over_batch = pool.ask("Another batch job.", service_tier="flex")  # OpenAI's "may wait" tier
    assert over_batch.status_code == 429
    assert metric(pool.url, "edgecore_core_rejected_total", 'reason="queue_full"') == rejected + 2
    for h in held[:4]:
        h.close()  # slots free up: the queue drains, interactive first
    for h in [*queued, batch]:
        assert h.first.wait(120) and h.status == 200, h.error
    for h in held:
        h.close()
    assert eventually(lambda: idle(pool), 60)
    assert eventually(lambda: engines_idle(pool), 60)


def finished(engine: str) -> float:
    return sum(metric(engine, "vllm:request_success_total", f'finished_reason="{r}"')
               for r in ("stop", "length"))  # fmt: skip


def test_disconnect_aborts_the_engine_request(pool: PoolCore) -> None:
    engines = {n: pool.engine(n) for n in ("r0", "r1")}
    before = {n: finished(u) for n, u in engines.items()}
    aborts = sum(metric(u, "vllm:request_success_total", 'finished_reason="abort"')
                 for u in engines.values())  # fmt: skip
    disconnects = metric(pool.url, "edgecore_core_client_disconnects_total")
    # Streaming: leave after the first event.
    h = Held(pool, "Write a very long story.")
    assert h.first.wait(120) and h.status == 200, h.error
    assert eventually(lambda: metric(engines[h.replica or ""], "vllm:num_requests_running") == 1)
    h.close()
    # Non-streaming: give up before the answer.
    body = {"model": MODEL, "max_tokens": 1500, "min_tokens": 1500,
            "messages": [{"role": "user", "content": "Another long story."}]}  # fmt: skip
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(pool.url + "/v1/chat/completions", json=body, headers=pool.headers(),
                   timeout=httpx.Timeout(10, read=2.0))  # fmt: skip
    assert eventually(lambda: engines_idle(pool))
    assert eventually(lambda: idle(pool))
    # Neither ran to its 1500 tokens: both were aborted, not finished.
    assert {n: finished(u) for n, u in engines.items()} == before
    assert metric(pool.url, "edgecore_core_client_disconnects_total") >= disconnects + 2
    # vLLM 0.32 does not count client aborts under finished_reason="abort" (see test_cancel).
    after = sum(metric(u, "vllm:request_success_total", 'finished_reason="abort"')
                for u in engines.values())  # fmt: skip
    print(f"vllm:request_success_total{{finished_reason='abort'}}: {aborts} -> {after}")


def test_drain_moves_new_traffic_and_lets_in_flight_finish(
    pool: PoolCore, held: list[Held]
) -> None:
    # An answer in flight on some replica, long enough to outlive the drain call.
    h = Held(pool, "Count slowly.", max_tokens=200, min_tokens=200)
    held.append(h)
    assert h.first.wait(120) and h.status == 200, h.error
    target = h.replica or ""
    other = ({"r0", "r1"} - {target}).pop()
    r = pool.admin("POST", f"/replicas/{target}/drain", json={"deadline_s": 300, "then": "idle"})
    assert r.status_code == 202 and r.json()["state"] == "draining"
    for i in range(4):
        assert pool.ask(f"New question {i}?").headers["x-edgecore-replica"] == other
    assert h.done.wait(300)
    assert h.events[-1] == "[DONE]"  # it finished normally, not cut
    last = json.loads(h.events[-2])
    assert last["choices"] and last["choices"][0]["finish_reason"] == "length"
    assert eventually(lambda: pool.replicas()[target]["state"] == "drained")
    assert pool.admin("POST", f"/replicas/{target}/undrain").json()["state"] == "ready"
    served = {pool.ask(f"Back again {i}?").headers["x-edgecore-replica"] for i in range(8)}
    assert served == {"r0", "r1"}


def test_drain_deadline_ends_what_is_left(pool: PoolCore, held: list[Held]) -> None:
    h = Held(pool, "A story that will not be finished.")
    held.append(h)
    assert h.first.wait(120) and h.status == 200, h.error
    target = h.replica or ""
    pool.admin("POST", f"/replicas/{target}/drain", json={"deadline_s": 1})
    assert h.done.wait(60)
    assert h.events[-1] == "[DONE]" and "error" in json.loads(h.events[-2])
    assert eventually(lambda: pool.replicas()[target]["state"] == "drained")
    assert eventually(lambda: metric(pool.engine(target), "vllm:num_requests_running") == 0)
    assert metric(pool.url, "edgecore_core_drain_evicted_total") >= 1
    pool.admin("POST", f"/replicas/{target}/undrain")
    assert eventually(lambda: pool.replicas()[target]["state"] == "ready")


def test_killed_engine_is_restarted_and_traffic_goes_elsewhere(pool: PoolCore) -> None:
    import psutil

    victim = pool.replicas()["r0"]
    os.killpg(victim["pid"], signal.SIGKILL)
    # Meanwhile every request is answered, by the surviving replica.
    for i in range(6):
        r = pool.ask(f"While r0 is down {i}?")
        assert r.status_code == 200 and r.headers["x-edgecore-replica"] == "r1"
    assert pool.replicas()["r0"]["state"] in ("restarting", "ready")
    assert eventually(lambda: pool.replicas()["r0"]["state"] == "ready", 600)
    status = pool.replicas()["r0"]
    assert status["restarts"] >= 1 and status["pid"] != victim["pid"]
    assert not psutil.pid_exists(victim["pid"]) or (
        psutil.Process(victim["pid"]).status() == psutil.STATUS_ZOMBIE
    )
    assert metric(pool.url, "edgecore_core_replica_restarts_total", 'replica="r0"') >= 1
    served = {pool.ask(f"After the restart {i}?").headers["x-edgecore-replica"]
              for i in range(8)}  # fmt: skip
    assert served == {"r0", "r1"}


def test_pool_metrics_and_bad_config(pool: PoolCore, tmp_path: Path) -> None:
    text = httpx.get(pool.url + "/metrics").text
    for name in ("edgecore_core_replica_state", "edgecore_core_queue_depth",
                 "edgecore_core_replica_engine_requests", "edgecore_core_admitted"):  # fmt: skip
        assert name in text
    assert metric(pool.url, "edgecore_core_replica_state", 'state="ready"') == 2
    # A bad pool never starts anything: a clear error naming the field, exit status 2.
    bad = tmp_path / "pool.toml"
    bad.write_text("[engine]\ntensor_parallel_size = 0\n")
    env = service_env(EDGECORE_CORE_POOL__FILE=str(bad), EDGECORE_CORE_PORT=str(free_port()))
    out = subprocess.run([sys.executable, "-m", "tools.cli", "core", "serve"], env=env,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 2
    assert "replicas[0].engine.tensor_parallel_size" in out.stderr
