"""Fakes the edge's in-process tests share: stand-ins for the parts that need a model or a
server, the way httpx's MockTransport stands in for the network."""

from __future__ import annotations

from typing import Any

import numpy as np


class Embedder:
    """MiniLM's interface, one constant vector per text (BatchingEmbedder wraps it)."""

    model_id, dim, vocab_size = "fake-embedder", 4, 100

    def embed_counted(self, items: list[Any]) -> tuple[np.ndarray, list[int]]:
        return np.full((len(items), 4), 0.5, dtype=np.float32), [1] * len(items)
