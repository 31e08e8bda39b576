"""Texts embedded once per build (tools.prepare.text_vectors): what the cross-encoder's pair
choice embedded, the verifier's step reads instead of embedding again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from edge.embedder import Embedder
from tools.prepare.text_vectors import TextVectors

REPO = Path(__file__).resolve().parents[2]


def _folder(tmp_path: Path, content: bytes) -> Path:
    folder = tmp_path / content.decode()
    folder.mkdir()
    (folder / "model.onnx").write_bytes(content)
    return folder


def test_only_texts_not_embedded_before_are_embedded_and_they_are_kept(tmp_path: Path) -> None:
    embedder = _folder(tmp_path, b"one")
    asked: list[list[str]] = []

    def embed(texts: list[str]) -> np.ndarray:
        asked.append(texts)
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    path = tmp_path / "vectors.npz"
    first = TextVectors.load(path, embedder)  # nothing there yet
    assert set(first.embed(["a", "bb", "a"], embed)) == {"a", "bb"}
    first.save(path)
    again = TextVectors.load(path, embedder)
    found = again.embed(["ccc", "bb"], embed)
    assert asked == [["a", "bb"], ["ccc"]]
    assert list(found) == ["ccc", "bb"]  # in the order asked
    np.testing.assert_array_equal(found["bb"], [2.0, 1.0])
    np.testing.assert_array_equal(found["ccc"], [3.0, 1.0])


def test_another_embedder_reads_nothing(tmp_path: Path) -> None:
    path = tmp_path / "vectors.npz"
    kept = TextVectors.load(path, _folder(tmp_path, b"one"))
    kept.embed(["a"], lambda texts: np.ones((len(texts), 2), dtype=np.float32))
    kept.save(path)
    assert TextVectors.load(path, _folder(tmp_path, b"two")).vectors == {}
    assert list(TextVectors.load(path, tmp_path / "one").vectors) == ["a"]


def test_the_pair_choice_keeps_the_vectors_the_verifier_would_compute(
    tmp_path: Path, models_dir: Path
) -> None:
    """Each text is run alone: a vector read from the file equals one computed now, in
    another batch, bit for bit (so the verifier's features do not change)."""
    qqp = tmp_path / "qqp.jsonl"
    questions = [("How do I learn Python?", "How can I learn Python?"),
                 ("Is coffee bad for you?", "Why do cats purr?")] * 6  # fmt: skip
    qqp.write_text("".join(
        json.dumps({"text_a": f"{a} ({i})", "text_b": f"{b} ({i})", "label": i % 2}) + "\n"
        for i, (a, b) in enumerate(questions)
    ))  # fmt: skip
    vectors = tmp_path / "vectors.npz"
    subprocess.run(
        [sys.executable, "-m", "tools.prepare.train_pairs", str(qqp), str(models_dir),
         str(tmp_path / "pairs.json"), "--hard-per-kind", "0", "--min-cosine", "0.6",
         "--vectors", str(vectors)],
        check=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
    )  # fmt: skip
    embedder_dir = models_dir / "all-minilm-l6-v2-onnx"
    kept = TextVectors.load(vectors, embedder_dir).vectors
    assert kept  # the train split's texts
    texts = sorted(kept)[::-1][:5]
    now = Embedder(embedder_dir, threads=1).embed([f"user: {t}" for t in texts])
    for text, vector in zip(texts, now, strict=True):
        np.testing.assert_array_equal(kept[text], vector)
