"""Chaos: mixed load through a real ``edgecore up`` while Redis, the core and the vLLM engine
are frozen (SIGSTOP ... SIGCONT) and killed (SIGKILL) at seeded random times.

Three faults hit vLLM's scheduler while its API server stays up (``/health`` answers 200
throughout), which only the core's forward-progress watch can see (core/progress.py):
``freeze scheduler`` (its ``EngineCore`` process SIGSTOPped), ``kill scheduler`` (SIGKILL
to it alone), and ``starve engine``: the whole engine stopped and continued at a 50 % duty
cycle (1 s each) for the freeze time, slow but alive, which must evict nothing. Each fault
reports the replica evictions it caused (``edgecore_core_replica_wedges_total``).

    .venv/bin/python -m bench.chaos [--duration 270] [--seed 1] [--clients 4] [--faults LIST]

Load (bounded loops, loopback only): exact cache hits (prompts answered once in the warm-up),
reworded ones, the edge model and the core model, streaming or not. Every request ends as:
- ok (200, complete: a JSON body, or a stream ending in [DONE]); ``degraded`` counts the ok
  ones carrying ``x-edgecore-degraded``;
- 503, 429, other (another status, or a stream that ended with an error event);
- hung: no final byte within ``--deadline``;
- lost: the connection dropped with no error body, or a stream cut without an error event
  or [DONE].
Per fault: time to detect (the edge's /readyz lists the part missing; a probe request gets a
fallback or an error instead of its normal answer) and time to recover (from the thaw or the
kill, until the probe is answered normally again), plus what ``up`` recorded (restarts).
Latency p50/p99 per kind of request, during faults and outside them; RSS of each process
before and after. Prints a table, writes JSON and a PNG timeline (``--out``, ``--png``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.chaos_load import (
    CORE_MODEL,
    EDGE_MODEL,
    KINDS,
    PROMPTS,
    WEIGHTS,
    Result,
    cached_body,
    fresh_body,
    request,
)
from bench.chaos_report import plot, table
from bench.chaos_stack import Stack, rss_mb
from bench.common import RESULTS, Results, pct, progress, run_bench

# What each part suffers; "scheduler" is vLLM's EngineCore process alone.
ACTIONS = {
    "redis": ("freeze", "kill"),
    "core": ("freeze", "kill"),
    "engine": ("freeze", "kill", "starve"),
    "scheduler": ("freeze", "kill"),
}
COMPONENTS = tuple(ACTIONS)
# /readyz polls lag the probe requests a little: this long after the probe recovered, a
# part missing from /readyz is no longer the fault's doing.
RECOVERED_SLACK_S = 5.0


@dataclass
class Fault:
    component: str
    action: str
    at: float  # seconds since the load began
    pid: int | None = None
    ended: float | None = None  # thaw (freeze) or the kill itself
    detect_readyz_s: float | None = None
    detect_request_s: float | None = None
    recover_s: float | None = None  # from ``ended`` to the first normal probe answer
    recover_readyz_s: float | None = None
    probes: list[tuple[float, str]] = field(default_factory=list)
    evictions: int | None = None  # replicas the core took out for no progress, during it
    note: str = ""

    @property
    def label(self) -> str:
        return f"{self.action} {self.component}"


class Chaos:
    def __init__(self, stack: Stack, args: argparse.Namespace) -> None:
        self.stack = stack
        self.args = args
        self.rng = random.Random(args.seed)
        self.results: list[Result] = []
        self.faults: list[Fault] = []
        self.readyz: list[tuple[float, list[str] | None]] = []  # None: no answer
        self.t0 = 0.0
        self.headers = {"authorization": f"Bearer {stack.key}"}
        self.url = stack.edge + "/v1/chat/completions"
        self.counter = 0
        self.cached = list(PROMPTS)  # those the warm-up got into the cache
        self.probes: list[asyncio.Task[None]] = []

    def now(self) -> float:
        return time.monotonic() - self.t0

    def body(self, kind: str, stream: bool) -> tuple[dict[str, Any], dict[str, str]]:
        self.counter += 1
        exact, reworded = self.rng.choice(self.cached)
        if kind == "exact":
            return cached_body(exact, stream), self.headers
        if kind == "reworded":
            return cached_body(reworded, stream), self.headers
        model = EDGE_MODEL if kind == "edge" else CORE_MODEL
        return fresh_body(model, self.counter, stream), {
            **self.headers,
            "cache-control": "no-store",
        }

    async def warm(self, client: httpx.AsyncClient) -> int:
        """Answer each prompt once; keep those that then come back from the cache."""
        cached = []
        for exact, reworded in PROMPTS:
            await client.post(self.url, json=cached_body(exact, False), headers=self.headers)
            await asyncio.sleep(0.5)
            r = await client.post(self.url, json=cached_body(exact, False), headers=self.headers)
            if r.headers.get("x-edgecore-tier") == "cache":
                cached.append((exact, reworded))
        if not cached:
            raise SystemExit("no warm-up answer was cached (all cut at max_tokens?)")
        self.cached = cached
        return len(cached)

    async def worker(self, client: httpx.AsyncClient, until: float) -> None:
        while self.now() < until:
            kind = self.rng.choices(KINDS, WEIGHTS)[0]
            body, headers = self.body(kind, self.rng.random() < 0.5)
            res = await request(client, self.url, body, headers, kind, self.t0, self.args.deadline)
            self.results.append(res)
            if res.outcome in ("refused", "lost") and res.ms < 50:
                await asyncio.sleep(0.2)  # no tight loop against a closed port

    async def watch_readyz(self, client: httpx.AsyncClient, until: float) -> None:
        while self.now() < until:
            try:
                r = await client.get(self.stack.edge + "/readyz", timeout=2.0)
                self.readyz.append((self.now(), list(r.json().get("degraded") or [])))
            except (httpx.HTTPError, ValueError):
                self.readyz.append((self.now(), None))  # no answer within 2 s
            await asyncio.sleep(0.25)

    def schedule(self, start: float, end: float) -> list[tuple[float, str, str]]:
        """Every (component, action) once, as many as fit ``--min-gap`` apart: each component
        once (in a seeded order, with a seeded action) before any of them twice."""
        chosen = self.args.faults
        order = list(COMPONENTS)
        self.rng.shuffle(order)
        first = {c: self.rng.choice(ACTIONS[c]) for c in order}
        plan = [(c, first[c]) for c in order]
        plan += [(c, a) for c in order for a in ACTIONS[c] if a != first[c]]
        if chosen:  # only these, in the order given
            plan = [(c, a) for c, a in chosen]
        n = max(1, min(len(plan), int((end - start) // self.args.min_gap)))
        gap = (end - start) / n
        return [
            (start + i * gap + self.rng.uniform(0, gap * 0.3), c, a)
            for i, (c, a) in enumerate(plan[:n])
        ]

    async def probe(self, client: httpx.AsyncClient, fault: Fault, give_up: float) -> None:
        """Probe the faulted part's path until it answers normally after the fault ended."""
        redis = fault.component == "redis"
        exact = self.cached[0][0]
        while self.now() < give_up:
            if redis:
                body, headers = cached_body(exact, False), self.headers
            else:
                body = fresh_body(CORE_MODEL, 0, False) | {"max_tokens": 2}
                headers = {**self.headers, "cache-control": "no-store"}
            # 30 s: with the cache bypassed, the probe's answer is generated (seconds here).
            res = await request(client, self.url, body, headers, "probe", self.t0, 30.0)
            normal = res.outcome == "ok" and not res.degraded
            normal = normal and res.tier == ("cache" if redis else "core")
            fault.probes.append((res.end, "normal" if normal else res.outcome + f"/{res.tier}"))
            if not normal and res.outcome != "hung" and fault.detect_request_s is None:
                fault.detect_request_s = round(res.end - fault.at, 3)
            if normal and fault.ended is not None and res.start >= fault.ended:
                fault.recover_s = round(res.end - fault.ended, 3)
                return
            await asyncio.sleep(0.5)
        fault.note += " not recovered before the run ended;"

    async def wedges(self, client: httpx.AsyncClient) -> int | None:
        """The core's count of replicas found making no progress (None: no answer)."""
        try:
            r = await client.get(self.stack.core + "/metrics", timeout=5.0)
        except httpx.HTTPError:
            return None
        return int(sum(float(line.rsplit(" ", 1)[1]) for line in r.text.splitlines()
                       if line.startswith("edgecore_core_replica_wedges_total{")))  # fmt: skip

    async def inject(self, client: httpx.AsyncClient, fault: Fault) -> None:
        before = await self.wedges(client)
        prober: asyncio.Task[None] | None = None
        try:
            prober = await self._inject(client, fault)
        finally:
            counted = self.evictions(client, fault, before, prober)
            self.probes.append(asyncio.create_task(counted))

    async def evictions(
        self,
        client: httpx.AsyncClient,
        fault: Fault,
        before: int | None,
        prober: asyncio.Task[None] | None,
    ) -> None:
        """Evictions from the fault's start until its path answers normally again: a slow
        engine's false eviction came 7 s after its starve ended, which a count taken at the
        end of the fault missed. Faults that overlap (see the notes) share their counts."""
        if prober is not None:
            await asyncio.wait([prober])
        after = await self.wedges(client)
        if before is not None and after is not None:
            fault.evictions = after - before

    async def _inject(self, client: httpx.AsyncClient, fault: Fault) -> asyncio.Task[None] | None:
        """Inflict ``fault``; the task probing its path until it recovers (None: skipped)."""
        pid = self.stack.pid(fault.component)
        fault.pid = pid
        if pid is None:
            fault.note = f"{fault.component} had no pid (restarting?); skipped"
            fault.ended = fault.at
            return None
        give_up = fault.at + self.args.freeze_s + self.args.recover_timeout
        busy = [f.label for f in self.faults[:-1] if f.recover_s is None]
        if busy:
            fault.note += f" while still recovering from: {', '.join(busy)};"
        prober = asyncio.create_task(self.probe(client, fault, give_up))
        self.probes.append(prober)
        try:
            if fault.component == "scheduler":
                await self.scheduler_fault(fault, pid)
            elif fault.action == "starve":
                until = time.monotonic() + self.args.freeze_s
                progress(f"{fault.at:7.1f}s starve {fault.component} (pid {pid}, 50 % duty)")
                while time.monotonic() < until:
                    os.killpg(pid, signal.SIGSTOP)
                    await asyncio.sleep(1.0)
                    os.killpg(pid, signal.SIGCONT)
                    await asyncio.sleep(1.0)
                fault.ended = self.now()
            elif fault.action == "freeze":
                os.killpg(pid, signal.SIGSTOP)  # the whole part (vLLM: its engine core too)
                progress(f"{fault.at:7.1f}s freeze {fault.component} (pid {pid})")
                await asyncio.sleep(self.args.freeze_s)
                os.killpg(pid, signal.SIGCONT)
                fault.ended = self.now()
                progress(f"{fault.ended:7.1f}s thaw {fault.component}")
            else:
                os.kill(pid, signal.SIGKILL)  # the process alone, as a crash would
                fault.ended = self.now()
                progress(f"{fault.at:7.1f}s kill -9 {fault.component} (pid {pid})")
        except ProcessLookupError:
            fault.note = "the process was gone already;"
            fault.ended = self.now()
        return prober

    async def scheduler_fault(self, fault: Fault, pid: int) -> None:
        """vLLM's EngineCore alone; its API server (``pid``) keeps answering /health."""
        if fault.action == "freeze":
            os.kill(pid, signal.SIGSTOP)
            progress(f"{fault.at:7.1f}s freeze the scheduler alone (pid {pid})")
            await asyncio.sleep(self.args.freeze_s)
            os.kill(pid, signal.SIGCONT)
        else:
            os.kill(pid, signal.SIGKILL)
            progress(f"{fault.at:7.1f}s kill -9 the scheduler alone (pid {pid})")
        fault.ended = self.now()

    async def faults_loop(self, client: httpx.AsyncClient, start: float, end: float) -> None:
        for at, component, action in self.schedule(start, end):
            await asyncio.sleep(max(0.0, at - self.now()))
            if self.now() > end:
                progress(f"no time left for {action} {component}: skipped")
                continue
            fault = Fault(component, action, round(self.now(), 3))
            self.faults.append(fault)
            # The next fault comes on schedule even if this one has not recovered yet (a
            # restarted vLLM takes a minute here); the table notes such overlaps.
            await self.inject(client, fault)
        await asyncio.gather(*self.probes)  # each recovers or gives up (--recover-timeout)

    async def run(self) -> dict[str, Any]:
        a = self.args
        limits = httpx.Limits(max_connections=a.clients + 8)
        timeout = httpx.Timeout(a.deadline + 5, connect=5)
        async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
            progress("warm-up: answering the cached prompts once ...")
            warm_hits = await self.warm(client)
            rss_before = rss_mb(self.stack)
            self.t0 = time.monotonic()
            until = a.duration
            tasks = [asyncio.create_task(self.worker(client, until)) for _ in range(a.clients)]
            ready = asyncio.create_task(self.watch_readyz(client, until + a.recover_timeout))
            faults = asyncio.create_task(self.faults_loop(client, a.warmup, until - a.tail))
            await asyncio.gather(*tasks)
            await faults  # the last fault's probe may run past the load
            ready.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ready
            rss_after = rss_mb(self.stack)
        self.detect_from_readyz()
        return {
            "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
            "machine": {"cpus": os.cpu_count()},
            "warm_cache_hits": f"{warm_hits}/{len(PROMPTS)}",
            "cached_prompts": [exact for exact, _ in self.cached],
            "outcomes": self.outcomes(),
            "latency": self.latency(),
            "faults": [self.fault_json(f) for f in self.faults],
            "rss_mb": {"before": rss_before, "after": rss_after},
            "supervisor": self.stack.status().get("events", []),
            "restarts": {
                name: c.get("restarts")
                for name, c in self.stack.status().get("children", {}).items()
            },
            "requests": [asdict(r) | {"ms": round(r.ms, 1)} for r in self.results],
            "readyz": self.readyz,
        }

    def detect_from_readyz(self) -> None:
        """When the edge's /readyz first listed the faulted part as missing (or did not
        answer), before the next fault and before the fault's path recovered (a readyz
        without answer a minute after a starve recovered in 3.5 s is not the starve's); when
        it stopped listing it after the fault ended."""
        for i, f in enumerate(self.faults):
            part = "redis" if f.component == "redis" else "core"
            ended = f.ended or f.at
            nxt = self.faults[i + 1].at if i + 1 < len(self.faults) else float("inf")
            if f.recover_s is not None:
                nxt = min(nxt, ended + f.recover_s + RECOVERED_SLACK_S)
            before = [d for t, d in self.readyz if t < f.at]
            if before and before[-1] is not None and part in before[-1]:
                f.note += f" {part} was already missing from /readyz before it;"
            seen = [(t, d) for t, d in self.readyz if f.at <= t < nxt]
            hit = next((t for t, d in seen if d is None or part in d), None)
            if hit is not None:
                f.detect_readyz_s = round(hit - f.at, 3)
                # Recovery may come after the next fault began (a vLLM restart takes a minute).
                back = next((t for t, d in self.readyz if t >= max(hit, ended) and d is not None
                             and part not in d), None)  # fmt: skip
                if back is not None:
                    f.recover_readyz_s = round(back - ended, 3)

    def fault_windows(self) -> list[tuple[float, float]]:
        out = []
        for f in self.faults:
            end = (f.ended or f.at) + (f.recover_s if f.recover_s is not None else 0)
            if f.recover_s is None:
                end = max(end, f.at + self.args.freeze_s + self.args.recover_timeout)
            out.append((f.at, end))
        return out

    def in_fault(self, r: Result) -> bool:
        return any(r.start < e and r.end > s for s, e in self.fault_windows())

    def outcomes(self) -> dict[str, dict[str, int]]:
        names = ("sent", "ok", "degraded", "503", "429", "other", "hung", "lost", "refused")
        table: dict[str, dict[str, int]] = {}
        for kind in (*KINDS, "all"):
            rows = [r for r in self.results if kind in ("all", r.kind)]
            counts = dict.fromkeys(names, 0)
            counts["sent"] = len(rows)
            for r in rows:
                counts[r.outcome] += 1
                counts["degraded"] += r.outcome == "ok" and bool(r.degraded)
            table[kind] = counts
        return table

    def latency(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for kind in KINDS:
            for phase in ("faults", "calm"):
                ms = [r.ms for r in self.results if r.kind == kind and r.outcome == "ok"
                      and self.in_fault(r) == (phase == "faults")]  # fmt: skip
                out[f"{kind}/{phase}"] = {
                    "n": len(ms),
                    "p50_ms": round(pct(ms, 0.5), 1) if ms else None,
                    "p99_ms": round(pct(ms, 0.99), 1) if ms else None,
                }
        return out

    def fault_json(self, f: Fault) -> dict[str, Any]:
        d = asdict(f)
        d["probes"] = f.probes[:40]
        return d


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--duration", type=float, default=270.0,
                   help="seconds of load (270: each of the nine faults once)")  # fmt: skip
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--clients", type=int, default=4, help="concurrent load workers")
    p.add_argument("--deadline", type=float, default=60.0, help="no final byte by then: hung")
    p.add_argument("--warmup", type=float, default=10.0, help="seconds of load before faults")
    p.add_argument("--tail", type=float, default=10.0, help="no new fault in the last seconds")
    p.add_argument("--min-gap", type=float, default=25.0, help="seconds between fault starts")
    p.add_argument("--freeze-s", type=float, default=8.0, help="how long a freeze lasts")
    p.add_argument("--recover-timeout", type=float, default=240.0,
                   help="give up on a fault's recovery after this")  # fmt: skip
    p.add_argument("--png", type=Path, default=RESULTS / "chaos.png")
    p.add_argument("--faults", type=_faults, default=None,
                   help="only these faults, in this order, e.g. 'scheduler:freeze,engine:starve' "
                        "(default: every one, seeded order)")  # fmt: skip


def _faults(text: str) -> list[tuple[str, str]]:
    """``component:action,...`` checked against ``ACTIONS``."""
    out = []
    for item in text.split(","):
        component, _, action = item.strip().partition(":")
        if action not in ACTIONS.get(component, ()):
            raise argparse.ArgumentTypeError(f"unknown fault {item!r}; known: {ACTIONS}")
        out.append((component, action))
    return out


def run_all(args: argparse.Namespace) -> Results:
    stack = Stack(Path(tempfile.mkdtemp(prefix="edgecore-chaos-")))
    progress(f"starting the stack (Redis, core + vLLM, edge); log {stack.log} ...")
    try:
        stack.start()
        results = asyncio.run(Chaos(stack, args).run())
    finally:
        code = stack.stop()
    results["up_exit_code"] = code
    results["up_log_tail"] = stack.log.read_text(errors="replace")[-4000:]
    return results


def main() -> None:
    run_bench("chaos", __doc__, run_all, arguments=arguments, plot=plot, table=table, raw_help=True)


if __name__ == "__main__":
    main()
