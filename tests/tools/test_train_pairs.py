"""The cross-encoder's training pairs (tools.prepare.train_pairs): chosen in edgecore's
environment with the edge's own embedder, handed to the trainer as one JSON file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from tools.prepare.pair_split import split
from tools.prepare.train_pairs import near

REPO = Path(__file__).resolve().parents[2]


def test_only_the_close_pairs_stay_in_their_order() -> None:
    vectors = {"a": [1.0, 0.0], "b": [0.8, 0.6], "c": [0.0, 1.0]}

    def embed(texts: list[str]) -> np.ndarray:
        return np.array([vectors[t] for t in texts])

    rows = [("b", "a", 0), ("a", "c", 0), ("a", "b", 1), ("c", "c", 1)]
    assert near(rows, embed, 0.75) == [("b", "a", 0), ("a", "b", 1), ("c", "c", 1)]


def test_the_pairs_file_holds_train_pairs_close_enough(tmp_path: Path, models_dir: Path) -> None:
    qqp = tmp_path / "qqp.jsonl"
    questions = [
        ("How do I learn Python?", "How can I learn Python?"),
        ("How do I learn Python fast?", "What is the capital of France?"),
        ("What is the best way to save money?", "How can I save money?"),
        ("Is coffee bad for you?", "Why do cats purr?"),
    ] * 8
    rows = [(f"{a} ({i})", f"{b} ({i})") for i, (a, b) in enumerate(questions)]
    qqp.write_text("".join(
        json.dumps({"text_a": a, "text_b": b, "label": int(i % 4 in (0, 2))}) + "\n"
        for i, (a, b) in enumerate(rows)
    ))  # fmt: skip
    out = tmp_path / "pairs.json"
    subprocess.run(
        [sys.executable, "-m", "tools.prepare.train_pairs", str(qqp), str(models_dir), str(out),
         "--hard-per-kind", "0", "--min-cosine", "0.6"],
        check=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
    )  # fmt: skip
    chosen = json.loads(out.read_text())
    kept = {(a, b) for a, b, _ in chosen["rows"]}
    train = {(a, b) for a, b in rows if split(a, b) == "train"}
    assert kept and kept <= train  # calibration and test pairs stay unseen
    assert all("capital of France" not in b and "cats purr" not in b for _, b in kept)
    assert chosen["meta"]["min_cosine"] == "0.6" and chosen["meta"]["pairs"] == str(len(kept))
