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
from tools.prepare.written_pairs import TRAINED, written_pairs

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
    written = {(a, b) for a, b, _, _ in written_pairs()}
    assert len(chosen["rows"]) == int(chosen["meta"]["pairs"])
    kept = {(a, b) for a, b, _ in chosen["rows"]} - written
    train = {(a, b) for a, b in rows if split(a, b) == "train"}
    assert kept and kept <= train  # calibration and test pairs stay unseen
    assert all("capital of France" not in b and "cats purr" not in b for _, b in kept)
    assert chosen["meta"]["min_cosine"] == "0.6"


def test_the_written_sets_already_read_are_trained_on_and_the_newer_ones_never() -> None:
    data = REPO / "tests" / "data"
    trained = written_pairs(data)
    assert {kind.split(":")[0] for *_, kind in trained} == {"written"}
    assert {label for _, _, label, _ in trained} == {0, 1}
    seen = {frozenset((a, b)) for a, b, _, _ in trained}
    held = [p for p in sorted(data.glob("contrast_*.jsonl")) if p.stem not in TRAINED]
    assert {p.stem for p in held} >= {"contrast_holdout", "contrast_blind10", "contrast_blind13"}
    for path in held:  # a held-out pair is never one the models learnt
        for line in path.read_text().splitlines():
            r = json.loads(line)
            assert frozenset((r["text_a"], r["text_b"])) not in seen, (path.name, r)


def test_written_pairs_are_none_without_the_sets(tmp_path: Path) -> None:
    assert written_pairs(tmp_path) == []
