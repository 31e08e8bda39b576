"""Forward-path overhead: the edge vs LiteLLM's proxy vs straight to the upstream.

    .venv/bin/python -m bench.forward_overhead [--requests 400] [--vllm-requests 32]
        [--clients 1,16,64] [--upstream fake,vllm] [--baseline REF] [--profile] [--gap-ms 0]

Three paths to the same upstream, in the same run, at 1, 16 and 64 concurrent streaming
clients (HTTP/1.1 from this process; every request streams, ``max_tokens`` 20):
- ``direct``: straight to the upstream;
- ``edge``: through an edgecore edge (auth with a key, rate limiter in Redis, validation,
  routing by rule, HTTP/2 to the upstream, SSE relay), cache off per request
  (``x-edgecore-cache: off``) and the core's model named, so no embedding is computed:
  this is the forwarding cost alone (embedding and cache lookup are in bench.cache_hit_path);
- ``litellm``: through the LiteLLM proxy (``litellm[proxy]`` in its own venv,
  ``openai/<model>`` with ``api_base`` = the same upstream, a master key, logging off);
- ``bare`` (fake upstream): ``bench.bare_relay``, the edge's server and HTTP/2 client
  relaying bytes with no edgecore code: the floor of what this stack can add;
- ``direct-h2``: straight to the upstream as ``direct``, over HTTP/2 (prior knowledge, one
  connection, as the edge talks to a core). Its overhead over ``direct`` is what HTTP/2
  itself costs, client and server; the edge's overhead over it is what the edge adds besides
  the hop to the core, which is what ``x-edgecore-overhead-ms`` counts (the time waiting on
  the tier is left out of it, and the HTTP/2 exchange with the core happens in that time).

With ``--baseline REF`` (fake upstream), a fourth path ``before`` is an edge running that
commit's code (a git worktree, the same venv and settings), measured in the same rounds:
before and after from one run. ``--profile`` samples the edge with py-spy over the fake
upstream's whole run (``forward_overhead.edge.svg``, a flame graph of forwarded streams).

Two upstreams: ``fake`` (bench/fake_upstream.py streams 20 tokens with no delay, to isolate
proxy cost; with ``--gap-ms``, that far apart, so each token is relayed on its own, as from
an engine) and ``vllm`` (``edgecore up``: the core and its vLLM engine, SmolLM2 on CPU;
fewer requests). Reports TTFT and total time p50/p95/p99 per path, the overhead of each
proxy (its percentile minus the direct path's at the same concurrency), requests/s, and
requests per CPU-second of the proxy process (psutil: user + system time of the process
and its children during the measured requests). Each concurrency runs in two rounds,
the second in reverse path order, so drift hits all paths alike.
Targets (issue 35; reported, not asserted): edge TTFT overhead p50 <= 0.1x LiteLLM's; edge
requests per CPU-second >= 10x LiteLLM's; the edge's own ``x-edgecore-overhead-ms`` p50
within 20 % of the overhead clients measure (checked against ``direct`` and ``direct-h2``).
Machines here are noisy and have 2 cores shared by client, proxy and upstream: compare
ratios from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    RESULTS,
    Results,
    baseline,
    bench_venv,
    child,
    commit_of,
    cpu_seconds,
    edge_process,
    free_port,
    load,
    pid_on_port,
    progress,
    redis_server,
    run_bench,
    stack,
    stream_chat,
    summary,
)
from bench.forward_overhead_report import overheads, plot, table, targets
from edge.tenancy.keys import add_key

MODEL = "smollm2-135m-instruct"  # the edge's core_model: forwarded by rule, never embedded
MAX_TOKENS = 20
CHAT = "/v1/chat/completions"


@dataclass
class Target:
    name: str
    url: str  # the chat completions URL
    pid: int | None  # the proxy process whose CPU time is counted
    headers: dict[str, str] = field(default_factory=dict)
    http2: bool = False  # the client speaks HTTP/2 to it (prior knowledge)


@contextmanager
def litellm(
    upstream: str, tmp: Path, upstream_key: str = "none"
) -> Iterator[tuple[str, int, str, str]]:
    """The LiteLLM proxy in front of ``upstream``; yields (url, pid, master key, version).

    ``upstream_key`` is sent as ``Authorization: Bearer`` (the core's edge token).
    """
    exe = bench_venv("litellm[proxy]", "litellm")
    version = subprocess.run(
        [
            str(exe.parent / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('litellm'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    key = f"sk-bench-{uuid.uuid4().hex[:12]}"
    config = tmp / "litellm.yaml"
    config.write_text(
        f"""model_list:
  - model_name: {MODEL}
    litellm_params:
      model: openai/{MODEL}
      api_base: {upstream}/v1
      api_key: {upstream_key}
litellm_settings:
  drop_params: true
  set_verbose: false
  turn_off_message_logging: true
  request_timeout: 600
general_settings:
  master_key: {key}
"""
    )
    port = free_port()
    argv = [str(exe), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    env = {
        "LITELLM_LOG": "ERROR",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_DONT_SHOW_FEEDBACK_BOX": "True",
    }
    url = f"http://127.0.0.1:{port}"
    progress(f"starting LiteLLM {version} on :{port} ...")
    with child(
        argv, tmp / "litellm.log", ready=url + "/health/liveliness", env=env, timeout=180
    ) as pid:
        yield url, pid, key, version


def body(i: int) -> dict[str, Any]:
    return {
        "model": MODEL,
        "stream": True,
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "messages": [{"role": "user", "content": f"Count from one to twenty. (#{i})"}],
    }


async def measure(
    paths: list[Target], clients: int, requests: int, rounds: int = 2
) -> dict[str, Any]:
    """Every path at ``clients`` concurrency, ``requests`` each, split over ``rounds``."""
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    out: dict[str, Any] = {}
    acc: dict[str, dict[str, Any]] = {
        p.name: {"ttft": [], "total": [], "edge_ms": [], "wall": 0.0, "cpu": 0.0} for p in paths
    }
    async with (
        httpx.AsyncClient(limits=limits, timeout=600) as h1,
        httpx.AsyncClient(limits=limits, timeout=600, http1=False, http2=True) as h2,
    ):
        client = {p.name: h2 if p.http2 else h1 for p in paths}
        for p in paths:  # warm up connections and code paths
            await asyncio.gather(
                *(
                    stream_chat(client[p.name], p.url, body(i), p.headers)
                    for i in range(min(clients, 8))
                )
            )
        per_round = max(1, requests // rounds)
        for r in range(rounds):
            for p in paths if r % 2 == 0 else list(reversed(paths)):
                a = acc[p.name]
                progress(f"  {p.name:<8} {clients:>3} clients, round {r + 1}/{rounds} ...")

                async def op(i: int, p: Target = p, a: dict[str, Any] = a) -> None:
                    s = await stream_chat(client[p.name], p.url, body(i), p.headers)
                    a["ttft"].append(s.ttft_ms)
                    a["total"].append(s.total_ms)
                    if "x-edgecore-overhead-ms" in s.headers:
                        a["edge_ms"].append(float(s.headers["x-edgecore-overhead-ms"]))

                cpu0 = cpu_seconds(p.pid) if p.pid else 0.0
                stats = await load(op, requests=per_round, clients=clients)
                a["cpu"] += (cpu_seconds(p.pid) - cpu0) if p.pid else 0.0
                a["wall"] += per_round / stats["per_s"]
    for p in paths:
        a = acc[p.name]
        n = len(a["ttft"])
        row: dict[str, Any] = {
            "ttft": summary(a["ttft"]),
            "total": summary(a["total"]),
            "per_s": round(n / a["wall"], 1),
        }
        if p.pid:
            row["cpu_s"] = round(a["cpu"], 3)
            row["requests_per_cpu_s"] = round(n / a["cpu"], 1) if a["cpu"] > 0 else None
        if a["edge_ms"]:
            row["edge_overhead_header"] = summary(a["edge_ms"])
        row["_raw"] = {"ttft": a["ttft"], "total": a["total"]}
        out[p.name] = row
    return out


async def run_paths(paths: list[Target], clients: list[int], requests: int) -> dict[str, Any]:
    runs: dict[str, Any] = {}
    for c in clients:
        runs[str(c)] = await measure(paths, c, max(requests, c))
    return runs


def fake_upstream(
    tmp: Path,
    clients: list[int],
    requests: int,
    ref: str | None = None,
    profile: Path | None = None,
    gap_ms: float = 0.0,
) -> dict[str, Any]:
    with ExitStack() as es:
        port = free_port()
        upstream = f"http://127.0.0.1:{port}"
        progress(f"starting the fake upstream on :{port} (tokens {gap_ms} ms apart) ...")
        es.enter_context(
            child(
                [sys.executable, "-m", "bench.fake_upstream", str(port), "--gap-ms", str(gap_ms)],
                tmp / "fake.log",
                ready=upstream + "/readyz",
            )
        )
        redis_port = es.enter_context(redis_server())
        key = add_key(tmp / "keys.toml", "bench")
        progress("starting an edge (loads its models: ~20 s) ...")

        def settings() -> dict[str, Any]:
            return {
                "redis__url": f"redis://127.0.0.1:{redis_port}/0",
                "keys_file": str(tmp / "keys.toml"),
                "core__url": upstream,
                "cache__index": f"bench:fwd:{uuid.uuid4().hex[:6]}",
            }

        edge_url, edge_pid = es.enter_context(
            edge_process(tmp / "edge.log", profile=profile, **settings())
        )
        ll_url, ll_pid, ll_key, version = es.enter_context(litellm(upstream, tmp))
        paths = _paths(upstream, edge_url, edge_pid, key, ll_url, ll_pid, ll_key)
        bare_port = free_port()
        bare_url = f"http://127.0.0.1:{bare_port}"
        bare_pid = es.enter_context(
            child(
                [sys.executable, "-m", "bench.bare_relay", str(bare_port), upstream],
                tmp / "bare.log",
                ready=bare_url + "/readyz",
            )
        )
        paths.append(Target("bare", bare_url + CHAT, bare_pid))
        if ref is not None:
            progress(f"starting an edge at {ref} (the baseline) ...")
            tree = es.enter_context(baseline(ref, tmp))
            before_url, before_pid = es.enter_context(
                edge_process(tmp / "edge-before.log", source=tree, **settings())
            )
            edge = next(p for p in paths if p.name == "edge")
            paths.insert(
                paths.index(edge) + 1, Target("before", before_url + CHAT, before_pid, edge.headers)
            )
        runs = asyncio.run(run_paths(paths, clients, requests))
        return {"runs": runs, "litellm_version": version}


def vllm_upstream(tmp: Path, clients: list[int], requests: int) -> dict[str, Any]:
    progress("starting the stack (Redis, core + vLLM, edge): ~1-2 min ...")
    with (
        stack(tmp / "up.log") as s,
        litellm(s.core, tmp, s.core_token) as (ll_url, ll_pid, ll_key, version),
    ):
        edge_pid = pid_on_port(s.ports["edge"])
        paths = _paths(s.core, s.edge, edge_pid, s.key, ll_url, ll_pid, ll_key, s.core_headers)
        runs = asyncio.run(run_paths(paths, clients, requests))
        return {"runs": runs, "litellm_version": version}


def _paths(
    upstream: str,
    edge: str,
    edge_pid: int,
    key: str,
    ll: str,
    ll_pid: int,
    ll_key: str,
    upstream_headers: dict[str, str] | None = None,
) -> list[Target]:
    return [
        Target("direct", upstream + CHAT, None, upstream_headers or {}),
        Target("direct-h2", upstream + CHAT, None, upstream_headers or {}, http2=True),
        Target(
            "edge",
            edge + CHAT,
            edge_pid,
            {"authorization": f"Bearer {key}", "x-edgecore-cache": "off"},
        ),
        Target("litellm", ll + CHAT, ll_pid, {"authorization": f"Bearer {ll_key}"}),
    ]


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--requests", type=int, default=400, help="per path and concurrency, fake upstream"
    )
    parser.add_argument(
        "--vllm-requests",
        type=int,
        default=32,
        help="per path and concurrency, vLLM (at least the concurrency)",
    )
    parser.add_argument("--clients", default="1,16,64", help="concurrency levels")
    parser.add_argument("--upstream", default="fake,vllm", help="fake, vllm or both")
    parser.add_argument(
        "--gap-ms", type=float, default=0.0,
        help="the fake upstream's tokens this far apart, each its own chunk (cost per token)",
    )  # fmt: skip
    parser.add_argument(
        "--baseline", default=None, metavar="REF",
        help="also measure an edge at this commit (fake upstream): before and after, one run",
    )  # fmt: skip
    parser.add_argument(
        "--profile", action="store_true",
        help="sample the edge with py-spy (fake upstream): a flame graph beside the JSON",
    )  # fmt: skip


def _profile_path(args: argparse.Namespace) -> Path:
    out = args.out or RESULTS / "forward_overhead.json"
    return out.with_suffix(".edge.svg")


def run_all(args: argparse.Namespace) -> Results:
    clients = [int(c) for c in args.clients.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="bench-fwd-"))
    results: dict[str, Any] = {
        "clients": clients,
        "max_tokens": MAX_TOKENS,
        "gap_ms": args.gap_ms,
        "model": MODEL,
        "logs": str(tmp),
        "upstreams": {},
    }
    for upstream in args.upstream.split(","):
        progress(f"== upstream: {upstream}")
        if upstream == "fake":
            profile = _profile_path(args) if args.profile else None
            data = fake_upstream(
                tmp, clients, args.requests, args.baseline, profile, gap_ms=args.gap_ms
            )
            if profile is not None:
                results["flame_graph"] = str(profile)
            if args.baseline:
                results["baseline"] = commit_of(args.baseline)
        elif upstream == "vllm":
            data = vllm_upstream(tmp, clients, args.vllm_requests)
        else:
            raise SystemExit(f"unknown upstream {upstream!r}: fake or vllm")
        data["overhead_ms"] = overheads(data["runs"])
        data["targets"] = targets(data["runs"], data["overhead_ms"])
        for paths in data["runs"].values():
            for row in paths.values():
                row.pop("_raw")
        results["upstreams"][upstream] = data
    return results


def main() -> None:
    run_bench("forward_overhead", __doc__, run_all, arguments=arguments, plot=plot, table=table)


if __name__ == "__main__":
    main()
