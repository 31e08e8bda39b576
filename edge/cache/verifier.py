"""Pairwise verifier: is the cached question the same question as the new one?

Cosine alone cannot tell "how to lose weight" from "how to gain weight" (0.9+), nor a
question from its negation. The verifier is a small MLP over the two MiniLM embeddings
(their product and absolute difference, the standard sentence-pair features) plus cheap
lexical checks (``edge/cache/pair_checks.py``): question word, negation, numbers, capitalised
names and content-word overlap. It is trained offline (``tools/prepare/verifier_train.py``)
and scored here with numpy: a few small matrix products, well under a millisecond.

With the cross-encoder on (``edge/cache/cross_encoder.py``, ``CACHE__CROSS_ENCODER``),
candidates the MLP does not already rule out (score >= ``gate``) are also read by it, and a
logistic "stack" over the two logits gives the final score. The MLP is cheap and sees the
lexical checks; the cross-encoder reads the two questions together; the stack weighs them on
held-out pairs. On by default; without it (off, or missing) the MLP decides alone on its own
calibration. docs/cache.md says what it buys and costs.

Whatever the models say, a pair whose new question names something the cached one does not,
or asks more questions than it (``told_apart_by``), scores 0: QQP, the training data, calls most
such pairs duplicates.

Its output is calibrated on held-out pairs into ``precision_at``: the share of correct hits
among pairs scoring at least ``p``. An operator picks a false-hit budget ``delta`` (wrong
answers per served hit) and the threshold follows from it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edge.cache.cross_encoder import CrossEncoder
from edge.cache.pair_checks import lexical_features, told_apart

ARTIFACT = "verifier.npz"
META = "verifier.json"


def pair_features(u: np.ndarray, v: np.ndarray, a: str, b: str) -> np.ndarray:
    """Symmetric in (a, b) for the embedding part; lexical part as above."""
    cosine = float(np.dot(u, v))
    return np.concatenate([u * v, np.abs(u - v), lexical_features(a, b, cosine)])


@dataclass(frozen=True)
class Stack:
    """Final score = sigmoid(bias + w_mlp * logit(mlp) + w_cross * cross_logit).

    Pairs whose MLP score is under ``gate`` skip the cross-encoder and score 0. The
    cross-encoder's logit is clipped to [``low``, ``high``] (its range on the calibration
    pairs), so ``bounds`` knows the final score's range before the cross-encoder runs.
    """

    gate: float
    bias: float
    w_mlp: float
    w_cross: float
    low: float = -30.0
    high: float = 30.0

    def as_array(self) -> np.ndarray:
        fields = (self.gate, self.bias, self.w_mlp, self.w_cross, self.low, self.high)
        return np.array(fields, dtype=np.float64)


def logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p.astype(np.float64), 1e-6, 1 - 1e-6)
    result: np.ndarray = np.log(q / (1 - q))
    return result


def stacked(mlp: np.ndarray, cross: np.ndarray, stack: Stack) -> np.ndarray:
    """The final score from the MLP's probabilities and the cross-encoder's logits."""
    cross = np.clip(cross.astype(np.float64), stack.low, stack.high)
    z = stack.bias + stack.w_mlp * logit(mlp) + stack.w_cross * cross
    out = 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))
    result: np.ndarray = np.where(mlp >= stack.gate, out, 0.0).astype(np.float32)
    return result


@dataclass(frozen=True)
class PrecisionCurve:
    """Held-out precision of "serve when score >= p", for increasing p."""

    scores: np.ndarray
    precision: np.ndarray

    def threshold(self, delta: float) -> float:
        """The lowest score whose held-out precision is at least ``1 - delta``."""
        ok = np.nonzero(self.precision >= 1.0 - delta)[0]
        return float(self.scores[ok[0]]) if len(ok) else 1.01

    def precision_at(self, score: float) -> float:
        i = int(np.searchsorted(self.scores, score, side="right")) - 1
        return float(self.precision[max(i, 0)])


Layers = list[tuple[np.ndarray, np.ndarray]]


class Verifier:
    """An ensemble of small MLPs (averaged probabilities): seeds disagree on hard pairs."""

    def __init__(
        self,
        members: list[Layers],
        mean: np.ndarray,
        std: np.ndarray,
        calibration: PrecisionCurve,
        meta: dict[str, object],
        *,
        stack: Stack | None = None,
        cross: CrossEncoder | None = None,
    ) -> None:
        if (stack is None) != (cross is None):
            raise ValueError("a stacked verifier needs its cross-encoder, and only it does")
        self.members = [
            [(w.astype(np.float32), b.astype(np.float32)) for w, b in layers] for layers in members
        ]
        # Every member's first layer in one matrix: one product instead of one per member.
        self._first_w = np.concatenate([layers[0][0] for layers in self.members], axis=1)
        self._first_b = np.concatenate([layers[0][1] for layers in self.members])
        self.mean = mean.astype(np.float32)
        self.std = std.astype(np.float32)
        self.calibration = calibration
        self.meta = meta
        self.stack = stack
        self.cross = cross

    @property
    def version(self) -> str:
        return str(self.meta.get("version", "unknown"))

    def score_features(self, features: np.ndarray) -> np.ndarray:
        """P(same question) for a (n, d) feature matrix."""
        scaled = (np.atleast_2d(features).astype(np.float32) - self.mean) / self.std
        first = np.maximum(scaled @ self._first_w + self._first_b, 0.0)
        total = np.zeros(len(scaled), dtype=np.float32)
        start = 0
        for layers in self.members:
            width = layers[0][0].shape[1]
            x = first[:, start : start + width]
            start += width
            for i, (w, b) in enumerate(layers[1:], 1):
                x = x @ w + b
                if i < len(layers) - 1:
                    x = np.maximum(x, 0.0)
            total += 1.0 / (1.0 + np.exp(-np.clip(x[:, 0], -30.0, 30.0)))
        result: np.ndarray = total / len(self.members)
        return result

    def mlp_scores(self, features: np.ndarray, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The MLP's score per (cached, asked) pair; 0 where the asked question names or asks
        more than the cached one (``told_apart_by``)."""
        return np.where(told_apart(pairs), 0.0, self.score_features(features)).astype(np.float32)

    def bounds(self, mlp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The lowest and highest final score the cross-encoder could give each pair: where
        both fall on the same side of the decision, reading the pair cannot change it."""
        if self.stack is None:
            return mlp, mlp
        n = len(mlp)
        at_low = stacked(mlp, np.full(n, self.stack.low, dtype=np.float32), self.stack)
        at_high = stacked(mlp, np.full(n, self.stack.high, dtype=np.float32), self.stack)
        return np.minimum(at_low, at_high), np.maximum(at_low, at_high)

    def stacked_scores(
        self, mlp: np.ndarray, pairs: Sequence[tuple[str, str]], which: Sequence[int]
    ) -> np.ndarray:
        """The stack's final scores for the pairs ``which`` (the cross-encoder reads them)."""
        assert self.stack is not None and self.cross is not None
        cross = np.zeros(len(which), dtype=np.float32)
        live = [j for j, i in enumerate(which) if mlp[i] >= self.stack.gate]
        if live:
            cross[live] = self.cross.logits([pairs[which[j]] for j in live])
        return stacked(mlp[list(which)], cross, self.stack)

    def score_pairs(self, features: np.ndarray, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The final score per (cached, asked) pair: the MLP's, or the stack's over both."""
        mlp = self.mlp_scores(features, pairs)
        if self.stack is None or self.cross is None:
            return mlp
        return self.stacked_scores(mlp, pairs, range(len(pairs)))

    @classmethod
    def load(cls, folder: Path, cross_dir: Path | None = None) -> Verifier:
        """The MLP alone; with ``cross_dir``, stacked with the cross-encoder it was fitted with.

        The artifact carries one calibration for each, so either can be served.
        """
        data = np.load(folder / ARTIFACT)
        meta = json.loads((folder / META).read_text()) if (folder / META).exists() else {}
        stack, cross = None, None
        calibration = PrecisionCurve(data["cal_scores"], data["cal_precision"])
        if cross_dir is not None:
            if "stack" not in data:
                raise ValueError(f"{folder} was not fitted with a cross-encoder")
            built = json.loads((cross_dir / "edgecore.json").read_text()).get("version")
            if built != meta.get("cross_encoder"):
                raise ValueError(
                    f"{folder} was calibrated with cross-encoder {meta.get('cross_encoder')}, "
                    f"{cross_dir} holds {built}: run `edgecore models prepare`"
                )
            cross = CrossEncoder(cross_dir)
            stack = Stack(*(float(x) for x in data["stack"]))
            calibration = PrecisionCurve(data["stack_cal_scores"], data["stack_cal_precision"])
        shape = data["shape"]  # (members, layers)
        members = [
            [(data[f"m{j}w{i}"], data[f"m{j}b{i}"]) for i in range(int(shape[1]))]
            for j in range(int(shape[0]))
        ]
        return cls(members, data["mean"], data["std"], calibration, meta, stack=stack, cross=cross)

    def save(self, folder: Path, *, mlp_calibration: PrecisionCurve | None = None) -> None:
        """``mlp_calibration``: for a stacked verifier, the MLP's own (served without it)."""
        folder.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {
            "shape": np.array([len(self.members), len(self.members[0])]),
            "mean": self.mean,
            "std": self.std,
        }
        own = self.calibration if self.stack is None else mlp_calibration
        if own is None:
            raise ValueError("a stacked verifier is saved with the MLP's own calibration too")
        arrays["cal_scores"] = own.scores.astype(np.float32)
        arrays["cal_precision"] = own.precision.astype(np.float32)
        if self.stack is not None:
            arrays["stack"] = self.stack.as_array()
            arrays["stack_cal_scores"] = self.calibration.scores.astype(np.float32)
            arrays["stack_cal_precision"] = self.calibration.precision.astype(np.float32)
        for j, layers in enumerate(self.members):
            for i, (w, b) in enumerate(layers):
                arrays[f"m{j}w{i}"] = w
                arrays[f"m{j}b{i}"] = b
        np.savez(folder / ARTIFACT, **arrays)  # type: ignore[arg-type]
        (folder / META).write_text(json.dumps(self.meta, indent=2) + "\n")


def calibrate(scores: np.ndarray, labels: np.ndarray, z: float = 1.645) -> PrecisionCurve:
    """Precision of serving every pair at or above each score (held-out pairs).

    The Wilson lower bound (one-sided 95 % by default), not the plain ratio: a threshold
    read off a few thousand calibration pairs would otherwise miss ``delta`` on new pairs
    about half the time.
    """
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order].astype(np.float64)
    n = np.arange(1, len(y) + 1, dtype=np.float64)
    p = np.cumsum(y) / n
    centre = p + z * z / (2 * n)
    margin = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    precision = (centre - margin) / (1 + z * z / n)
    # Ascending scores. Serving from a higher threshold serves a subset that is at least as
    # precise (the verifier ranks), so the bound may only rise: small top slices, whose
    # Wilson bound is low for lack of pairs, inherit the bound of larger ones below them.
    s, precision = s[::-1], np.maximum.accumulate(precision[::-1])
    return PrecisionCurve(s.astype(np.float32), precision.astype(np.float32))
