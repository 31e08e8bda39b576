"""The embedder's offline path (``Embedder.embed_on_threads``, used to train the verifier)
gives each text the vector the edge gives it, in order."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edge.embedder import Embedder

TOPICS = "cats dogs taxes visas rust redis kubernetes sourdough chess tides".split()


def test_runs_side_by_side_give_the_vectors_of_runs_alone(models_dir: Path) -> None:
    emb = Embedder(models_dir / "all-minilm-l6-v2-onnx")
    texts = [f"user: question {i}: how do {t} work?" for i, t in enumerate(TOPICS)]
    together = emb.embed_on_threads(texts, workers=2, chunk=3)
    assert together.shape == (len(texts), emb.dim)
    # One run per text on either path: no neighbour, thread or chunk changes a vector.
    assert np.array_equal(together, emb.embed(texts))
    assert emb.embed_on_threads([], workers=2).shape == (0, emb.dim)
