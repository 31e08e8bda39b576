"""The cache's cross-encoder: one MiniLM pass over both questions, P(same question).

The MLP verifier compares two finished embeddings; this model reads the cached question
and the new one together, so attention can line up "lose" with "gain" or "Java" with
"Python". ``edgecore models prepare`` builds it (MiniLM fine-tuned on QQP pairs by
``tools/prepare/cross_encoder_train.py``); it costs a few milliseconds per pair, so the
matcher runs it only on candidates the MLP verifier did not already rule out.

Each pair gets its own ONNX run, unpadded: no batch neighbour can move a score.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from edge.embedder import cpu_session

MODEL_FILE = "model.onnx"
META = "edgecore.json"


class CrossEncoder:
    def __init__(self, model_dir: Path, *, threads: int = 1) -> None:
        self.meta: dict[str, object] = json.loads((model_dir / META).read_text())
        self.session = cpu_session(model_dir / MODEL_FILE, threads)
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=int(str(self.meta.get("max_length", 128))))
        self.tokenizer.no_padding()

    @property
    def version(self) -> str:
        return str(self.meta.get("version", "unknown"))

    def reads_whole(self, a: str, b: str) -> bool:
        """Whether the pair fits the model's window (``max_length`` tokens), nothing cut."""
        return not self.tokenizer.encode(a, b).overflowing

    def logits(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The raw logit per (cached, asked) pair; sigmoid gives P(same question)."""
        out = np.zeros(len(pairs), dtype=np.float32)
        for i, (a, b) in enumerate(pairs):
            enc = self.tokenizer.encode(a, b)
            ids = np.array([enc.ids], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            if "token_type_ids" in self.input_names:
                feeds["token_type_ids"] = np.array([enc.type_ids], dtype=np.int64)
            out[i] = self.session.run(None, feeds)[0][0, 0]
        return out
