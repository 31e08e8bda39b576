"""Realistic traffic: public prompts with repeats replayed against a full ``edgecore up``.

    .venv/bin/python -m bench.replay [--requests 200] [--clients 4] [--max-tokens 64]
        [--repeat-share 0.3] [--paraphrase-share 0.5] [--baseline 40] [--seed 0]

Prompts come from ``../shared/data/prompts`` (ShareGPT first prompts, Arena-Hard, MT-Bench
first turns, Dolly instructions; one source picked uniformly, then one prompt of it) and
never leave that folder. ``--repeat-share`` of the requests ask again something asked
earlier in the run: ``--paraphrase-share`` of those are paraphrases (``text_b`` of
``../shared/data/cache/paraphrases_gptcache_mock.jsonl`` after its ``text_a`` was asked),
the rest word-for-word repeats. Every request is what an application would send: model
``auto`` (the edge's router picks the tier), ``temperature`` 0, streaming, ``max_tokens``
64, and a system prompt asking for brief answers (``--system``: only complete answers are
cached, and at 64 tokens most answers to these prompts would be cut). A repeat comes at
least ``4 x clients`` requests after its original.

Reports the tier mix (cache / edge / core), the cache hit rate (of all requests, of the
repeats whose original answer was complete and so stored, and hits on first-time prompts,
which are either near-duplicates in the data or false hits), and TTFT and end-to-end
p50/p95/p99 per tier. ``--baseline`` other prompts from the same sources (never sent in the
replay, so not in vLLM's prefix cache) are then sent straight to the core (vLLM alone, what
one would run instead) at the same concurrency for comparison.
The stack uses a fresh cache index (dropped at the end), so earlier runs do not count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    Results,
    load,
    progress,
    run_bench,
    shared_data,
    stack,
    stream_chat,
    summary,
)
from bench.replay_report import Item, Outcome, plot, report, table

CORE_MODEL = "smollm2-135m-instruct"
# Only complete answers (finish_reason "stop") are cached; at max_tokens 64 most answers to
# these prompts would be cut, and no repeat could hit. Applications set such a prompt too.
SYSTEM = "Answer briefly, in one or two sentences."


def read_prompts(max_chars: int) -> dict[str, list[str]]:
    folder = shared_data("prompts")

    def lines(name: str) -> list[dict[str, Any]]:
        with (folder / name).open() as f:
            return [json.loads(line) for line in f if line.strip()]

    def first_turn(row: dict[str, Any]) -> str:
        turn = row["turns"][0]
        return str(turn["content"] if isinstance(turn, dict) else turn)

    sources = {
        "sharegpt": [r["prompt"] for r in lines("sharegpt_first_prompts.jsonl")],
        "arena_hard": [first_turn(r) for r in lines("arena_hard_questions.jsonl")],
        "mtbench": [first_turn(r) for r in lines("mtbench_questions.jsonl")],
        "dolly": [r["instruction"] for r in lines("dolly_first6400.jsonl")],
    }
    return {k: [p for p in v if 0 < len(p.strip()) <= max_chars] for k, v in sources.items()}


def read_paraphrases() -> list[tuple[str, str]]:
    path = shared_data("cache", "paraphrases_gptcache_mock.jsonl")
    with path.open() as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [(r["text_a"], r["text_b"]) for r in rows if r.get("label") == 1]


def schedule(
    n: int, repeat_share: float, paraphrase_share: float, gap: int, max_chars: int, seed: int
) -> list[Item]:
    """``n`` requests: first-time prompts, then repeats placed at least ``gap`` after theirs."""
    rng = random.Random(seed)
    sources = read_prompts(max_chars)
    repeats = round(n * repeat_share)
    para = round(repeats * paraphrase_share)
    exact = repeats - para
    pairs = rng.sample(read_paraphrases(), para)
    seen: set[str] = set()
    fresh: list[Item] = [Item(a, "fresh", "paraphrase_a") for a, _ in pairs]
    while len(fresh) < n - repeats:
        name = rng.choice(sorted(sources))
        prompt = rng.choice(sources[name])
        if prompt not in seen:
            seen.add(prompt)
            fresh.append(Item(prompt, "fresh", name))
    rng.shuffle(fresh)
    gap = min(gap, len(fresh) // 3)  # small runs: a shorter gap
    head = len(fresh) - gap  # originals sit in the head, so each repeat can follow by `gap`
    for j in range(max(0, head), len(fresh)):
        if fresh[j].source == "paraphrase_a":
            k = rng.choice([k for k in range(head) if fresh[k].source != "paraphrase_a"])
            fresh[j], fresh[k] = fresh[k], fresh[j]
    # Each item gets a position key; a repeat goes somewhere after its original + gap.
    keyed: list[tuple[float, Item]] = [(float(i), item) for i, item in enumerate(fresh)]
    by_text = {item.prompt: i for i, item in enumerate(fresh)}
    last = len(fresh)
    wanted = [(pairs[k][0], pairs[k][1], "paraphrase") for k in range(para)]
    wanted += [(item.prompt, item.prompt, "exact") for item in rng.sample(fresh[:head], exact)]
    for original, text, kind in wanted:
        at = by_text[original]
        keyed.append((rng.uniform(at + gap, last + 0.5), Item(text, kind, fresh[at].source, at)))
    keyed.sort(key=lambda pair: pair[0])
    items = [item for _, item in keyed]
    # originals were indexes into ``fresh``: map them to positions in the final order
    where = {id(item): i for i, item in enumerate(items)}
    for item in items:
        if item.original is not None:
            item.original = where[id(fresh[item.original])]
    return items


def messages(system: str, prompt: str) -> list[dict[str, str]]:
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": prompt}]


def held_out(items: list[Item], n: int, max_chars: int, seed: int) -> list[str]:
    """``n`` prompts from the same sources that the replay never sent (so vLLM's prefix
    cache has not seen them either)."""
    rng = random.Random(seed + 1)
    sources = read_prompts(max_chars)
    used = {item.prompt for item in items}
    out: list[str] = []
    while len(out) < n:
        prompt = rng.choice(sources[rng.choice(sorted(sources))])
        if prompt not in used:
            used.add(prompt)
            out.append(prompt)
    return out


async def replay(
    edge: str, key: str, items: list[Item], clients: int, max_tokens: int, system: str
) -> list[Outcome]:
    headers = {"authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    outcomes: list[Outcome] = []
    t0 = time.perf_counter()
    async with httpx.AsyncClient(limits=limits, timeout=600) as client:

        async def op(i: int) -> None:
            item = items[i]
            body = {
                "model": "auto",
                "temperature": 0,
                "stream": True,
                "max_tokens": max_tokens,
                "messages": messages(system, item.prompt),
            }
            out = Outcome(i, item.kind, item.source, 200)
            try:
                s = await stream_chat(client, edge + "/v1/chat/completions", body, headers)
                out.tier = s.headers.get("x-edgecore-tier", "?")
                out.cache = s.headers.get("x-edgecore-cache", "")
                out.match = s.headers.get("x-edgecore-cache-match", "")
                out.ttft_ms, out.total_ms, out.finish_reason = (
                    s.ttft_ms,
                    s.total_ms,
                    s.finish_reason,
                )
            except (RuntimeError, httpx.HTTPError) as exc:
                out.status, out.error = 0, str(exc)[:300]
            outcomes.append(out)
            done = len(outcomes)
            if done % 10 == 0 or done == len(items):
                mix = Counter(o.tier or "error" for o in outcomes)
                progress(
                    f"  {done}/{len(items)} in {time.perf_counter() - t0:.0f} s: "
                    + ", ".join(f"{k} {v}" for k, v in sorted(mix.items()))
                )

        await load(op, requests=len(items), clients=clients)
    return sorted(outcomes, key=lambda o: o.index)


async def baseline(
    core: str,
    headers: dict[str, str],
    prompts: list[str],
    clients: int,
    max_tokens: int,
    system: str,
) -> dict[str, Any]:
    """The same kind of first-time prompts straight to the core (vLLM), no edge."""
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    ttft: list[float] = []
    total: list[float] = []
    async with httpx.AsyncClient(limits=limits, timeout=600) as client:

        async def op(i: int) -> None:
            body = {
                "model": CORE_MODEL,
                "temperature": 0,
                "stream": True,
                "max_tokens": max_tokens,
                "messages": messages(system, prompts[i]),
            }
            s = await stream_chat(client, core + "/v1/chat/completions", body, headers)
            ttft.append(s.ttft_ms)
            total.append(s.total_ms)

        stats = await load(op, requests=len(prompts), clients=clients)
    return {"ttft": summary(ttft), "total": summary(total), "per_s": stats["per_s"]}


def drop_index(redis_port: int, index: str) -> None:
    from redis import Redis

    with Redis(port=redis_port) as r:
        try:
            r.execute_command("FT.DROPINDEX", index, "DD")
        except Exception:  # the index may not exist (no cacheable answer was stored)
            pass
        keys = list(r.scan_iter(match=f"{index}:*", count=1000))
        if keys:
            r.delete(*keys)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeat-share", type=float, default=0.3)
    parser.add_argument("--paraphrase-share", type=float, default=0.5)
    parser.add_argument("--max-prompt-chars", type=int, default=2000)
    parser.add_argument("--system", default=SYSTEM, help="system prompt ('' for none)")
    parser.add_argument("--baseline", type=int, default=40, help="requests straight to the core")
    parser.add_argument("--seed", type=int, default=0)


def run_all(args: argparse.Namespace) -> Results:
    items = schedule(
        args.requests,
        args.repeat_share,
        args.paraphrase_share,
        4 * args.clients,
        args.max_prompt_chars,
        args.seed,
    )
    index = f"edgecore:bench:replay:{uuid.uuid4().hex[:8]}"
    log = Path(tempfile.mkdtemp(prefix="bench-replay-")) / "up.log"
    progress("starting the stack (Redis, core + vLLM, edge): ~1-2 min ...")
    with stack(log, env={"EDGECORE_EDGE_CACHE__INDEX": index}) as s:
        try:
            progress(f"replaying {len(items)} requests at {args.clients} clients ...")
            outcomes = asyncio.run(
                replay(s.edge, s.key, items, args.clients, args.max_tokens, args.system)
            )
            results: dict[str, Any] = {
                "requests": args.requests,
                "clients": args.clients,
                "max_tokens": args.max_tokens,
                "repeat_share": args.repeat_share,
                "paraphrase_share": args.paraphrase_share,
                "seed": args.seed,
                "system": args.system,
                "report": report(items, outcomes),
                "outcomes": [asdict(o) for o in outcomes],
            }
            if args.baseline:
                fresh = held_out(items, args.baseline, args.max_prompt_chars, args.seed)
                progress(f"baseline: {len(fresh)} new prompts straight to the core ...")
                results["baseline_core_direct"] = asyncio.run(
                    baseline(
                        s.core, s.core_headers, fresh, args.clients, args.max_tokens, args.system
                    )
                )
        finally:
            drop_index(s.ports["redis"], index)
    return results


def main() -> None:
    run_bench("replay", __doc__, run_all, arguments=arguments, plot=plot, table=table)


if __name__ == "__main__":
    main()
