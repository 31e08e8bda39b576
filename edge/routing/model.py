"""The learned part of the router: how much the core's big model is expected to help.

A ridge regression on the MiniLM embedding the cache already computed, plus a few cheap
text features, predicts the quality gain of the large model over the small one (trained on
``score_large - score_small``). Ranking by expected gain is what the performance gap
recovered (PGR) rewards; a Platt fit maps the gain to P(large model needed) for people.
Scoring is one dot product: microseconds, no second transformer pass.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

FEATURES = ("log_chars", "lines", "digit_ratio", "code", "math", "non_ascii")
ARTIFACT = "router.npz"
META = "router.json"

_CODE = re.compile(
    r"```|\bdef |\breturn\b|\bclass \w|\bimport \w|#include|\bfunction\b|;\s*$", re.M
)
_MATH = re.compile(r"\\frac|\\sqrt|\$[^$]+\$|\d\s*[-+*/^=]\s*\d|\bsolve\b|\bequation\b", re.I)


def text_features(text: str) -> np.ndarray:
    """Cheap, language-agnostic features of the prompt text (unscaled)."""
    n = max(1, len(text))
    return np.array(
        [
            math.log1p(len(text)),
            text.count("\n") / 10.0,
            sum(c.isdigit() for c in text) / n * 10.0,
            1.0 if _CODE.search(text) else 0.0,
            1.0 if _MATH.search(text) else 0.0,
            sum(ord(c) > 127 for c in text) / n,  # a rough "not English" signal
        ],
        dtype=np.float32,
    )


class RouterModel:
    def __init__(
        self,
        weights: np.ndarray,
        feature_mean: np.ndarray,
        feature_std: np.ndarray,
        platt: tuple[float, float],
        train_scores: np.ndarray,
        meta: dict[str, object],
    ) -> None:
        self.weights = weights.astype(np.float32)
        self.feature_mean = feature_mean.astype(np.float32)
        self.feature_std = feature_std.astype(np.float32)
        self.platt = platt
        self.train_scores = np.sort(train_scores.astype(np.float32))
        self.meta = meta

    @classmethod
    def load(cls, folder: Path) -> RouterModel:
        data = np.load(folder / ARTIFACT)
        meta = json.loads((folder / META).read_text()) if (folder / META).exists() else {}
        return cls(
            data["weights"],
            data["feature_mean"],
            data["feature_std"],
            (float(data["platt"][0]), float(data["platt"][1])),
            data["train_scores"],
            meta,
        )

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        np.savez(
            folder / ARTIFACT,
            weights=self.weights,
            feature_mean=self.feature_mean,
            feature_std=self.feature_std,
            platt=np.array(self.platt, dtype=np.float64),
            train_scores=self.train_scores,
        )
        (folder / META).write_text(json.dumps(self.meta, indent=2))

    def design(self, vector: np.ndarray, text: str) -> np.ndarray:
        scaled = (text_features(text) - self.feature_mean) / self.feature_std
        return np.concatenate([vector.astype(np.float32), scaled, np.ones(1, np.float32)])

    def score(self, vector: np.ndarray, text: str) -> float:
        """Expected quality gain of the large model (higher: more reason to use the core)."""
        return float(self.design(vector, text) @ self.weights)

    def threshold_for_share(self, share: float) -> float:
        """The score above which ``share`` of the training prompts lie (a warm start)."""
        if share <= 0.0:
            return math.inf
        if share >= 1.0:
            return -math.inf
        return float(np.quantile(self.train_scores, 1.0 - share))
