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


class RefusingTokenizer:
    """The real tokenizer, refusing to template a chat that contains "boom" (a fault the
    real one cannot produce on demand): its request fails at admission."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def __getattr__(self, name: str) -> object:
        return getattr(self._tokenizer, name)

    def apply_chat_template(self, messages: str, **kw: object) -> object:
        if "boom" in messages:
            raise ValueError("cannot template this")
        return self._tokenizer.apply_chat_template(messages, **kw)
