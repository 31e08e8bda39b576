"""The edge model's runtime, three ways, on this machine: what a batched tier can build on.

    .venv/bin/python -m bench.edge_model_runtime [--prompts 8] [--tokens 64] [--threads 2]
        [--slots 2]

Issue 34 asks for concurrent edge requests to share decode steps. Before building a tier on
onnxruntime-genai's ``Engine``, this measures the runtime directly (no HTTP, no tier), with
the edge's model (``LOCAL__MODEL_DIR``, by default SmolLM2-135M INT8) and ``--prompts``
prompts of ``--tokens`` greedy tokens each:

- ``one at a time``: one ``og.Generator`` after another (``--threads`` intra-op threads);
- ``slots``: ``--slots`` generators at once on threads of this process, as the tier ran
  until stop 41 (``LOCAL__MAX_CONCURRENCY``, default 2);
- ``static batch``: every prompt in one ``og.Generator`` with ``batch_size`` = prompts
  (left-padded): one decode step for all, but the rows start together and share options;
- ``engine``: ``og.Engine`` with every prompt submitted at once, driven from its owner thread
  (it refuses calls from any other), batching up to its configured batch size;
- ``edge tier``: the edge's own ``LocalModel`` (its model process, ``--slots`` at once), the
  prompts streamed on the event loop whose lag is measured.

For each: aggregate tokens/s, the time to each prompt's first token (p50, max), and the lag
of an asyncio loop on the main thread meanwhile (how late a 1 ms timer fires, p99 and max).
That loop stands for the edge's event loop, which serves cache hits and forwarded streams
while the model generates: a runtime call that holds the GIL delays it by a decode step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import Results, progress, run_bench

MODES = ("one at a time", "slots", "static batch", "engine", "edge tier")


def _load(model_dir: Path, threads: int) -> tuple[Any, Any]:
    """The model as the edge's model process loads it (one place says how)."""
    from edge.tiers.local_worker import Options, load_model

    return load_model(Options(str(model_dir), threads, "cpu", 1, 2048))


def _prompts(tokenizer: Any, n: int) -> list[Any]:
    out = []
    for i in range(n):
        chat = [{"role": "user", "content": f"Write a short story about lighthouse number {i}."}]
        text = tokenizer.apply_chat_template(json.dumps(chat), add_generation_prompt=True)
        out.append(tokenizer.encode(text))
    return out


def _generate(model: Any, prompt: Any, tokens: int, first: Callable[[], None]) -> int:
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + tokens, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt)
    n = 0
    while not generator.is_done():
        generator.generate_next_token()
        n += 1
        if n == 1:
            first()
    return n


def _slots(model: Any, prompts: list[Any], tokens: int, k: int) -> tuple[int, list[float]]:
    t0, firsts = time.perf_counter(), []

    def one(prompt: Any) -> int:
        return _generate(model, prompt, tokens, lambda: firsts.append(time.perf_counter() - t0))

    with ThreadPoolExecutor(k) as pool:
        return sum(pool.map(one, prompts)), firsts


def _static_batch(model: Any, prompts: list[Any], tokens: int, pad: int) -> tuple[int, list[float]]:
    """Every prompt in one ``og.Generator`` of that batch size, left-padded with the model's
    pad token (the runtime masks it): one decode step serves all of them. Throughput only:
    the rows start together and share search options, and a padded row's greedy tokens
    drift from the same prompt's alone (docs/models.md)."""
    import onnxruntime_genai as og

    width = max(len(p) for p in prompts)
    batch = np.full((len(prompts), width), pad, dtype=np.int32)
    for row, prompt in enumerate(prompts):
        batch[row, width - len(prompt) :] = prompt
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=width + tokens, do_sample=False, batch_size=len(prompts))
    t0 = time.perf_counter()
    generator = og.Generator(model, params)
    generator.append_tokens(batch)
    steps, first = 0, 0.0
    while not generator.is_done() and steps < tokens:
        generator.generate_next_token()
        steps += 1
        if steps == 1:  # every row gets its first token at the first step
            first = time.perf_counter() - t0
    return steps * len(prompts), [first] * len(prompts)


