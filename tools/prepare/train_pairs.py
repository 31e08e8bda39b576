"""The cross-encoder's training pairs, chosen before it trains.

QQP's train split (``limit`` pairs drawn, or all) plus the generated hard pairs
(``hard_pairs``) and the written contrast sets already read (``written_pairs``); with
``--min-cosine``, only the pairs the cache would ask about: below the candidate floor
(0.80) no verifier runs, so easy negatives would only spend training steps.
The margin under the floor covers a cosine moving a little between builds.

Runs in edgecore's own environment, before the training (which runs in the preparation
environment), so that closeness is measured with the edge's own embedder: the INT8 graph,
the ``user:`` prefix of a one-turn prompt, one run per text, a run per core at once. The
same choice with fp32 torch in the preparation environment took 541 s of the full build on
2 cores (docs/models.md, the build's time).

    python -m tools.prepare.train_pairs QQP.jsonl MODELS_DIR OUT.json \\
        --hard-per-kind N [--pairs-limit N] [--min-cosine C] [--vectors VECTORS]

With ``--vectors``, the texts it embedded are kept there for the verifier's step, which
embeds most of them again (``text_vectors``).

OUT.json holds ``{"rows": [[text_a, text_b, label], ...], "meta": {...}}``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tools.prepare.hard_pairs import generate
from tools.prepare.pair_split import split
from tools.prepare.text_vectors import TextVectors, as_prompts
from tools.prepare.written_pairs import written_pairs

Row = tuple[str, str, int]
SEED = 0


def load_train_pairs(path: Path, limit: int | None, seed: int, hard_per_kind: int) -> list[Row]:
    """QQP's train pairs (``limit`` of them, drawn), plus hard pairs from all its train
    questions, plus the hand-written contrast sets already read (``written_pairs``)."""
    rows = []
    with path.open() as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if split(r["text_a"], r["text_b"]) == "train":
                    rows.append((r["text_a"], r["text_b"], int(r["label"])))
    hard = generate([t for a, b, _ in rows for t in (a, b)], hard_per_kind, seed)
    random.Random(seed).shuffle(rows)
    extra = [*hard, *written_pairs()]
    return rows[:limit] + [(a, b, label) for a, b, label, _ in extra]


def near(rows: list[Row], embed: Callable[[list[str]], np.ndarray], min_cosine: float) -> list[Row]:
    """The rows whose two texts ``embed`` (unit vectors) puts at least ``min_cosine`` apart,
    in their order."""
    texts = sorted({t for a, b, _ in rows for t in (a, b)})
    vectors = dict(zip(texts, embed(texts), strict=True))
    return [r for r in rows if float(vectors[r[0]] @ vectors[r[1]]) >= min_cosine]


def main() -> None:
    from edge.embedder import Embedder  # edgecore's environment; imported here, not at load

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", type=Path, help="QQP as JSON lines")
    ap.add_argument("models_dir", type=Path, help="holds all-minilm-l6-v2-onnx (step 1)")
    ap.add_argument("out", type=Path)
    ap.add_argument("--pairs-limit", type=int, default=None)
    ap.add_argument("--hard-per-kind", type=int, default=3000, help="generated pairs per rule")
    ap.add_argument("--min-cosine", type=float, default=0.0, help="only pairs this close (0: all)")
    ap.add_argument("--vectors", type=Path, default=None, help="keep the texts' vectors here")
    args = ap.parse_args()

    rows = load_train_pairs(args.pairs, args.pairs_limit, SEED, args.hard_per_kind)
    if args.min_cosine > 0:
        t = time.perf_counter()
        embedder_dir = args.models_dir / "all-minilm-l6-v2-onnx"
        embedder = Embedder(embedder_dir, threads=1)
        kept = TextVectors.load(args.vectors, embedder_dir)

        def embed(texts: list[str]) -> np.ndarray:
            found = kept.embed(texts, as_prompts(embedder))
            return np.stack([found[t] for t in texts]) if texts else np.zeros((0, embedder.dim))

        rows = near(rows, embed, args.min_cosine)
        if args.vectors is not None:
            kept.save(args.vectors)
        print(f"  cosine >= {args.min_cosine}: {time.perf_counter() - t:.0f}s", flush=True)
    meta = {
        "pairs": str(len(rows)),
        "pairs_limit": str(args.pairs_limit),
        "min_cosine": str(args.min_cosine),
        "hard_per_kind": str(args.hard_per_kind),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "meta": meta}))
    print(f"  {len(rows)} training pairs, {sum(r[2] for r in rows)} duplicates", flush=True)


if __name__ == "__main__":
    main()
