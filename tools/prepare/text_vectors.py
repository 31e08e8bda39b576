"""Text vectors shared between the build's steps, so no text is embedded twice.

The cross-encoder's pair choice (``train_pairs``, full build) embeds QQP's train questions
and the hard pairs; the verifier (``verifier_train``) embeds them again, with QQP's other
splits and STS-B, through the same INT8 embedder. Each text is run alone
(``Embedder.embed_on_threads``), so a vector never depends on what else was embedded, and
the verifier's features are the same whether a vector was read here or computed again.

The file is tagged with a digest of the embedder's folder: a build with another embedder
(step 1 rebuilt) finds nothing here and embeds everything.

    vectors = TextVectors.load(path, embedder_dir)
    vectors.embed(texts, embed)   # only the texts not already there
    vectors.save(path)
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

Embed = Callable[[list[str]], np.ndarray]


def as_prompts(embedder: Any) -> Embed:
    """``embedder`` (an ``edge.embedder.Embedder``) on texts as the edge embeds a one-turn
    prompt, a run per core, each text alone: the one way the build's steps embed."""
    return lambda texts: embedder.embed_on_threads([f"user: {x}" for x in texts])


def digest(embedder_dir: Path) -> str:
    """Of every file in the embedder's folder, names and contents."""
    h = hashlib.sha256()
    for f in sorted(p for p in embedder_dir.iterdir() if p.is_file()):
        h.update(f.name.encode() + b"\0")
        with f.open("rb") as data:
            while block := data.read(1 << 20):
                h.update(block)
    return h.hexdigest()


class TextVectors:
    def __init__(self, tag: str, vectors: dict[str, np.ndarray] | None = None) -> None:
        self.tag = tag
        self.vectors: dict[str, np.ndarray] = vectors or {}

    @classmethod
    def load(cls, path: Path | None, embedder_dir: Path) -> TextVectors:
        """What ``path`` holds for this embedder (nothing when it is absent or another's)."""
        tag = digest(embedder_dir)
        if path is None or not path.exists():
            return cls(tag)
        with np.load(path) as f:
            if str(f["tag"]) != tag:
                return cls(tag)
            texts = json.loads(f["texts"].tobytes().decode())
            matrix = f["vectors"]
        return cls(tag, dict(zip(texts, matrix, strict=True)))

    def embed(self, texts: list[str], embed: Embed, *, step: int = 25_600) -> dict[str, np.ndarray]:
        """Vectors for ``texts``: those already here, and the others embedded by ``embed``
        (in one fixed order, ``step`` at a time, with progress) and kept."""
        missing = sorted(set(texts) - self.vectors.keys())
        print(f"  {len(set(texts)) - len(missing)} texts embedded before, {len(missing)} to "
              "embed", flush=True)  # fmt: skip
        t = time.perf_counter()
        for i in range(0, len(missing), step):
            chunk = missing[i : i + step]
            self.vectors.update(zip(chunk, embed(chunk), strict=True))
            print(f"  embedded {i + len(chunk)}/{len(missing)} ({time.perf_counter() - t:.0f}s)",
                  flush=True)  # fmt: skip
        return {text: self.vectors[text] for text in texts}

    def save(self, path: Path) -> None:
        texts = sorted(self.vectors)
        matrix = (
            np.stack([self.vectors[t] for t in texts]).astype(np.float32)
            if texts
            else np.zeros((0, 0), dtype=np.float32)
        )
        blob = np.frombuffer(json.dumps(texts).encode(), dtype=np.uint8)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:  # np.savez would add ".npz" to a name without it
            np.savez(f, tag=np.array(self.tag), texts=blob, vectors=matrix)
