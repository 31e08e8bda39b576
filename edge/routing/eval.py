"""``edgecore eval router``: how much of the big model's quality the router recovers.

Reads JSON lines ``{"question": ..., "scores": {model: score}}``, scores each question with
the real router (same embedding text, same model), and reports the performance gap
recovered, PGR = (Q_router - Q_small) / (Q_large - Q_small), across core shares 0..1.
At share s the router sends the s highest-scoring prompts to the core, which is what its
quantile calibration does in production. Random routing has APGR 0.5.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from edge.cache.keys import conversation_text
from edge.embedder import Embedder
from edge.routing.model import RouterModel
from shared.schemas import Message

SHARES = [i / 100 for i in range(101)]


def embed_text(question: str) -> str:
    """What the edge embeds for a one-turn conversation (cache and router share it)."""
    return conversation_text([Message(role="user", content=question)], 1)


def pgr_curve(scores: np.ndarray, small: np.ndarray, large: np.ndarray) -> list[dict[str, float]]:
    q_small, q_large = float(small.mean()), float(large.mean())
    gap = q_large - q_small
    if abs(gap) < 1e-12:
        raise ValueError("the two models score the same on this data: PGR is undefined")
    order = np.argsort(-scores, kind="stable")
    n = len(scores)
    # Q at share s = mean(small) + sum of (large - small) over the routed prompts / n.
    gains = np.concatenate([[0.0], np.cumsum((large - small)[order])])
    curve = []
    for share in SHARES:
        q = q_small + gains[round(share * n)] / n
        curve.append({"core_share": share, "pgr": round((q - q_small) / gap, 4)})
    return curve


def summarize(curve: list[dict[str, float]]) -> dict[str, Any]:
    at = {c["core_share"]: c["pgr"] for c in curve}
    return {
        "apgr": round(float(np.mean([c["pgr"] for c in curve])), 4),
        "pgr_at": {"0.25": at[0.25], "0.5": at[0.5], "0.75": at[0.75]},
        "curve": curve,
    }


def load_rows(path: Path, small: str, large: str) -> list[dict[str, Any]]:
    rows = []
    with path.open() as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            scores = row.get("scores", {})
            if small not in scores or large not in scores:
                raise SystemExit(f"{path}:{number}: scores lack {small!r} or {large!r}")
            rows.append(row)
    if not rows:
        raise SystemExit(f"{path}: no rows")
    return rows


def evaluate(
    rows: list[dict[str, Any]], small: str, large: str, embedder: Embedder, model: RouterModel
) -> dict[str, Any]:
    texts = [embed_text(r["question"]) for r in rows]
    vectors = np.concatenate([embedder.embed(texts[i : i + 32]) for i in range(0, len(texts), 32)])
    scores, timings = [], []
    for vector, text in zip(vectors, texts, strict=True):
        t = time.perf_counter()
        scores.append(model.score(vector, text))
        timings.append((time.perf_counter() - t) * 1000.0)
    s = np.array([float(r["scores"][small]) for r in rows])
    g = np.array([float(r["scores"][large]) for r in rows])
    result = summarize(pgr_curve(np.array(scores), s, g))
    result.update(
        rows=len(rows),
        small=small,
        large=large,
        q_small=round(float(s.mean()), 4),
        q_large=round(float(g.mean()), 4),
        p50_ms=round(float(np.percentile(timings, 50)), 4),
        p99_ms=round(float(np.percentile(timings, 99)), 4),
        note="p50_ms/p99_ms: the routing decision on top of the shared embedding",
    )
    return result


def run(data: Path, small: str, large: str, models_dir: Path, out: Path | None) -> dict[str, Any]:
    rows = load_rows(data, small, large)
    embedder = Embedder(models_dir / "all-minilm-l6-v2-onnx", threads=2)
    model = RouterModel.load(models_dir / "router")
    result = evaluate(rows, small, large, embedder, model)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))
    return result


def report(result: dict[str, Any]) -> str:
    lines = [
        f"rows {result['rows']}: Q_small {result['q_small']}  Q_large {result['q_large']}",
        f"APGR {result['apgr']}  (random routing: 0.5)",
        "core share  PGR",
    ]
    lines += [f"  {k:>8}  {v}" for k, v in result["pgr_at"].items()]
    lines.append(
        f"decision p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms (embedding excluded)"
    )
    return "\n".join(lines)
