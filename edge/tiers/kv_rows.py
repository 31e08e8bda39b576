"""The decoder graph's names and the running batch's key/value cache, for continuous
batching on the CPU (``edge.tiers.local_batch``). Pure numpy: no session, no I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Graph:
    """What the decoder graph takes and gives, from the folder's ``genai_config.json``."""

    filename: str
    layers: int
    kv_heads: int
    head_size: int
    eos: frozenset[int]
    input_ids: str = "input_ids"
    attention_mask: str = "attention_mask"
    logits: str = "logits"
    past: tuple[str, ...] = ()  # key names then value names, one per layer each
    present: tuple[str, ...] = ()

    @classmethod
    def of(cls, config: dict[str, Any]) -> Graph:
        model = config["model"]
        decoder = model["decoder"]
        inputs, outputs = decoder.get("inputs", {}), decoder.get("outputs", {})
        layers = int(decoder["num_hidden_layers"])
        eos = model.get("eos_token_id", [])
        names = ("key", "value")
        past = tuple(
            inputs.get(f"past_{n}_names", f"past_key_values.%d.{n}") % i
            for n in names for i in range(layers)
        )  # fmt: skip
        present = tuple(
            outputs.get(f"present_{n}_names", f"present.%d.{n}") % i
            for n in names for i in range(layers)
        )  # fmt: skip
        return cls(
            filename=decoder["filename"],
            layers=layers,
            kv_heads=int(decoder["num_key_value_heads"]),
            head_size=int(decoder["head_size"]),
            eos=frozenset(eos if isinstance(eos, list) else [eos]),
            input_ids=inputs.get("input_ids", "input_ids"),
            attention_mask=inputs.get("attention_mask", "attention_mask"),
            logits=outputs.get("logits", "logits"),
            past=past,
            present=present,
        )

    @classmethod
    def load(cls, model_dir: str | Path) -> Graph:
        return cls.of(json.loads((Path(model_dir) / "genai_config.json").read_text()))


class Rows:
    """The running batch's key/value cache: one ``[rows, kv_heads, capacity, head_size]``
    buffer per cache tensor, rows ``0 .. n-1`` in use, each with its own length."""

    def __init__(
        self, graph: Graph, rows: int, capacity: int, dtype: Any, most: int | None = None
    ) -> None:
        self._most = most  # the longest a row can get (the context window): never more room
        capacity = min(capacity, most or capacity)
        self._shape = (rows, graph.kv_heads, capacity, graph.head_size)
        self.buffers = [np.zeros(self._shape, dtype) for _ in graph.past]
        self.lengths: list[int] = []

    @property
    def n(self) -> int:
        return len(self.lengths)

    @property
    def capacity(self) -> int:
        return self._shape[2]

    def add(self, cache: list[np.ndarray]) -> int:
        """Copy a prefilled request's cache (batch of one) into the next row: its index."""
        row, length = self.n, int(cache[0].shape[2])
        self.reserve(length + 1)
        for buffer, part in zip(self.buffers, cache, strict=True):
            buffer[row, :, :length] = part[0]
        self.lengths.append(length)
        return row

    def remove(self, row: int) -> int | None:
        """Free ``row``; the last row moves into it. The index that moved, if any."""
        last = self.n - 1
        if row != last:
            length = self.lengths[last]
            for buffer in self.buffers:
                buffer[row, :, :length] = buffer[last, :, :length]
            self.lengths[row] = length
        self.lengths.pop()
        return last if row != last else None

    def reserve(self, length: int) -> None:
        """Room for ``length`` positions in every row (the buffers double, up to need, and
        past need only up to ``most``)."""
        if length <= self.capacity:
            return
        capacity = max(length, min(2 * self.capacity, self._most or 2 * self.capacity))
        rows, heads, _, size = self._shape
        self._shape = (rows, heads, capacity, size)
        grown = []
        for buffer in self.buffers:
            bigger = np.zeros(self._shape, buffer.dtype)
            bigger[:, :, : buffer.shape[2]] = buffer
            grown.append(bigger)
        self.buffers = grown

    def mask(self) -> np.ndarray:
        """The next step's attention mask: row i attends to its length plus the new token."""
        lengths = np.asarray(self.lengths)
        width = int(lengths.max()) + 1
        return (np.arange(width)[None, :] <= lengths[:, None]).astype(np.int64)
