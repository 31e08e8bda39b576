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
from dataclasses import asdict, dataclass
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

TIERS = ("cache", "edge", "core")
CORE_MODEL = "smollm2-135m-instruct"
# Only complete answers (finish_reason "stop") are cached; at max_tokens 64 most answers to
# these prompts would be cut, and no repeat could hit. Applications set such a prompt too.
SYSTEM = "Answer briefly, in one or two sentences."


@dataclass
class Item:
    prompt: str
    kind: str  # fresh | exact | paraphrase
    source: str
    original: int | None = None  # schedule index of what this repeats


@dataclass
class Outcome:
    index: int
    kind: str
    source: str
    status: int
    tier: str = ""
    cache: str = ""
    match: str = ""
    ttft_ms: float = 0.0
    total_ms: float = 0.0
    finish_reason: str | None = None
    error: str = ""


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


def _original(items: list[Item], by_index: dict[int, Outcome], o: Outcome) -> Outcome:
    original = items[o.index].original
    assert original is not None, "only repeats have an original"
    return by_index[original]


def report(items: list[Item], outcomes: list[Outcome]) -> dict[str, Any]:
    ok = [o for o in outcomes if o.status == 200]
    mix = Counter(o.tier for o in ok)
    per_tier: dict[str, Any] = {}
    for tier in TIERS:
        rows = [o for o in ok if o.tier == tier]
        if rows:
            per_tier[tier] = {
                "ttft": summary([o.ttft_ms for o in rows]),
                "total": summary([o.total_ms for o in rows]),
            }
    if ok:
        per_tier["all"] = {
            "ttft": summary([o.ttft_ms for o in ok]),
            "total": summary([o.total_ms for o in ok]),
        }
    by_index = {o.index: o for o in outcomes}
    hits: dict[str, Any] = {}
    for kind in ("exact", "paraphrase"):
        repeats = [o for o in ok if o.kind == kind]
        # the original's answer was stored only if it was complete (finish_reason "stop")
        stored = [o for o in repeats if _original(items, by_index, o).finish_reason == "stop"]
        hits[kind] = {
            "requests": len(repeats),
            "hits": sum(o.tier == "cache" for o in repeats),
            "original_stored": len(stored),
            "hits_when_stored": sum(o.tier == "cache" for o in stored),
        }
        hits[kind]["hit_rate_when_stored"] = (
            round(hits[kind]["hits_when_stored"] / len(stored), 3) if stored else None
        )
    fresh = [o for o in ok if o.kind == "fresh"]
    return {
        "requests": len(outcomes),
        "errors": len(outcomes) - len(ok),
        "error_samples": [o.error for o in outcomes if o.error][:5],
        "tier_mix": {t: mix.get(t, 0) for t in TIERS},
        "tier_share": {t: round(mix.get(t, 0) / max(1, len(ok)), 3) for t in TIERS},
        "cache_hit_rate": round(mix.get("cache", 0) / max(1, len(ok)), 3),
        "repeats": hits,
        "hits_on_first_time_prompts": sum(o.tier == "cache" for o in fresh),
        # x-edgecore-cache: "error" = Redis or the embedder too slow or down, cache bypassed
        "cache_header": dict(Counter(o.cache for o in ok)),
        "complete_answers": round(
            sum(o.finish_reason == "stop" for o in ok if o.tier != "cache")
            / max(1, sum(o.tier != "cache" for o in ok)),
            3,
        ),
        "latency": per_tier,
        "matches": [o.match for o in ok if o.tier == "cache"],
    }


def table(results: dict[str, Any]) -> str:
    r = results["report"]
    lines = [
        f"{r['requests']} requests ({r['errors']} errors), {results['clients']} clients, "
        f"max_tokens {results['max_tokens']}, repeats {results['repeat_share']:.0%} "
        f"(paraphrases {results['paraphrase_share']:.0%} of them)",
        "tier mix: "
        + ", ".join(f"{t} {r['tier_mix'][t]} ({r['tier_share'][t]:.0%})" for t in TIERS),
        f"cache hit rate: {r['cache_hit_rate']:.1%} of all requests; "
        f"complete (storable) answers: {r['complete_answers']:.0%}; "
        f"hits on first-time prompts: {r['hits_on_first_time_prompts']}",
        "x-edgecore-cache: " + ", ".join(f"{k} {v}" for k, v in sorted(r["cache_header"].items())),
    ]
    for kind, h in r["repeats"].items():
        rate = h["hit_rate_when_stored"]
        lines.append(
            f"  {kind} repeats: {h['hits']}/{h['requests']} hits; original stored for "
            f"{h['original_stored']}, of those hit {h['hits_when_stored']}"
            + (f" ({rate:.0%})" if rate is not None else "")
        )
    lines.append(
        f"{'tier':<16}{'n':>5}{'TTFT p50':>10}{'p95':>9}{'p99':>9}"
        f"{'e2e p50':>10}{'p95':>9}{'p99':>9}"
    )
    rows = list(r["latency"].items())
    if "baseline_core_direct" in results:
        rows.append(("core direct*", results["baseline_core_direct"]))
    for tier, s in rows:
        t, e = s["ttft"], s["total"]
        lines.append(
            f"{tier:<16}{t['n']:>5}{t['p50_ms']:>10.1f}{t['p95_ms']:>9.1f}{t['p99_ms']:>9.1f}"
            f"{e['p50_ms']:>10.1f}{e['p95_ms']:>9.1f}{e['p99_ms']:>9.1f}"
        )
    if "baseline_core_direct" in results:
        lines.append(
            "* other prompts, same sources, straight to the core (vLLM alone), same clients"
        )
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    r = results["report"]
    outcomes = results["outcomes"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    kinds = ("fresh", "exact", "paraphrase")
    bottom = np.zeros(len(kinds))
    for tier, color in zip(TIERS, ("tab:green", "tab:blue", "tab:orange"), strict=True):
        counts = np.array(
            [sum(o["tier"] == tier and o["kind"] == k for o in outcomes) for k in kinds]
        )
        axes[0].bar(kinds, counts, bottom=bottom, label=tier, color=color)
        bottom += counts
    axes[0].set_title("requests by kind and the tier that answered")
    axes[0].legend(fontsize=8)
    rows = list(r["latency"].items())
    if "baseline_core_direct" in results:
        rows.append(("core direct", results["baseline_core_direct"]))
    x = np.arange(len(rows))
    width = 0.25
    for ax, metric, title in (
        (axes[1], "ttft", "TTFT (ms)"),
        (axes[2], "total", "end to end (ms)"),
    ):
        for i, q in enumerate(("p50", "p95", "p99")):
            ax.bar(x + i * width, [s[metric][f"{q}_ms"] for _, s in rows], width, label=q)
        ax.set_xticks(x + width, [name for name, _ in rows])
        ax.set_yscale("log")
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.suptitle(
        f"Replay: {r['requests']} requests, {results['clients']} clients, "
        f"{results['repeat_share']:.0%} repeats; cache hit rate {r['cache_hit_rate']:.1%}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


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
    with stack(log, env={"EDGECORE_EDGE_CACHE_INDEX": index}) as s:
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