def _engine(model: Any, prompts: list[Any], tokens: int) -> tuple[int, list[float], int]:
    """Every prompt submitted at once; the engine's own thread drives it to the end."""
    import onnxruntime_genai as og

    out: dict[str, Any] = {}

    def owner() -> None:  # Engine calls must come from the thread that made it
        engine = og.Engine(model)
        out["batch"] = engine.get_capabilities().configured_max_batch_size
        events = engine.create_event_buffer(256)
        t0, firsts, count = time.perf_counter(), {}, 0
        requests = []
        for prompt in prompts:
            request = engine.create_request()
            turn = og.TurnOptions(request)
            turn.set_max_generated_tokens(tokens)
            turn.set_do_sample(False)
            request.begin_turn(np.asarray(prompt, dtype=np.int32), turn)
            requests.append(request)
        while engine.has_pending_requests():
            for event in engine.run(events) or []:
                if int(event.flags) & int(og.EngineEventFlags.TOKEN):
                    count += 1
                    # The event's request is the object created above (kept alive there).
                    firsts.setdefault(id(event.request), time.perf_counter() - t0)
        assert set(firsts) <= {id(r) for r in requests}, "events name requests by identity"
        out.update(count=count, firsts=list(firsts.values()))

    thread = threading.Thread(target=owner)
    thread.start()
    thread.join()
    return out["count"], out["firsts"], out["batch"]


async def _tier(model_dir: Path, prompts: int, tokens: int, threads: int, slots: int) -> Any:
    """Every prompt streamed at once through the edge's LocalModel; the loop's lag meanwhile."""
    from edge.tiers.local_model import Generation, LocalModel
    from shared.schemas import ChatCompletionRequest

    model = await asyncio.to_thread(
        LocalModel, model_dir, threads=threads, max_concurrency=slots, queue_timeout_s=600,
        context_tokens=2048, max_new_tokens=tokens,
    )  # fmt: skip
    try:
        t0, done, firsts = time.perf_counter(), threading.Event(), []

        async def one(i: int) -> int:
            content = f"Write a short story about lighthouse number {i}."
            messages = [{"role": "user", "content": content}]
            req = ChatCompletionRequest.model_validate(
                {"model": "edge", "temperature": 0, "messages": messages}
            )
            gen, n = Generation(), 0
            async for _ in model.stream(req, gen):
                n += 1
                if n == 1:
                    firsts.append(time.perf_counter() - t0)
            return gen.completion_tokens

        lagging = asyncio.ensure_future(_lags(done))
        counts = await asyncio.gather(*(one(i) for i in range(prompts)))
        wall = time.perf_counter() - t0
        done.set()
        return sum(counts), firsts, wall, await lagging
    finally:
        await asyncio.to_thread(model.close)


async def _lags(done: threading.Event) -> list[float]:
    """How late a 1 ms timer fires, again and again until ``done`` (s): an event loop's lag.

    At least once: a short run can end before this loop starts (seen in a clean clone: a
    run of 2 prompts x 4 tokens left no sample, and its percentile failed)."""
    lags = []
    while True:
        t = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(time.perf_counter() - t - 0.001)
        if done.is_set():
            return lags


def _beside(work: Callable[[], Any]) -> tuple[Any, float, list[float]]:
    """Run ``work`` on a thread while an event loop on this one measures its own lag: the
    result, the wall time, and the lags."""
    done, result = threading.Event(), {}

    def run() -> None:
        try:
            result["value"] = work()
        finally:
            done.set()

    t0 = time.perf_counter()
    threading.Thread(target=run).start()
    lags = asyncio.run(_lags(done))
    return result["value"], time.perf_counter() - t0, lags


