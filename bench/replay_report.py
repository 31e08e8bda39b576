"""The replay's records (``Item``: what was scheduled; ``Outcome``: what came back) and its
report: hit rates and latency per tier, the table and the plot.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import summary

TIERS = ("cache", "edge", "core")


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
