"""Soak: mixed load through a real ``edgecore up`` for a long time, watching memory.

    .venv/bin/python -m bench.soak [--minutes 30] [--clients 4] [--sample-s 10]

The load (bounded loops, loopback only) mixes what users send: exact and reworded cache
hits, the edge model and the core model, streaming or not, clients that leave after the
first event (their upstream work must stop), and bad requests (malformed JSON, too many
messages, an unknown model: each a 4xx). Every ``--sample-s`` the resident memory of the
edge, the core (without its engine), the engine and Redis is sampled.

Reported: outcomes per kind, every 5xx (only the documented 503s are allowed), and per
process the growth from the end of the warm-up (``--warmup-share`` of the run) to the end,
as a share, of RSS and of private memory (RSS without file-backed and shared pages: what a
leak grows). The target, at most 5 %, is on private memory: the edge maps its model's
weights file (127 MB for SmolLM2-135M int8), and RSS rises as prompts touch pages of it
that were not read before, which the kernel may drop again. Prints a table, writes JSON and
a PNG of both over time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

from bench.chaos_load import (
    CORE_MODEL,
    EDGE_MODEL,
    PROMPTS,
    Result,
    cached_body,
    fresh_body,
    request,
)
from bench.chaos_stack import Stack, rss_mb
from bench.common import Results, progress, run_bench

KINDS = ("exact", "reworded", "edge", "core", "disconnect", "bad")
WEIGHTS = (0.3, 0.1, 0.2, 0.2, 0.1, 0.1)
PROCESSES = ("edge", "core", "engine", "redis")
PRIVATE = "_private"  # the key suffix of a process's private memory in a sample
BAD_BODIES: list[bytes] = [
    b'{"model": "auto", "messages": [',  # malformed JSON
    b'{"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}',
    b'{"model": "auto", "messages": []}',
    b'{"model": "auto", "max_tokens": -1, "messages": [{"role": "user", "content": "hi"}]}',
]


class Soak:
    def __init__(self, stack: Stack, args: argparse.Namespace) -> None:
        self.stack = stack
        self.args = args
        self.rng = random.Random(args.seed)
        self.results: list[Result] = []
        self.samples: list[dict[str, Any]] = []
        self.headers = {"authorization": f"Bearer {stack.key}"}
        self.url = stack.edge + "/v1/chat/completions"
        self.t0 = 0.0
        self.n = 0

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def one(self, client: httpx.AsyncClient, kind: str) -> Result:
        self.n += 1
        stream = self.rng.random() < 0.5
        exact, reworded = self.rng.choice(PROMPTS)
        fresh = {**self.headers, "cache-control": "no-store"}
        if kind in ("exact", "reworded"):
            body = cached_body(exact if kind == "exact" else reworded, stream)
            return await request(client, self.url, body, self.headers, kind, self.t0, 120)
        if kind in ("edge", "core"):
            body = fresh_body(EDGE_MODEL if kind == "edge" else CORE_MODEL, self.n, stream)
            return await request(client, self.url, body, fresh, kind, self.t0, 120)
        if kind == "disconnect":
            return await self.leave_early(client, fresh)
        return await self.bad(client)

    async def leave_early(self, client: httpx.AsyncClient, headers: dict[str, str]) -> Result:
        """A stream read up to its first event, then closed (the user closed the tab)."""
        start = self.now()
        res = Result("disconnect", True, start, start, "lost")
        body = fresh_body(self.rng.choice([EDGE_MODEL, CORE_MODEL]), self.n, True)
        body["max_tokens"] = 64
        try:
            async with client.stream("POST", self.url, json=body, headers=headers) as r:
                res.status, res.tier = r.status_code, r.headers.get("x-edgecore-tier")
                async for line in r.aiter_lines():
                    if line.startswith("data:"):
                        break
                res.outcome = "ok" if r.status_code == 200 else str(r.status_code)
        except httpx.HTTPError as exc:
            res.detail = repr(exc)[:200]
        res.end = self.now()
        return res

    async def bad(self, client: httpx.AsyncClient) -> Result:
        start = self.now()
        content = self.rng.choice(BAD_BODIES)
        headers = {**self.headers, "content-type": "application/json"}
        r = await client.post(self.url, content=content, headers=headers)
        outcome = "ok" if 400 <= r.status_code < 500 else "other"  # a clear 4xx is right
        return Result("bad", False, start, self.now(), outcome, r.status_code,
                      detail=r.text[:200] if outcome != "ok" else "")  # fmt: skip

    async def worker(self, client: httpx.AsyncClient, until: float) -> None:
        while self.now() < until:
            kind = self.rng.choices(KINDS, WEIGHTS)[0]
            res = await self.one(client, kind)
            self.results.append(res)
            if res.outcome in ("refused", "lost") and res.ms < 50:
                await asyncio.sleep(0.2)  # no tight loop against a closed port

    def sample(self) -> dict[str, Any]:
        private = rss_mb(self.stack, private=True)
        return {"t": round(self.now(), 1), **rss_mb(self.stack),
                **{f"{name}{PRIVATE}": mb for name, mb in private.items()}}  # fmt: skip

    async def sampler(self, until: float) -> None:
        while self.now() < until:
            self.samples.append(await asyncio.to_thread(self.sample))
            await asyncio.sleep(self.args.sample_s)

    async def run(self) -> dict[str, Any]:
        a = self.args
        until = a.minutes * 60
        limits = httpx.Limits(max_connections=a.clients + 4)
        async with httpx.AsyncClient(timeout=httpx.Timeout(130, connect=5), limits=limits) as c:
            self.t0 = time.monotonic()
            sampler = asyncio.create_task(self.sampler(until))
            await asyncio.gather(*(self.worker(c, until) for _ in range(a.clients)))
            await sampler
            self.samples.append(self.sample())
        return {
            "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
            "machine": {"cpus": os.cpu_count()},
            "outcomes": outcomes(self.results),
            "errors_5xx": [asdict(r) for r in self.results if unexpected_5xx(r)],
            "rss": growth(self.samples, a.warmup_share),
            "samples": self.samples,
            "restarts": restarts(self.stack),
        }


def unexpected_5xx(r: Result) -> bool:
    """A 5xx other than the documented 503 (+ Retry-After) of an unavailable dependency."""
    return (r.status or 0) >= 500 and r.status != 503


def restarts(stack: Stack) -> dict[str, Any]:
    return {n: c.get("restarts") for n, c in stack.status().get("children", {}).items()}


def outcomes(results: list[Result]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for kind in (*KINDS, "all"):
        rows = [r for r in results if kind in ("all", r.kind)]
        counts: dict[str, int] = {"sent": len(rows)}
        for r in rows:
            counts[r.outcome] = counts.get(r.outcome, 0) + 1
        table[kind] = counts
    return table


def growth(samples: list[dict[str, Any]], warmup_share: float) -> dict[str, dict[str, Any]]:
    """Per process, RSS and private memory (MB) when the warm-up ended and at the end, and
    the growth between."""
    if not samples:
        return {}
    end_t = samples[-1]["t"]
    warm = next((s for s in samples if s["t"] >= warmup_share * end_t), samples[0])
    out: dict[str, dict[str, Any]] = {}
    for name in (*PROCESSES, *(p + PRIVATE for p in PROCESSES)):
        first, last = warm.get(name), samples[-1].get(name)
        share = None if not first or last is None else round((last - first) / first, 4)
        peak = max((s[name] for s in samples if s.get(name)), default=None)
        out[name] = {"after_warmup_mb": first, "end_mb": last, "growth": share, "peak_mb": peak}
    return out


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--minutes", type=float, default=30.0, help="how long the load runs")
    p.add_argument("--clients", type=int, default=4, help="concurrent load workers")
    p.add_argument("--sample-s", type=float, default=10.0, help="seconds between RSS samples")
    p.add_argument("--warmup-share", type=float, default=0.2,
                   help="growth is measured from this share of the run on")  # fmt: skip
    p.add_argument("--seed", type=int, default=1)


def run_all(args: argparse.Namespace) -> Results:
    stack = Stack(Path(tempfile.mkdtemp(prefix="edgecore-soak-")))
    progress(f"starting the stack (Redis, core + vLLM, edge); log {stack.log} ...")
    try:
        stack.start()
        progress(f"soaking for {args.minutes:g} min with {args.clients} clients ...")
        results = asyncio.run(Soak(stack, args).run())
    finally:
        code = stack.stop()
    results["up_exit_code"] = code
    return results


def table(results: Results) -> str:
    lines = [f"{'kind':<11}" + "  ".join(f"{k}={v}" for k, v in results["outcomes"]["all"].items())]
    for kind in KINDS:
        row = results["outcomes"][kind]
        lines.append(f"{kind:<11}" + "  ".join(f"{k}={v}" for k, v in row.items()))
    lines += ["", f"{'process':<16}{'after warm-up MB':>18}{'end MB':>9}{'peak MB':>9}"
                  f"{'growth':>9}"]  # fmt: skip
    for name, g in results["rss"].items():
        share = "-" if g["growth"] is None else f"{g['growth'] * 100:+.1f}%"
        lines.append(f"{name:<16}{g['after_warmup_mb']!s:>18}{g['end_mb']!s:>9}"
                     f"{g['peak_mb']!s:>9}{share:>9}")  # fmt: skip
    lines.append(f"5xx other than 503: {len(results['errors_5xx'])}")
    lines.append(f"restarts: {results['restarts']}")
    return "\n".join(lines)


def plot(results: Results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    samples = results["samples"]
    for i, name in enumerate(PROCESSES):
        for key, style, what in ((name, "-", "RSS"), (name + PRIVATE, "--", "private")):
            points = [(s["t"] / 60, s[key]) for s in samples if s.get(key)]
            if points:
                ax.plot(*zip(*points, strict=True), style, color=f"C{i}", label=f"{name} {what}")
    warm = results["config"]["warmup_share"] * results["config"]["minutes"]
    ax.axvline(warm, color="grey", linestyle="--", label="end of warm-up")
    ax.set_xlabel("minutes")
    ax.set_ylabel("MB")
    ax.set_title("edgecore soak: resident memory under mixed load")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    run_bench("soak", __doc__, run_all, arguments=arguments, plot=plot, table=table, raw_help=True)


if __name__ == "__main__":
    main()