def measure(args: argparse.Namespace) -> Results:
    from edge.settings import EdgeSettings

    model_dir = args.model_dir or EdgeSettings().resolved_edge_model_dir()
    model, tokenizer = _load(model_dir, args.threads)
    prompts = _prompts(tokenizer, args.prompts)
    idle = threading.Event()
    threading.Timer(2.0, idle.set).start()
    alone = asyncio.run(_lags(idle))  # the loop's lag with nothing beside it
    runs: dict[str, Any] = {}
    batch = None
    for mode in MODES:
        progress(f"{mode} ...")
        if mode == "edge tier":
            count, firsts, wall, lags = asyncio.run(
                _tier(model_dir, args.prompts, args.tokens, args.threads, args.slots)
            )
        elif mode == "static batch":
            pad = json.loads((Path(model_dir) / "genai_config.json").read_text())["model"].get(
                "pad_token_id", 0
            )
            (count, firsts), wall, lags = _beside(
                partial(_static_batch, model, prompts, args.tokens, pad)
            )
        elif mode == "engine":
            (count, firsts, batch), wall, lags = _beside(
                lambda: _engine(model, prompts, args.tokens)
            )
        else:
            k = 1 if mode == "one at a time" else args.slots
            (count, firsts), wall, lags = _beside(partial(_slots, model, prompts, args.tokens, k))
        runs[mode] = {
            "tokens": count,
            "seconds": round(wall, 2),
            "tokens_per_s": round(count / wall, 1),
            "first_token_p50_ms": round(float(np.percentile(firsts, 50)) * 1000),
            "first_token_max_ms": round(max(firsts) * 1000),
            "loop_lag_p99_ms": round(float(np.percentile(lags, 99)) * 1000, 1),
            "loop_lag_max_ms": round(max(lags) * 1000, 1),
        }
    base = runs["slots"]["tokens_per_s"]
    return {
        "model_dir": str(model_dir),
        "prompts": args.prompts,
        "tokens": args.tokens,
        "threads": args.threads,
        "slots": args.slots,
        "engine_batch": batch,
        "loop_lag_alone_p99_ms": round(float(np.percentile(alone, 99)) * 1000, 1),
        "runs": runs,
        "engine_vs_slots_tokens_per_s": round(runs["engine"]["tokens_per_s"] / base, 2),
    }


def table(results: Results) -> str:
    lines = [
        f"{results['prompts']} prompts x {results['tokens']} tokens, {results['threads']} "
        f"threads, {results['slots']} slots, engine batch {results['engine_batch']}",
        f"{'mode':<15}{'tok/s':>8}{'1st p50 ms':>12}{'1st max ms':>12}"
        f"{'lag p99 ms':>12}{'lag max ms':>12}",
    ]
    for mode, r in results["runs"].items():
        lines.append(
            f"{mode:<15}{r['tokens_per_s']:>8.1f}{r['first_token_p50_ms']:>12}"
            f"{r['first_token_max_ms']:>12}{r['loop_lag_p99_ms']:>12.1f}"
            f"{r['loop_lag_max_ms']:>12.1f}"
        )
    lines.append(f"event loop lag alone: p99 {results['loop_lag_alone_p99_ms']} ms")
    lines.append(f"engine / slots, tokens per second: {results['engine_vs_slots_tokens_per_s']}x")
    return "\n".join(lines)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prompts", type=int, default=8, help="prompts, all at once")
    parser.add_argument("--tokens", type=int, default=64, help="greedy tokens per prompt")
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads (LOCAL__THREADS)")
    parser.add_argument("--slots", type=int, default=2, help="LOCAL__MAX_CONCURRENCY")
    parser.add_argument("--model-dir", type=Path, default=None, help="default: the edge's")


def main() -> None:
    run_bench("edge_model_runtime", __doc__, measure, arguments=arguments, table=table)


if __name__ == "__main__":
    main()
