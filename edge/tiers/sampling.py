"""The next token from one row's logits (pure numpy; ``edge.tiers.local_batch``).

Greedy at temperature 0, else a sample: the repetition penalty over the prompt and what
was generated (as Hugging Face applies it: a positive logit divided, a negative one
multiplied), then temperature, top-k and top-p. A seeded request draws from its own
generator, so the same seed gives the same answer whatever shares its batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Sampler:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int | None = None
    repetition_penalty: float = 1.0
    rng: np.random.Generator = field(default_factory=np.random.default_rng)
    history: list[int] = field(default_factory=list)  # the prompt's tokens
    _seen: set[int] | None = None  # the prompt's and the chosen tokens (with a penalty)
    _seen_ids: np.ndarray | None = None  # the same, as indices (rebuilt when it grows)

    @classmethod
    def of(cls, job: Any, prompt: Any) -> Sampler:
        """For a ``local_worker.Job`` and its prompt's token ids."""
        return cls(
            temperature=job.temperature,
            top_p=job.top_p,
            top_k=job.top_k,
            repetition_penalty=job.repetition_penalty,
            rng=np.random.default_rng(job.seed),
            history=[int(t) for t in prompt],
        )

    def choose(self, logits: np.ndarray) -> int:
        """The next token; ``logits`` (float32, this row's own) may be changed in place."""
        if self.repetition_penalty != 1.0:
            self._penalise(logits)
        if self.temperature <= 0:
            token = int(np.argmax(logits))
        else:
            token = self._sample(logits)
        if self._seen is not None and token not in self._seen:
            self._seen.add(token)
            self._seen_ids = None
        return token

    def _penalise(self, logits: np.ndarray) -> None:
        if self._seen is None:
            self._seen = {t for t in self.history if 0 <= t < logits.shape[-1]}
        if self._seen_ids is None:
            self._seen_ids = np.fromiter(self._seen, dtype=np.int64, count=len(self._seen))
        seen = logits[self._seen_ids]
        p = self.repetition_penalty
        logits[self._seen_ids] = np.where(seen > 0, seen / p, seen * p)

    def _sample(self, logits: np.ndarray) -> int:
        scaled = logits / np.float32(self.temperature)
        keep: np.ndarray | None = None  # the candidates' token ids (None: the vocabulary)
        if self.top_k and self.top_k < scaled.size:
            keep = np.argpartition(-scaled, self.top_k - 1)[: self.top_k]
            scaled = scaled[keep]
        weights = np.exp(scaled - scaled.max(), dtype=np.float64)  # unnormalised
        if self.top_p < 1.0:
            chosen = nucleus(weights, self.top_p)
            keep = chosen if keep is None else keep[chosen]
            weights = weights[chosen]
        # Inverse CDF, one uniform draw (rng.choice with p costs ~1.5 ms over a vocabulary).
        cdf = np.cumsum(weights)
        i = min(int(np.searchsorted(cdf, self.rng.random() * cdf[-1], side="right")), cdf.size - 1)
        return int(i if keep is None else keep[i])


def nucleus(weights: np.ndarray, top_p: float, look: int = 256) -> np.ndarray:
    """Indices of the smallest set of most likely tokens whose share of ``weights`` reaches
    ``top_p`` (the first always kept), most likely first. Sorted among the ``look`` most
    likely only when they already hold ``top_p``: the nucleus is then among them, and a
    step does not sort a whole vocabulary per row (~3 ms)."""
    need = top_p * float(weights.sum())
    top = np.arange(weights.size)
    if look < weights.size:
        best = np.argpartition(-weights, look - 1)[:look]
        if float(weights[best].sum()) >= need:
            top = best
    order = top[np.argsort(-weights[top], kind="stable")]
    upto = int(np.searchsorted(np.cumsum(weights[order]), need)) + 1
    return order[:upto]
