"""Should this cached answer be served for this question? (pure; no I/O)

Redis returns the nearest entries inside the request's hard partition; this module decides.

1. Below ``floor`` cosine a neighbour is not even a candidate (no verifier run).
2. The same question, word for word, is served.
3. Otherwise the pairwise verifier scores each candidate (its MLP, then the cross-encoder
   on what the MLP did not rule out); the best one is served when the entry's estimated
   precision at that score is at least ``1 - delta``.

Per-entry adaptation, in the spirit of vCache (Schroeder et al., arXiv 2502.03771;
implemented from the paper): the verifier's held-out calibration is a prior worth
``prior_strength`` observations, and each entry's own history of (score, was the answer
right) updates it. Because correctness can only rise with the score, a right answer at a
lower score supports serving at this one, and a wrong answer at a higher score counts
against it. Entries that turned out wrong stop being served; entries that keep being
confirmed get served at lower scores. Labels come for free whenever a candidate was not
served (the fresh answer is compared with the cached one); to keep learning, a small and
shrinking share of would-be hits is sent to the model anyway ("explore").
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edge.settings import EdgeSettings
from edge.verifier import ARTIFACT, Verifier, pair_features

log = logging.getLogger("edgecore.edge.cache")


@dataclass(frozen=True)
class Candidate:
    entry_id: str
    cosine: float
    prompt: str
    vector: np.ndarray | None
    observations: tuple[tuple[float, bool], ...] = ()


@dataclass(frozen=True)
class MatchPolicy:
    # Defaults as EdgeSettings': a neighbour closer than the floor, certified at delta.
    floor: float = 0.92
    delta: float = 0.1
    prior_strength: float = 20.0
    explore_rate: float = 0.05
    min_similarity: float = 0.95  # cosine threshold when no verifier is installed


@dataclass(frozen=True)
class Match:
    candidate: Candidate | None
    score: float
    confidence: float
    serve: bool
    reason: str  # none | below_floor | exact | verified | rejected | explore | cosine


NO_MATCH = Match(None, 0.0, 0.0, False, "none")


def normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def confidence(
    score: float, prior: float, observations: Sequence[tuple[float, bool]], strength: float
) -> float:
    """Posterior mean of "serving this entry at ``score`` is right" (Beta-Bernoulli)."""
    right = sum(1 for s, ok in observations if ok and s <= score)
    wrong = sum(1 for s, ok in observations if not ok and s >= score)
    return (strength * prior + right) / (strength + right + wrong)


class Matcher:
    def __init__(self, verifier: Verifier | None, policy: MatchPolicy) -> None:
        self.verifier = verifier
        self.policy = policy

    @property
    def blocking(self) -> bool:
        """Whether ``decide`` may take milliseconds (a cross-encoder run): call it off-loop."""
        return self.verifier is not None and self.verifier.cross is not None

    @property
    def threshold(self) -> float:
        """Verifier score above which a fresh entry is served (from ``delta``)."""
        if self.verifier is None:
            return self.policy.min_similarity
        return self.verifier.calibration.threshold(self.policy.delta)

    def decide(
        self,
        vector: np.ndarray,
        text: str,
        candidates: Sequence[Candidate],
        *,
        draw: float = 1.0,
    ) -> Match:
        """``draw`` is a uniform random number in [0, 1) for exploration (1.0: never)."""
        p = self.policy
        query = normalize(text)
        for c in candidates:  # the same words: whatever the floor
            if normalize(c.prompt) == query:
                return Match(c, 1.0, 1.0, True, "exact")
        live = [c for c in candidates if c.cosine >= p.floor]
        if not live:
            best = max(candidates, key=lambda c: c.cosine, default=None)
            return Match(best, 0.0, 0.0, False, "below_floor") if best else NO_MATCH
        if self.verifier is None:
            best = max(live, key=lambda c: c.cosine)
            ok = best.cosine >= p.min_similarity
            return Match(best, best.cosine, best.cosine, ok, "cosine" if ok else "rejected")
        scored = [c for c in live if c.vector is not None]
        if not scored:
            return Match(live[0], 0.0, 0.0, False, "rejected")
        features = np.stack([pair_features(c.vector, vector, c.prompt, text) for c in scored])  # type: ignore[arg-type]
        scores = self.verifier.score_pairs(features, [(c.prompt, text) for c in scored])
        i = int(np.argmax(scores))
        best, score = scored[i], float(scores[i])
        prior = self.verifier.calibration.precision_at(score)
        conf = confidence(score, prior, best.observations, p.prior_strength)
        if conf < 1.0 - p.delta:
            return Match(best, score, conf, False, "rejected")
        # Explore less as the entry's history grows: its estimate needs fewer checks.
        rate = p.explore_rate * p.prior_strength / (p.prior_strength + len(best.observations))
        if draw < rate:
            return Match(best, score, conf, False, "explore")
        return Match(best, score, conf, True, "verified")


def load_matcher(settings: EdgeSettings) -> Matcher:
    """The configured policy, with the prepared verifier when there is one."""
    verifier: Verifier | None = None
    if (settings.verifier_dir() / ARTIFACT).exists():
        try:
            cross = settings.cross_encoder_dir() if settings.cache_cross_encoder else None
            verifier = Verifier.load(settings.verifier_dir(), cross)
        except Exception as exc:  # never serve on a verifier (or calibration) we cannot trust
            log.error(
                "cache verifier unusable (%s): cache hits need cosine >= %.2f",
                exc,
                settings.cache_min_similarity,
            )
    else:
        log.warning(
            "no cache verifier in %s: cache hits need cosine >= %.2f",
            settings.verifier_dir(),
            settings.cache_min_similarity,
        )
    policy = MatchPolicy(
        floor=settings.cache_candidate_floor,
        delta=settings.cache_false_hit_budget,
        prior_strength=settings.cache_prior_strength,
        explore_rate=settings.cache_explore_rate,
        min_similarity=settings.cache_min_similarity,
    )
    return Matcher(verifier, policy)
