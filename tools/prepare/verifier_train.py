"""Train the cache's pairwise verifier from QQP (and STS-B), reproducibly.

    python -m tools.prepare.verifier_train CACHE_DATA_DIR MODELS_DIR [--budget full|small]

When ``MODELS_DIR/cache-cross-encoder`` exists, the MLP is also stacked with it: a logistic
regression over the two logits, fitted on the calibration pairs the MLP does not rule out.
Both the MLP's and the stack's calibrations are saved; the edge serves the one its
``CACHE__CROSS_ENCODER`` setting picks.

Training pairs are QQP's train split, STS-B's clear cases and the generated hard pairs of
``hard_pairs`` (rewritten from QQP train questions only).

QQP pairs are split by a hash of their two texts (``pair_split``): 80 % train, 10 %
calibration (the score -> precision curve the operator's ``delta`` reads), 10 % test,
written to ``verifier/heldout.jsonl`` and never seen by training or calibration, so
``edgecore eval cache --pairs ~/.cache/edgecore/models/verifier/heldout.jsonl`` measures the
shipped decision honestly. Texts are embedded exactly as the edge embeds a one-turn
conversation (``user: ...``). Fixed seeds: the same data gives the same artifact.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from edge.cache.cross_encoder import CrossEncoder
from edge.cache.verifier import Layers, Stack, Verifier, calibrate, logit, pair_features, stacked
from edge.embedder import Embedder
from tools.prepare import BUDGETS, HARD_PER_KIND, VERIFIER_RECIPE
from tools.prepare.hard_pairs import generate
from tools.prepare.pair_split import split
from tools.prepare.text_vectors import TextVectors, as_prompts

SEEDS = (0, 1, 2, 3, 4)  # ensemble members: averaging seeds lifts recall at high precision
HIDDEN = (256, 64)
CROSS_ENCODER = "cache-cross-encoder"
# Calibration duplicates the MLP may rule out without asking the cross-encoder: a little
# recall for not running it on clearly different neighbours.
GATE_RECALL_LOSS = 0.02


def load_pairs(data_dir: Path, hard_per_kind: int = 0) -> list[dict[str, object]]:
    with (data_dir / "qqp_pairs.jsonl").open() as f:
        rows: list[dict[str, object]] = [json.loads(line) for line in f if line.strip()]
    train = [r for r in rows if split(str(r["text_a"]), str(r["text_b"])) == "train"]
    for a, b, label, kind in generate(
        [str(r[k]) for r in train for k in ("text_a", "text_b")], hard_per_kind
    ):
        rows.append({"text_a": a, "text_b": b, "label": label, "hard": kind})
    stsb = data_dir / "stsb" / "sts-train.tsv"
    if stsb.exists():  # graded 0-5: clear paraphrases vs clearly different, middle dropped
        with stsb.open() as f:
            for rec in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                if len(rec) < 7:
                    continue
                score = float(rec[4])
                if score >= 4.0 or score <= 2.5:
                    label = int(score >= 4.0)
                    rows.append({"text_a": rec[5], "text_b": rec[6], "label": label, "stsb": 1})
    return rows


def train(
    data_dir: Path, models_dir: Path, budget: str = "full", vectors: Path | None = None
) -> dict[str, object]:
    """``vectors``: texts the build embedded before with the same embedder (``text_vectors``),
    read instead of embedded again."""
    from sklearn.neural_network import MLPClassifier  # type: ignore[import-untyped]

    rows = load_pairs(data_dir, HARD_PER_KIND[budget])
    # STS-B and the hard pairs only widen training; calibration and test are QQP.
    parts = np.array(
        [
            "train" if "stsb" in r or "hard" in r else split(str(r["text_a"]), str(r["text_b"]))
            for r in rows
        ]
    )
    embedder_dir = models_dir / "all-minilm-l6-v2-onnx"
    embedder = Embedder(embedder_dir, threads=1)
    texts = [str(r[k]) for r in rows for k in ("text_a", "text_b")]
    print(f"  {len(rows)} pairs, {len(set(texts))} distinct texts", flush=True)
    vec = TextVectors.load(vectors, embedder_dir).embed(texts, as_prompts(embedder))
    pairs = [(str(r["text_a"]), str(r["text_b"])) for r in rows]
    x = np.stack([pair_features(vec[a], vec[b], a, b) for a, b in pairs])
    y = np.array([int(r["label"]) for r in rows])  # type: ignore[call-overload]
    train_rows = parts == "train"
    mean, std = x[train_rows].mean(0), x[train_rows].std(0) + 1e-6
    scaled = (x - mean) / std

    members: list[Layers] = []
    for seed in SEEDS:
        t = time.perf_counter()
        mlp = MLPClassifier(
            hidden_layer_sizes=HIDDEN, alpha=1e-3, early_stopping=True, random_state=seed
        ).fit(scaled[train_rows], y[train_rows])
        members.append(list(zip(mlp.coefs_, mlp.intercepts_, strict=True)))
        print(f"  member {seed}: {mlp.n_iter_} epochs, {time.perf_counter() - t:.0f}s", flush=True)

    draft = Verifier(members, mean, std, calibrate(np.zeros(1), np.ones(1)), {})
    cal = parts == "calibration"
    cal_pairs = [p for p, c in zip(pairs, cal, strict=True) if c]
    # Scored as the edge scores them: 0 where the asked question names or asks more.
    mlp = draft.score_pairs(x[cal], cal_pairs)
    cross, stack, final = None, None, mlp
    if (models_dir / CROSS_ENCODER).exists():
        cross = CrossEncoder(models_dir / CROSS_ENCODER, threads=2)
        stack, final = fit_stack(mlp, y[cal], cal_pairs, cross)
    calibration = calibrate(final, y[cal])
    mlp_calibration = calibrate(mlp, y[cal])
    weights = b"".join(w.tobytes() for layers in members for w, _ in layers)
    if stack is not None:
        weights += stack.as_array().tobytes()
    meta: dict[str, object] = {
        "id": "verifier/mlp-minilm-lexical" + ("+cross-encoder/v2" if cross else "/v1"),
        "version": hashlib.sha256(weights).hexdigest()[:12],
        "recipe": f"{VERIFIER_RECIPE}:{budget}",
        "cross_encoder": cross.version if cross else None,
        "stack": stack.as_array().round(4).tolist() if stack else None,
        "hidden": list(HIDDEN),
        "seeds": list(SEEDS),
        "rows": {p: int((parts == p).sum()) for p in ("train", "calibration", "test")},
        "threshold_at_delta_0.05": mlp_calibration.threshold(0.05),
        "stacked_threshold_at_delta_0.05": calibration.threshold(0.05) if stack else None,
        "data_sha256": hashlib.sha256((data_dir / "qqp_pairs.jsonl").read_bytes()).hexdigest(),
    }
    out = models_dir / "verifier"
    verifier = Verifier(members, mean, std, calibration, meta, stack=stack, cross=cross)
    verifier.save(out, mlp_calibration=mlp_calibration)
    with (out / "heldout.jsonl").open("w") as f:
        for r, p in zip(rows, parts, strict=True):
            if p == "test":
                f.write(json.dumps(r) + "\n")
    print(f"  threshold at delta 0.05: {meta['threshold_at_delta_0.05']:.3f}", flush=True)
    return meta


def stack_gate(mlp: np.ndarray, y: np.ndarray) -> float:
    """The MLP score under which the cross-encoder is not asked: a small recall loss.

    Pairs the directional checks (``told_apart_by``) scored 0 are left out: they are never served,
    and counting them put the quantile at 0, which sent every candidate to the cross-encoder.
    """
    return float(np.quantile(mlp[(y == 1) & (mlp > 0)], GATE_RECALL_LOSS))


def fit_stack(
    mlp: np.ndarray, y: np.ndarray, pairs: list[tuple[str, str]], cross: CrossEncoder
) -> tuple[Stack, np.ndarray]:
    """Gate and logistic weights on the calibration pairs; their final scores."""
    from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]

    gate = stack_gate(mlp, y)
    live = np.nonzero(mlp >= gate)[0]
    t = time.perf_counter()
    logits = np.zeros(len(pairs), dtype=np.float32)
    logits[live] = cross.logits([pairs[i] for i in live])
    print(f"  cross-encoder on {len(live)} calibration pairs: {time.perf_counter() - t:.0f}s")
    features = np.stack([logit(mlp[live]), logits[live]], axis=1)
    lr = LogisticRegression(C=10.0).fit(features, y[live])
    # The logit range seen here bounds the cross-encoder's say at serving time (the matcher
    # skips it where neither end of the range changes the decision).
    low, high = float(logits[live].min()), float(logits[live].max())
    weights = (float(lr.intercept_[0]), float(lr.coef_[0, 0]), float(lr.coef_[0, 1]))
    stack = Stack(gate, *weights, low=low, high=high)
    print(f"  stack: {stack}", flush=True)
    return stack, stacked(mlp, logits, stack)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("models", type=Path)
    ap.add_argument("--budget", choices=BUDGETS, default="full")
    ap.add_argument("--vectors", type=Path, default=None, help="texts embedded before")
    args = ap.parse_args()
    train(args.data, args.models, args.budget, args.vectors)
