"""Cache quality: would the cache serve a wrong answer? edgecore's decision vs cosine.

    .venv/bin/python -m bench.cache_quality [--limit N]

On the QQP pairs that the verifier never saw (the 10 % test split of
``../shared/data/cache/qqp_pairs.jsonl``; labels are human and noisy, negatives are hard) it
reports precision, recall and false-hit rate of edgecore's decision for several false-hit
budgets (``delta``), with the MLP verifier alone (the default) and stacked with the
cross-encoder (``CACHE__CROSS_ENCODER``), the MLP's for budgets crossed with candidate
floors (``CACHE__CANDIDATE_FLOOR``), next to fixed cosine thresholds on the same pairs,
the alternative a plain semantic cache (GPTCache, RedisVL) offers. The GPTCache paraphrase
set (all true paraphrases) measures recall on easier, ChatGPT-style rewrites. Prints a
table, writes JSON and a PNG (precision-recall curves with the decision points).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import Results, progress, run_bench
from edge.cache.eval import COSINE_THRESHOLDS, curve, decide_pair, embed_text, load_pairs, rates
from edge.cache.loading import load_matcher
from edge.cache.match import Matcher
from edge.embedder import Embedder
from edge.settings import EdgeSettings
from tools.prepare.pair_split import split

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "cache"
DELTAS = (0.01, 0.02, 0.05, 0.1, 0.2)
# Candidate floors (cosine) crossed with budgets: raising the floor drops the low-cosine
# neighbours, which blind readers call wrong more often than QQP does (README).
FLOORS = (0.80, 0.85, 0.88, 0.90, 0.92, 0.94)
FLOOR_DELTAS = (0.05, 0.1, 0.2)


def scored(
    pairs: list[tuple[str, str, int]], embedder: Embedder
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    texts_a = [embed_text(a) for a, _, _ in pairs]
    texts_b = [embed_text(b) for _, b, _ in pairs]
    va = np.concatenate([embedder.embed(texts_a[i : i + 64]) for i in range(0, len(pairs), 64)])
    vb = np.concatenate([embedder.embed(texts_b[i : i + 64]) for i in range(0, len(pairs), 64)])
    labels = np.array([label for _, _, label in pairs])
    return va, vb, labels


def decisions(
    pairs: list[tuple[str, str, int]],
    va: np.ndarray,
    vb: np.ndarray,
    matcher: Matcher,
    embedder: Embedder,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The matcher's decision per pair (``decide_pair``: with the respelled second look):
    served, verifier score, confidence.

    A fresh entry (no history, no exploration) is served at budget ``delta`` exactly when
    its confidence is at least ``1 - delta`` (``Matcher.decide``), so one pass gives the
    decision at every budget: ``confidence >= 1 - delta``.
    """
    served = np.zeros(len(pairs), dtype=bool)
    score = np.zeros(len(pairs), dtype=np.float32)
    conf = np.zeros(len(pairs), dtype=np.float64)

    def embed(text: str) -> np.ndarray:
        return embedder.embed([text])[0]

    for i, (a, b, _) in enumerate(pairs):
        match = decide_pair(matcher, embed, (a, va[i]), (b, vb[i]))
        served[i], score[i], conf[i] = match.serve, match.score, match.confidence
    return served, score, conf


def evaluate(name: str, pairs: list[tuple[str, str, int]], embedder: Embedder,
             variants: dict[str, Matcher]) -> dict[str, Any]:  # fmt: skip
    progress(f"{name}: embedding {len(pairs)} pairs ...")
    va, vb, labels = scored(pairs, embedder)
    cosine = np.einsum("ij,ij->i", va, vb)
    result: dict[str, Any] = {"rows": len(pairs), "positives": int(labels.sum()), "delta": {}}
    for variant, base in variants.items():
        progress(f"{name}: {variant} decisions ...")
        served, scores, conf = decisions(pairs, va, vb, base, embedder)
        assert (served == (conf >= 1.0 - base.policy.delta)).all()  # the identity relied on
        result["delta"][variant] = {
            str(delta): rates(conf >= 1.0 - delta, labels) for delta in DELTAS
        }
        grid = [round(i / 100, 2) for i in range(1, 100)]
        result[f"curve/{variant}"] = curve(scores, labels, grid)
        if variant == "mlp":  # the floor grid, from a decision that floors nothing itself
            anywhere = base.with_policy(floor=0.0)
            _, _, conf = decisions(pairs, va, vb, anywhere, embedder)
            result["floors"] = {
                f"{delta}:{floor:.2f}": rates((conf >= 1.0 - delta) & (cosine >= floor), labels)
                for delta in FLOOR_DELTAS
                for floor in FLOORS
            }
    result["cosine"] = curve(cosine, labels, COSINE_THRESHOLDS)
    return result


