"""Train the router from LLMRouter data, reproducibly (closed form, no randomness).

    python -m tools.prepare.router_train DATA.jsonl MODELS_DIR [--small NAME --large NAME]

Target: ``score_large - score_small`` per prompt, for the pair the operator deploys: small
answers at the edge, large at the core (two of the data's columns; by default
llama-3.1-8b-instruct and llama-3.1-nemotron-51b-instruct). A fifth of the prompts (by a
hash of the text) is held out: never trained on, written to ``router/heldout.jsonl`` so
``edgecore eval router`` can measure the shipped model on data it has not seen. The
artifact is ~2 KB of weights.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from edge.embedder import Embedder
from edge.routing.eval import embed_text, pgr_curve, summarize
from edge.routing.model import FEATURES, RouterModel, text_features

SMALL = "llama-3.1-8b-instruct"
LARGE = "llama-3.1-nemotron-51b-instruct"
RIDGE = 30.0  # chosen by 5-fold cross-validation (APGR 0.78-0.81 for 10..60)


def held_out(question: str) -> bool:
    return int(hashlib.sha256(question.encode()).hexdigest(), 16) % 5 == 0


def fit_platt(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Logistic fit of P(large better) on the score (two parameters, Newton steps)."""
    x = np.stack([scores, np.ones_like(scores)], axis=1)
    w = np.zeros(2)
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-x @ w))
        grad = x.T @ (p - labels) / len(labels) + 1e-4 * w
        hess = (x * (p * (1 - p))[:, None]).T @ x / len(labels) + 1e-4 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return float(w[0]), float(w[1])


def columns(rows: list[dict[str, Any]]) -> list[str]:
    """The models the data scores (its columns), most answered first."""
    counts: dict[str, int] = {}
    for r in rows:
        for name in r["scores"]:
            counts[name] = counts.get(name, 0) + 1
    return sorted(counts, key=lambda name: (-counts[name], name))


def train(
    data: Path, models_dir: Path, small: str = SMALL, large: str = LARGE
) -> dict[str, object]:
    with data.open() as f:  # not str.splitlines(): questions contain U+2028 and friends
        rows = [json.loads(line) for line in f if line.strip()]
    known = columns(rows)
    for role, name in (("small", small), ("large", large)):
        if name not in known:
            sys.exit(f"--{role} {name!r}: the router data has no such model; it has {known}")
    if small == large:
        sys.exit(f"--small and --large are both {small!r}: the router picks between two models")
    rows = [r for r in rows if small in r["scores"] and large in r["scores"]]
    test = np.array([held_out(r["question"]) for r in rows])
    texts = [embed_text(r["question"]) for r in rows]
    embedder = Embedder(models_dir / "all-minilm-l6-v2-onnx", threads=2)
    print(f"  embedding {len(texts)} prompts ...", flush=True)
    vectors = np.concatenate([embedder.embed(texts[i : i + 32]) for i in range(0, len(texts), 32)])
    feats = np.stack([text_features(t) for t in texts])
    mean, std = feats[~test].mean(0), feats[~test].std(0) + 1e-6
    design = np.hstack([vectors, (feats - mean) / std, np.ones((len(rows), 1))])
    gain = np.array([r["scores"][large] - r["scores"][small] for r in rows], dtype=np.float64)

    x, y = design[~test].astype(np.float64), gain[~test]
    weights = np.linalg.solve(x.T @ x + RIDGE * np.eye(x.shape[1]), x.T @ y)
    train_scores = x @ weights
    platt = fit_platt(train_scores, (y > 0).astype(np.float64))

    q_small = np.array([r["scores"][small] for r in rows], dtype=np.float64)
    q_large = np.array([r["scores"][large] for r in rows], dtype=np.float64)
    heldout = summarize(pgr_curve(design[test] @ weights, q_small[test], q_large[test]))
    meta: dict[str, object] = {
        "id": "router/ridge-minilm/v1",
        "small": small,
        "large": large,
        "ridge": RIDGE,
        "features": ["minilm-384", *FEATURES, "bias"],
        "train_rows": int((~test).sum()),
        "heldout_rows": int(test.sum()),
        "mean_small": round(float(q_small.mean()), 4),
        "mean_large": round(float(q_large.mean()), 4),
        "heldout_apgr": heldout["apgr"],
        "heldout_pgr_at": heldout["pgr_at"],
        "data_sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
    }
    model = RouterModel(weights.astype(np.float32), mean, std, platt, train_scores, meta)
    out = models_dir / "router"
    model.save(out)
    with (out / "heldout.jsonl").open("w") as f:
        for r, t in zip(rows, test, strict=True):
            if t:
                f.write(json.dumps({"question": r["question"], "scores": r["scores"]}) + "\n")
    if q_large.mean() <= q_small.mean():  # PGR's gap is then negative: its numbers mislead
        print(
            f"  WARNING: {large} scores no better than {small} on this data "
            f"({q_large.mean():.3f} vs {q_small.mean():.3f}): the core would not improve "
            "answers, and PGR assumes it does",
            flush=True,
        )
    print(
        f"  {small} (edge, mean {q_small.mean():.3f}) vs {large} (core, mean "
        f"{q_large.mean():.3f}): held-out APGR {heldout['apgr']}, "
        f"PGR at 50% core {heldout['pgr_at']['0.5']}",
        flush=True,
    )
    return meta


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="python -m tools.prepare.router_train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("data", type=Path)
    p.add_argument("models_dir", type=Path)
    p.add_argument("--small", default=SMALL, help="the data's column for the edge's model")
    p.add_argument("--large", default=LARGE, help="the data's column for the core's model")
    a = p.parse_args(argv)
    train(a.data, a.models_dir, a.small, a.large)


if __name__ == "__main__":
    main(sys.argv[1:])
