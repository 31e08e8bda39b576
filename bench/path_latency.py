"""Latency of each path through a real local stack, next to the direct alternative.

    .venv/bin/python -m bench.path_latency [--requests 100] [--out bench/results/path_latency.json]

Starts ``edgecore up`` on free ports (Redis, core + vLLM, edge), then measures over HTTP:
- cache hits at the edge (one client, sequential) vs the same request answered by the core;
- time to first token (TTFT) of the edge model, and of the core through the edge vs the
  core directly (the edge's forwarding overhead as a ratio).
Prints a table and writes JSON. Machines here are noisy: compare ratios from one run.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench.common import run_bench, stack, summary

CORE_MODEL = "smollm2-135m-instruct"
EDGE_MODEL = "edge-smollm2-135m"


def ttft_ms(client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str]) -> float:
    t = time.perf_counter()
    first = None
    with client.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as r:
        r.raise_for_status()
        for line in r.iter_lines():  # read to the end, so the next request starts clean
            if first is None and '"content":"' in line and '"content":""' not in line:
                first = time.perf_counter()
    if first is None:
        raise RuntimeError("stream had no content")
    return (first - t) * 1000.0


def running(client: httpx.Client, engine: str) -> float:
    text = client.get(engine + "/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:num_requests_running")
    )


def abort_ms(
    client: httpx.Client,
    url: str,
    body: dict[str, Any],
    engine: str,
    headers: dict[str, str] | None = None,
) -> float:
    with client.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as r:
        for line in r.iter_lines():
            if '"content":"' in line and '"content":""' not in line:
                break
        left = time.perf_counter()
    while running(client, engine) > 0:
        if time.perf_counter() - left > 30:
            raise RuntimeError("the engine kept generating for 30 s after the client left")
        time.sleep(0.005)
    return (time.perf_counter() - left) * 1000.0


def run(n: int) -> dict[str, Any]:
    log = Path(tempfile.mkdtemp()) / "up.log"
    print("starting the stack (Redis, core + vLLM, edge) ...", flush=True)
    results: dict[str, Any] = {"requests": n, "machine": {"cpus": os.cpu_count()}}
    with stack(log) as s:
        edge, core, key, core_auth = s.edge, s.core, s.key, s.core_headers
        with httpx.Client(timeout=120, headers={"authorization": f"Bearer {key}"}) as client:
            # 1. cache hits: one deterministic prompt, answered once, then repeated.
            body = {
                "model": "auto",
                "temperature": 0,
                "max_tokens": 64,
                "messages": [{"role": "user", "content": f"Say hello. ({uuid.uuid4().hex[:6]})"}],
            }
            first = client.post(edge + "/v1/chat/completions", json=body)
            if first.json()["choices"][0]["finish_reason"] != "stop":
                raise SystemExit("the warm-up answer was cut; it would not be cached")
            time.sleep(0.3)
            hit_ms, overhead = [], []
            print(f"cache hits x{n} ...", flush=True)
            for _ in range(n):
                t = time.perf_counter()
                r = client.post(edge + "/v1/chat/completions", json=body)
                hit_ms.append((time.perf_counter() - t) * 1000.0)
                assert r.headers["x-edgecore-tier"] == "cache", r.headers
                overhead.append(float(r.headers["x-edgecore-overhead-ms"]))
            core_body = dict(body, model=CORE_MODEL)
            miss_ms = []
            for _ in range(max(5, n // 10)):
                t = time.perf_counter()
                client.post(core + "/v1/chat/completions", json=core_body, headers=core_auth)
                miss_ms.append((time.perf_counter() - t) * 1000.0)
            results["cache_hit"] = summary(hit_ms) | {"edge_overhead": summary(overhead)}
            results["core_direct_same_prompt"] = summary(miss_ms)

            # 2. TTFT: distinct prompts, cache bypassed.
            k = max(5, n // 5)
            no_store = {"cache-control": "no-store"}
            prompts = [f"Name a fruit and a colour. ({i})" for i in range(k)]

            def chat(model: str, p: str) -> dict[str, Any]:
                return {
                    "model": model,
                    "stream": True,
                    "max_tokens": 16,
                    "messages": [{"role": "user", "content": p}],
                }

            print(f"TTFT x{k} per path ...", flush=True)
            results["ttft_edge_model"] = summary(
                [ttft_ms(client, edge, chat(EDGE_MODEL, p), no_store) for p in prompts]
            )
            via_edge, direct = [], []
            for p in prompts:  # interleaved, so drift hits both alike
                via_edge.append(ttft_ms(client, edge, chat(CORE_MODEL, p), no_store))
                direct.append(ttft_ms(client, core, chat(CORE_MODEL, p), core_auth))
            results["ttft_core_via_edge"] = summary(via_edge)
            results["ttft_core_direct"] = summary(direct)
            # 3. Disconnect -> abort: the client leaves mid-stream; how long until the engine
            # stops generating (polled from vLLM's own gauge).
            engine = s.engine
            k = max(5, n // 20)
            story = {"model": CORE_MODEL, "stream": True, "max_tokens": 400, "temperature": 0.7,
                     "messages": [{"role": "user", "content": "Write a long story."}]}  # fmt: skip
            print(f"disconnect -> abort x{k} per path ...", flush=True)
            via_edge_abort, direct_abort = [], []
            for _ in range(k):
                via_edge_abort.append(abort_ms(client, edge, story, engine))
                direct_abort.append(abort_ms(client, core, story, engine, core_auth))
            results["abort_via_edge"] = summary(via_edge_abort)
            results["abort_core_direct"] = summary(direct_abort)
            results["ratios"] = {
                "cache_hit_vs_core_p50": round(
                    results["cache_hit"]["p50_ms"] / results["core_direct_same_prompt"]["p50_ms"], 4
                ),
                "core_ttft_via_edge_vs_direct_p50": round(
                    results["ttft_core_via_edge"]["p50_ms"] / results["ttft_core_direct"]["p50_ms"],
                    3,
                ),
            }
    return results


def table(results: dict[str, Any]) -> str:
    rows = [
        ("cache hit (edge, HTTP)", results["cache_hit"]),
        ("  edge overhead header", results["cache_hit"]["edge_overhead"]),
        ("same prompt, core direct", results["core_direct_same_prompt"]),
        ("TTFT edge model", results["ttft_edge_model"]),
        ("TTFT core via edge", results["ttft_core_via_edge"]),
        ("TTFT core direct", results["ttft_core_direct"]),
        ("disconnect->abort via edge", results["abort_via_edge"]),
        ("disconnect->abort direct", results["abort_core_direct"]),
    ]
    lines = [f"{'path':<28}{'n':>5}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}"]
    for name, s in rows:
        lines.append(
            f"{name:<28}{s['n']:>5}{s['p50_ms']:>10.2f}{s['p99_ms']:>10.2f}{s['mean_ms']:>10.2f}"
        )
    for name, value in results["ratios"].items():
        lines.append(f"ratio {name}: {value}")
    return "\n".join(lines)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=100)


def main() -> None:
    run_bench("path_latency", __doc__, lambda args: run(args.requests), arguments=arguments,
              table=table, raw_help=True)  # fmt: skip


if __name__ == "__main__":
    main()
