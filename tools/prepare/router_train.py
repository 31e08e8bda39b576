"""Train the router from LLMRouter data, reproducibly (closed form, no randomness).

    python -m tools.prepare.router_train DATA.jsonl MODELS_DIR

Target: ``score_large - score_small`` per prompt, with small = llama-3.1-8b-instruct and
large = llama-3.1-nemotron-51b-instruct. A fifth of the prompts (by a hash of the text) is
held out: never trained on, written to ``router/heldout.jsonl`` so ``edgecore eval router``
can measure the shipped model on data it has not seen. The artifact is ~2 KB of weights.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

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


def train(data: Path, models_dir: Path) -> dict[str, object]:
    with data.open() as f:  # not str.splitlines(): questions contain U+2028 and friends
        rows = [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if SMALL in r["scores"] and LARGE in r["scores"]]
    test = np.array([held_out(r["question"]) for r in rows])
    texts = [embed_text(r["question"]) for r in rows]
    embedder = Embedder(models_dir / "all-minilm-l6-v2-onnx", threads=2)
    print(f"  embedding {len(texts)} prompts ...", flush=True)
    vectors = np.concatenate([embedder.embed(texts[i : i + 32]) for i in range(0, len(texts), 32)])
    feats = np.stack([text_features(t) for t in texts])
    mean, std = feats[~test].mean(0), feats[~test].std(0) + 1e-6
    design = np.hstack([vectors, (feats - mean) / std, np.ones((len(rows), 1))])
    gain = np.array([r["scores"][LARGE] - r["scores"][SMALL] for r in rows], dtype=np.float64)

    x, y = design[~test].astype(np.float64), gain[~test]
    weights = np.linalg.solve(x.T @ x + RIDGE * np.eye(x.shape[1]), x.T @ y)
    train_scores = x @ weights
    platt = fit_platt(train_scores, (y > 0).astype(np.float64))

    small = np.array([r["scores"][SMALL] for r in rows], dtype=np.float64)
    large = np.array([r["scores"][LARGE] for r in rows], dtype=np.float64)
    heldout = summarize(pgr_curve(design[test] @ weights, small[test], large[test]))
    meta: dict[str, object] = {
        "id": "router/ridge-minilm/v1",
        "small": SMALL,
        "large": LARGE,
        "ridge": RIDGE,
        "features": ["minilm-384", *FEATURES, "bias"],
        "train_rows": int((~test).sum()),
        "heldout_rows": int(test.sum()),
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
    print(
        f"  held-out APGR {heldout['apgr']}, PGR at 50% core {heldout['pgr_at']['0.5']}", flush=True
    )
    return meta


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    train(Path(sys.argv[1]), Path(sys.argv[2]))