def table(results: dict[str, Any]) -> str:
    lines = []
    for name, r in results["sets"].items():
        lines.append(f"{name}: {r['rows']} pairs, {r['positives']} same-question")
        lines.append(f"  {'decision':<30}{'precision':>10}{'recall':>8}{'false-hit':>10}")
        for variant, by_delta in r["delta"].items():
            for delta, d in by_delta.items():
                lines.append(
                    f"  {variant + ' delta=' + delta:<30}{d['precision']:>10.3f}"
                    f"{d['recall']:>8.3f}{d['false_hit_rate']:>10.4f}"
                )
        for config, d in r.get("floors", {}).items():
            lines.append(
                f"  {'mlp delta:floor=' + config:<30}{d['precision']:>10.3f}"
                f"{d['recall']:>8.3f}{d['false_hit_rate']:>10.4f}"
            )
        for c in r["cosine"]:
            if c["threshold"] in (0.85, 0.9, 0.95):
                lines.append(
                    f"  {'cosine >= ' + str(c['threshold']):<30}{c['precision']:>10.3f}"
                    f"{c['recall']:>8.3f}{c['false_hit_rate']:>10.4f}"
                )
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = results["sets"]["qqp-test"]
    fig, ax = plt.subplots(figsize=(7, 5))
    curves = {"cosine": "cosine threshold"} | {
        f"curve/{v}": f"{v} verifier score" for v in r["delta"]
    }
    for key, label in curves.items():
        pts = [(c["recall"], c["precision"]) for c in r[key] if c["hits"]]
        line = ax.plot(*zip(*pts, strict=True), label=label)[0]
        variant = key.removeprefix("curve/")
        for delta, d in r["delta"].get(variant, {}).items():
            ax.scatter(d["recall"], d["precision"], zorder=3, color=line.get_color())
            ax.annotate(f"δ={delta}", (d["recall"], d["precision"]), fontsize=8,
                        xytext=(4, -10), textcoords="offset points")  # fmt: skip
    ax.axhline(0.95, color="grey", linestyle="--", linewidth=1)
    ax.axvline(0.40, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("recall (same questions served)")
    ax.set_ylabel("precision (served answers that are right)")
    ax.set_title("QQP held-out pairs: edgecore decision vs cosine thresholds")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--limit", type=int, default=None, help="pairs per set")


def run_all(args: argparse.Namespace) -> Results:
    qqp = args.data / "qqp_pairs.jsonl"
    if not qqp.exists():
        raise SystemExit(f"no evaluation data at {args.data} (../shared/data/cache)")
    settings = EdgeSettings()
    embedder = Embedder(settings.embed_model_dir(), threads=2)
    matcher = load_matcher(settings.with_cache(cross_encoder=False))
    variants = {"mlp": matcher}
    if matcher.verifier is not None:
        # Every candidate read: the curve needs the stack's own score, not the band's bound.
        stacked = load_matcher(settings.with_cache(cross_encoder=True, cross_encoder_band=False))
        if stacked.blocking:
            variants["mlp+cross-encoder"] = stacked
    test = [p for p in load_pairs(qqp) if split(p[0], p[1]) == "test"][: args.limit]
    sets = {"qqp-test": test}
    paraphrases = args.data / "paraphrases_gptcache_mock.jsonl"
    if paraphrases.exists():
        sets["gptcache-paraphrases"] = load_pairs(paraphrases, args.limit)
    return {
        "verifier": matcher.verifier.meta if matcher.verifier else None,
        "sets": {name: evaluate(name, pairs, embedder, variants) for name, pairs in sets.items()},
    }


def main() -> None:
    run_bench("cache_quality", __doc__, run_all, arguments=arguments, plot=plot, table=table)


if __name__ == "__main__":
    main()
