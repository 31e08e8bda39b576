"""The embedder's offline path (``Embedder.embed_on_threads``, used to train the verifier)
gives each text the vector the edge gives it, in order; the edge's batcher spreads what
queues together over its worker threads."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import numpy as np

from edge.embedder import BatchingEmbedder, Embedder

TOPICS = "cats dogs taxes visas rust redis kubernetes sourdough chess tides".split()


def test_runs_side_by_side_give_the_vectors_of_runs_alone(models_dir: Path) -> None:
    emb = Embedder(models_dir / "all-minilm-l6-v2-onnx")
    texts = [f"user: question {i}: how do {t} work?" for i, t in enumerate(TOPICS)]
    together = emb.embed_on_threads(texts, workers=2, chunk=3)
    assert together.shape == (len(texts), emb.dim)
    # One run per text on either path: no neighbour, thread or chunk changes a vector.
    assert np.array_equal(together, emb.embed(texts))
    assert emb.embed_on_threads([], workers=2).shape == (0, emb.dim)


class Gate:
    """A model whose runs wait for each other: two calls return only if they ran at once."""

    model_id = "gate"
    dim = 2
    vocab_size = 10

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=5.0)
        self.batches: list[list[str]] = []
        self.threads: set[str] = set()

    def embed_counted(self, items: list[str]) -> tuple[np.ndarray, list[int]]:
        self.batches.append(list(items))
        self.threads.add(threading.current_thread().name)
        self.barrier.wait()  # BrokenBarrierError unless the other worker runs alongside
        return np.ones((len(items), self.dim), dtype=np.float32), [1] * len(items)


async def _embed_all(batcher: BatchingEmbedder, texts: list[str]) -> list[np.ndarray]:
    batcher.start()
    try:
        async with asyncio.timeout(10):
            return await asyncio.gather(*(batcher.embed(t) for t in texts))
    finally:
        await batcher.close()


def test_texts_queued_together_run_on_every_worker_at_once() -> None:
    gate = Gate(parties=2)
    texts = [f"q{i}" for i in range(10)]
    vectors = asyncio.run(_embed_all(BatchingEmbedder(gate, workers=2), texts))  # type: ignore[arg-type]
    assert len(vectors) == 10
    assert len(gate.threads) == 2  # one thread alone would have broken the barrier
    # Each worker took its share of what was queued, not one worker all of it.
    assert sorted(len(b) for b in gate.batches) == [5, 5]
    assert sorted(t for b in gate.batches for t in b) == sorted(texts)


def test_one_worker_takes_everything_queued_in_one_batch() -> None:
    gate = Gate(parties=1)
    texts = [f"q{i}" for i in range(10)]
    asyncio.run(_embed_all(BatchingEmbedder(gate, workers=1), texts))  # type: ignore[arg-type]
    assert [len(b) for b in gate.batches] == [10]
