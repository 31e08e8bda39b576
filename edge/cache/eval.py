"""``edgecore eval cache``: would the cache serve ``text_a``'s answer to ``text_b``?

Reads JSON lines ``{"text_a", "text_b", "label"}`` (label 1: the same question). Each pair
runs the real decision as if ``text_a`` were cached and ``text_b`` asked: the edge's
embedding text, the shipped verifier and the configured match policy (``delta``, floor),
without partitions (every pair shares one) and without exploration. Reports precision,
recall, false-hit rate (false hits / negatives) and F1 of that decision, its latency per
pair (embedding of ``text_b`` included), and the precision/recall of plain cosine
thresholds on the same pairs, the baseline a fixed-threshold cache would get. Every false
hit (a pair labelled different that the decision serves) is kept with its scores, and
``--show-false-hits`` lists them: what the cache would lie about.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from edge.cache.decision import Candidate, Match
from edge.cache.keys import conversation_text
from edge.cache.match import Matcher
from edge.embedder import Embedder
from shared.schemas import Message

COSINE_THRESHOLDS = [round(0.5 + i / 100, 2) for i in range(50)]


def load_pairs(path: Path, limit: int | None = None) -> list[tuple[str, str, int]]:
    pairs: list[tuple[str, str, int]] = []
    with path.open() as f:  # not str.splitlines(): texts contain U+2028 and friends
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                a, b, label = row["text_a"], row["text_b"], int(row["label"])
                if not isinstance(a, str) or not isinstance(b, str) or label not in (0, 1):
                    raise ValueError("text_a/text_b must be strings and label 0 or 1")
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(
                    f"{path}:{n}: not a {{text_a, text_b, label}} pair: {exc}"
                ) from None
            pairs.append((a, b, label))
            if limit is not None and len(pairs) >= limit:
                break
    if not pairs:
        raise ValueError(f"{path}: no pairs")
    return pairs


def embed_text(text: str) -> str:
    """What the edge embeds for a one-turn conversation."""
    return conversation_text([Message(role="user", content=text)], 1)


def decide_pair(
    matcher: Matcher,
    embed: Callable[[str], np.ndarray],
    cached: tuple[str, np.ndarray],
    asked: tuple[str, np.ndarray],
) -> Match:
    """The edge's decision on one (cached, asked) pair, as ``CacheStep`` makes it: the
    cached question stored under its respelled vector when it has typos, the asked words,
    then, on a miss, the asked question respelled, then the one sentence of the asked
    message that asks (``Matcher.question_in``). ``embed``: one embedding text's vector
    (only asked for the later looks). Of the looks, the most confident: a refused look and
    one that serves at this budget are told apart by confidence, so one pass still gives
    the decision at every budget (``bench.cache_quality``)."""
    (a, va), (b, vb) = cached, asked
    if (stored := matcher.respelling(a)) is not None:
        va = embed(embed_text(stored.text))
    first = matcher.decide(vb, b, [Candidate("a", float(va @ vb), a, va)])
    respelled = None if first.serve else matcher.respelling(b)
    if respelled is not None and respelled.confirmed_by(a):
        v2 = embed(embed_text(respelled.text))
        second = matcher.decide_respelled(v2, respelled, [Candidate("a", float(va @ v2), a, va)])
        first = second if second.confidence > first.confidence else first
    question = None if first.serve else matcher.question_in(b)
    if question is None:
        return first
    v3 = embed(embed_text(question))
    third = matcher.decide_in_context(v3, question, b, [Candidate("a", float(va @ v3), a, va)])
    return third if third.confidence > first.confidence else first


def rates(served: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    tp = int((served & (labels == 1)).sum())
    fp = int((served & (labels == 0)).sum())
    positives, negatives = int((labels == 1).sum()), int((labels == 0).sum())
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / positives if positives else 0.0
    return {
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "false_hit_rate": round(fp / negatives, 4) if negatives else 0.0,
        "f1": round(2 * precision * recall / (precision + recall), 4) if tp else 0.0,
        "hits": tp + fp,
        "false_hits": fp,
    }


def curve(scores: np.ndarray, labels: np.ndarray, thresholds: list[float]) -> list[dict[str, Any]]:
    return [{"threshold": t, **rates(scores >= t, labels)} for t in thresholds]


def operating_points(
    scores: np.ndarray, labels: np.ndarray, recall: float = 0.40, precision: float = 0.95
) -> dict[str, float]:
    """Precision where the recall first reaches ``recall``, and the highest recall whose
    precision is at least ``precision``, over a threshold at every distinct score."""
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order].astype(np.float64)
    last = np.r_[s[1:] != s[:-1], True]  # a threshold serves every pair of its score
    tp, served = np.cumsum(y)[last], np.arange(1, len(y) + 1)[last]
    rec, prec = tp / max(float(y.sum()), 1.0), tp / served
    reached = np.nonzero(rec >= recall)[0]
    good = prec >= precision
    return {
        f"precision_at_recall_{recall:.2f}": round(float(prec[reached[0]]), 4)
        if len(reached)
        else 0.0,
        f"recall_at_precision_{precision:.2f}": round(float(rec[good].max()), 4)
        if good.any()
        else 0.0,
    }


def evaluate(
    pairs: list[tuple[str, str, int]], embedder: Embedder, matcher: Matcher
) -> dict[str, Any]:
    labels = np.array([label for _, _, label in pairs])
    cached = [embed_text(a) for a, _, _ in pairs]
    # The cache side is embedded in batches (it was stored earlier); the asking side one by
    # one and timed, as a request would be.
    vec_a = np.concatenate([embedder.embed(cached[i : i + 64]) for i in range(0, len(cached), 64)])
    served = np.zeros(len(pairs), dtype=bool)
    cosine = np.zeros(len(pairs), dtype=np.float32)
    verifier = np.zeros(len(pairs), dtype=np.float32)
    elapsed = np.zeros(len(pairs))
    false_hits: list[dict[str, Any]] = []
    t_all = time.perf_counter()
    for i, (a, b, label) in enumerate(pairs):
        t = time.perf_counter()
        vb = embedder.embed([embed_text(b)])[0]
        cos = float(np.dot(vec_a[i], vb))
        match = decide_pair(matcher, lambda t: embedder.embed([t])[0], (a, vec_a[i]), (b, vb))
        elapsed[i] = time.perf_counter() - t
        served[i], cosine[i], verifier[i] = match.serve, cos, match.score
        if match.serve and label == 0:
            false_hits.append(
                {"line": i + 1, "cached": a, "asked": b, "cosine": round(cos, 4),
                 "verifier_score": round(match.score, 4),
                 "confidence": round(match.confidence, 4), "reason": match.reason,
                 "steps": [str(step) for step in match.steps]}
            )  # fmt: skip
        if (i + 1) % 2000 == 0:
            rate = (i + 1) / (time.perf_counter() - t_all)
            print(f"  {i + 1}/{len(pairs)} pairs ({rate:.0f}/s)", file=sys.stderr, flush=True)
    result: dict[str, Any] = {
        "rows": len(pairs),
        "positives": int(labels.sum()),
        "verifier": matcher.verifier.meta if matcher.verifier else None,
        "policy": {
            "false_hit_budget": matcher.policy.delta,
            "candidate_floor": matcher.policy.floor,
            "threshold": round(matcher.threshold, 4),
            "cross_encoder": matcher.blocking,
        },
        "decision": {
            **rates(served, labels),
            "p50_ms": round(float(np.percentile(elapsed, 50)) * 1000, 3),
            "p99_ms": round(float(np.percentile(elapsed, 99)) * 1000, 3),
        },
        "cosine": curve(cosine, labels, COSINE_THRESHOLDS),
        "false_hits": false_hits,
    }
    if matcher.verifier is not None:
        grid = [round(i / 100, 2) for i in range(1, 100)]
        result["verifier_curve"] = curve(verifier, labels, grid)
    return result


def run(
    pairs_file: Path, limit: int | None, embedder: Embedder, matcher: Matcher, out: Path | None
) -> dict[str, Any]:
    result = {"data": str(pairs_file), **evaluate(load_pairs(pairs_file, limit), embedder, matcher)}
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
    return result


def report(result: dict[str, Any], *, show_false_hits: bool = False) -> str:
    d = result["decision"]
    lines = [
        f"{result['rows']} pairs, {result['positives']} same-question; policy {result['policy']}",
        f"{'':24}{'precision':>10}{'recall':>8}{'false-hit':>10}{'f1':>7}",
        f"{'edgecore decision':24}{d['precision']:>10.3f}{d['recall']:>8.3f}"
        f"{d['false_hit_rate']:>10.4f}{d['f1']:>7.3f}",
    ]
    for row in result["cosine"]:
        if row["threshold"] in (0.8, 0.85, 0.9, 0.95):
            lines.append(
                f"{'cosine >= ' + str(row['threshold']):24}{row['precision']:>10.3f}"
                f"{row['recall']:>8.3f}{row['false_hit_rate']:>10.4f}{row['f1']:>7.3f}"
            )
    lines.append(
        f"decision latency p50 {d['p50_ms']} ms, p99 {d['p99_ms']} ms (embedding included)"
    )
    if show_false_hits:
        lines.extend(false_hit_lines(result.get("false_hits", [])))
    return "\n".join(lines)


def false_hit_lines(false_hits: list[dict[str, Any]]) -> list[str]:
    """Each pair labelled different that the decision serves, with its scores."""
    lines = [f"{len(false_hits)} false hits (labelled different, served):"]
    for h in false_hits:
        lines.append(
            f"  line {h['line']}: cosine {h['cosine']:.4f}  verifier {h['verifier_score']:.4f}  "
            f"confidence {h['confidence']:.4f}  reason {h['reason']}"
        )
        lines.append(f"    cached: {h['cached']!r}")
        lines.append(f"    asked:  {h['asked']!r}")
        lines.extend(f"    {step}" for step in h.get("steps", []))
    return lines
