"""The edge model under concurrent streams, against vLLM's CPU engine on the same cores.

    .venv/bin/python -m bench.edge_model [--streams 1,4,8,16] [--tokens 64] [--threads 2]
        [--slots 2] [--batch 8] [--no-vllm]

Issue 34 asks how the edge's model serves 1, 4, 8 and 16 concurrent streams, and how that
compares with what a user would run instead. Each system gets ``2 x streams`` requests,
at most ``streams`` in flight. Each request asks for ``--tokens`` greedy tokens from one of
16 short prompts. The systems:

- ``tier``: the edge's own ``LocalModel`` (its model process, ``--slots`` generations at once,
  one ``og.Generator`` each: today's tier), SmolLM2-135M INT8, ``--threads`` threads;
- ``tier, a slot each``: the same with as many slots as streams (what more slots buy
  without shared decode steps);
- ``tier, engine``: the tier with ``LOCAL__BATCHING=engine`` and ``--batch`` slots:
  onnxruntime-genai's ``Engine`` in the model process, static batches on the CPU (a request
  that arrives while a batch runs waits for it);
- ``tier, steps``: the tier with ``LOCAL__BATCHING=steps`` (the default on the CPU) and
  ``--batch`` rows: continuous batching over the model's decoder graph
  (``edge.tiers.local_batch``), a new request joining the running batch at the next step;
- ``vllm``: vLLM's CPU engine serving the same model (its HF folder, bf16) as the core starts
  it (``core.settings.EngineConfig`` and ``core.engine.engine_env``), streamed over HTTP on
  loopback. It batches continuously.

For each system and concurrency: aggregate output tokens/s (tokens generated / wall time)
and the time to the first token, p50 and p99. The ratios to vLLM and to ``tier`` (the
one-generation-per-slot tier that issue 34 measures batching against) come from the same
run.
Tokens are counted as generated: a model may stop before ``--tokens`` (no system is told to
ignore its end of sequence).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from bench.common import Results, child, free_port, pct, progress, run_bench

PROMPTS = [
    "Name three colours.", "Write a haiku about the sea.", "What is two plus two?",
    "Tell me a joke about cats.", "Describe a sunrise.", "Why is the sky blue?",
    "List three fruits.", "Say hello in French.", "What is a prime number?",
    "Give me a tip for sleeping well.", "What do bees make?", "Name a famous painter.",
    "How many legs does a spider have?", "What is the capital of Italy?",
    "Suggest a name for a dog.", "What is rain made of?",
]  # fmt: skip
TIERS = ("tier", "tier, a slot each", "tier, engine", "tier, steps")

# One request: (prompt index) -> (time to first token s, output tokens).
Ask = Callable[[int], Awaitable[tuple[float, int]]]


async def _drive(ask: Ask, streams: int) -> dict[str, float]:
    """``2 x streams`` requests, ``streams`` at a time; aggregate tokens/s and TTFT."""
    requests = iter(range(2 * streams))
    firsts: list[float] = []
    tokens = 0

    async def worker() -> None:
        nonlocal tokens
        for i in requests:
            first, count = await ask(i % len(PROMPTS))
            firsts.append(first * 1000.0)
            tokens += count

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(streams)))
    wall = time.perf_counter() - t0
    return {
        "requests": 2 * streams,
        "tokens": tokens,
        "tokens_per_s": round(tokens / wall, 1),
        "ttft_p50_ms": round(pct(firsts, 0.5)),
        "ttft_p99_ms": round(pct(firsts, 0.99)),
    }


async def _tier(
    model_dir: Path, args: argparse.Namespace, slots: int | None, batching: str = "off"
) -> dict[str, Any]:
    from edge.tiers.local_model import Generation, LocalModel
    from shared.schemas import ChatCompletionRequest

    out: dict[str, Any] = {}
    for streams in args.streams:
        model = await asyncio.to_thread(
            LocalModel, model_dir, threads=args.threads, max_concurrency=slots or streams,
            queue_timeout_s=3600.0, context_tokens=2048, max_new_tokens=args.tokens,
            restart_backoff_s=0.0, batching=batching,
        )  # fmt: skip

        async def ask(i: int, model: LocalModel = model) -> tuple[float, int]:
            req = ChatCompletionRequest.model_validate(
                {
                    "model": "edge",
                    "temperature": 0,
                    "max_tokens": args.tokens,
                    "messages": [{"role": "user", "content": PROMPTS[i]}],
                }
            )
            gen, t, first = Generation(), time.perf_counter(), None
            async for _ in model.stream(req, gen):
                first = first or time.perf_counter()
            return (first or time.perf_counter()) - t, gen.completion_tokens

        try:
            await ask(0)  # warm: the first run of a session builds its kernels
            out[str(streams)] = await _drive(ask, streams)
        finally:
            await asyncio.to_thread(model.close)
        progress(f"  {streams} streams: {out[str(streams)]}")
    return out


async def _vllm_runs(url: str, model: str, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(timeout=600) as client:

        async def ask(i: int) -> tuple[float, int]:
            body = {"model": model, "temperature": 0, "max_tokens": args.tokens, "stream": True,
                    "stream_options": {"include_usage": True},
                    "messages": [{"role": "user", "content": PROMPTS[i]}]}  # fmt: skip
            t, first, count = time.perf_counter(), None, 0
            async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
                r.raise_for_status()
                async for line in r.aiter_lines():
                    if not line.startswith("data: {"):
                        continue
                    event = json.loads(line[6:])
                    if event.get("usage"):
                        count = event["usage"]["completion_tokens"]
                    if any((c.get("delta") or {}).get("content") for c in event["choices"]):
                        first = first or time.perf_counter()
            return (first or time.perf_counter()) - t, count

        await ask(0)  # warm
        for streams in args.streams:
            out[str(streams)] = await _drive(ask, streams)
            progress(f"  {streams} streams: {out[str(streams)]}")
    return out


def _vllm(hf_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    from core.engine import engine_env
    from core.settings import EngineConfig
    from shared.paths import default_home

    config = EngineConfig(
        model=str(hf_dir), served_model_name="bench", port=free_port(), enforce_eager=True
    )
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "vllm.log"
        env = engine_env(config, default_home())
        with child(config.command(), log, ready=config.base_url + "/health", env=env,
                   timeout=900):  # fmt: skip
            return asyncio.run(_vllm_runs(config.base_url, "bench", args))


def measure(args: argparse.Namespace) -> Results:
    from edge.settings import EdgeSettings

    settings = EdgeSettings()
    model_dir = args.model_dir or settings.resolved_edge_model_dir()
    hf_dir = args.hf_dir or settings.models_dir / "smollm2-135m-instruct-hf"
    runs: dict[str, Any] = {}
    progress(f"tier ({args.slots} slots) ...")
    runs["tier"] = asyncio.run(_tier(model_dir, args, args.slots))
    progress("tier, a slot per stream ...")
    runs["tier, a slot each"] = asyncio.run(_tier(model_dir, args, None))
    progress(f"tier, engine (og.Engine, {args.batch} slots) ...")
    runs["tier, engine"] = asyncio.run(_tier(model_dir, args, args.batch, "engine"))
    progress(f"tier, steps (continuous, {args.batch} rows) ...")
    runs["tier, steps"] = asyncio.run(_tier(model_dir, args, args.batch, "steps"))
    if not args.no_vllm:
        progress(f"vLLM CPU engine on {hf_dir} (starting: minutes) ...")
        runs["vllm"] = _vllm(hf_dir, args)
    return {
        "model_dir": str(model_dir),
        "hf_dir": str(hf_dir),
        "streams": args.streams,
        "tokens": args.tokens,
        "threads": args.threads,
        "slots": args.slots,
        "batch": args.batch,
        "runs": runs,
        "ratios": ratios(runs),
    }


def ratios(runs: dict[str, Any]) -> dict[str, Any]:
    """Each tier against vLLM, against the one-generation-per-slot ``tier`` and against
    itself at 1 stream, per concurrency."""
    out: dict[str, Any] = {}
    for system in TIERS:
        own = runs.get(system, {})
        alone = own.get("1")
        for streams, r in own.items():
            row: dict[str, float] = {}
            if alone is not None:
                row["tokens_per_s_vs_1_stream"] = round(
                    r["tokens_per_s"] / alone["tokens_per_s"], 2
                )
                row["ttft_p99_vs_1_stream"] = round(
                    r["ttft_p99_ms"] / max(1, alone["ttft_p99_ms"]), 2
                )
            if system != "tier" and (t := runs.get("tier", {}).get(streams)) is not None:
                row["tokens_per_s_vs_tier"] = round(r["tokens_per_s"] / t["tokens_per_s"], 2)
            if (v := runs.get("vllm", {}).get(streams)) is not None:
                row["tokens_per_s_vs_vllm"] = round(r["tokens_per_s"] / v["tokens_per_s"], 2)
            out.setdefault(system, {})[streams] = row
    return out


def table(results: Results) -> str:
    lines = [
        f"{results['tokens']} greedy tokens per request, {results['threads']} threads, "
        f"tier slots {results['slots']}",
        f"{'system':<20}{'streams':>8}{'tok/s':>9}{'TTFT p50':>10}{'TTFT p99':>10}"
        f"{'÷ tier':>8}{'÷ vLLM':>8}",
    ]

    def x(value: float | None) -> str:
        return "" if value is None else f"{value:.2f}x"

    for system, by_streams in results["runs"].items():
        for streams, r in by_streams.items():
            row = results["ratios"].get(system, {}).get(streams, {})
            lines.append(
                f"{system:<20}{streams:>8}{r['tokens_per_s']:>9.1f}{r['ttft_p50_ms']:>10}"
                f"{r['ttft_p99_ms']:>10}{x(row.get('tokens_per_s_vs_tier')):>8}"
                f"{x(row.get('tokens_per_s_vs_vllm')):>8}"
            )
    return "\n".join(lines)


def plot(results: Results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for system, by_streams in results["runs"].items():
        xs = [int(s) for s in by_streams]
        left.plot(xs, [r["tokens_per_s"] for r in by_streams.values()], "o-", label=system)
        right.plot(xs, [r["ttft_p99_ms"] for r in by_streams.values()], "o-", label=system)
    left.set(xlabel="concurrent streams", ylabel="output tokens/s (aggregate)", xscale="log")
    right.set(xlabel="concurrent streams", ylabel="time to first token p99 (ms)", xscale="log")
    left.legend()
    fig.suptitle(
        f"edge model vs vLLM CPU, {results['tokens']} tokens, {results['threads']} threads"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--streams", type=lambda s: [int(x) for x in s.split(",")],
                        default=[1, 4, 8, 16], help="concurrencies, comma-separated")  # fmt: skip
    parser.add_argument("--tokens", type=int, default=64, help="greedy tokens per request")
    parser.add_argument("--threads", type=int, default=2, help="LOCAL__THREADS")
    parser.add_argument("--slots", type=int, default=2, help="the tier's LOCAL__MAX_CONCURRENCY")
    parser.add_argument(
        "--batch", type=int, default=8, help="the batched tiers' slots (their batch's rows)"
    )
    parser.add_argument("--no-vllm", action="store_true", help="skip the vLLM reference")
    parser.add_argument("--model-dir", type=Path, default=None, help="default: the edge's")
    parser.add_argument("--hf-dir", type=Path, default=None, help="vLLM's model folder")


def main() -> None:
    run_bench("edge_model", __doc__, measure, arguments=arguments, table=table, plot=plot)


if __name__ == "__main__":
    main()
