"""What a match decision is made of (pure): its knobs (``MatchPolicy``), the neighbours it
reads (``Candidate``), the steps it ran (``Step``) and its verdict (``Match``); the entry's
confidence at a score, and the refusals every look shares. ``edge.cache.match`` runs the
chain over them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge.settings import CacheSettings


@dataclass(frozen=True)
class Candidate:
    entry_id: str
    cosine: float
    prompt: str
    vector: np.ndarray | None
    observations: tuple[tuple[float, bool], ...] = ()


def _default(name: str) -> Any:
    """The cache setting's default: one place for it (edge.settings.CacheSettings)."""
    return CacheSettings.model_fields[name].default


@dataclass(frozen=True)
class MatchPolicy:
    """The decision's knobs: a neighbour closer than the floor, certified at delta."""

    floor: float = _default("candidate_floor")
    delta: float = _default("false_hit_budget")
    prior_strength: float = _default("prior_strength")
    explore_rate: float = _default("explore_rate")
    # Without a verifier: None serves exact repeats only; a number serves neighbours at
    # least this close by cosine alone (opposites embed at 0.95-0.99: an operator's risk).
    min_similarity: float | None = _default("min_similarity")
    contrast: bool = True  # veto opposite-meaning candidates (off only to measure it)
    band: bool = _default("cross_encoder_band")  # cross-encoder only where it can change it

    @classmethod
    def of(cls, cache: CacheSettings) -> MatchPolicy:
        return cls(
            floor=cache.candidate_floor,
            delta=cache.false_hit_budget,
            prior_strength=cache.prior_strength,
            explore_rate=cache.explore_rate,
            min_similarity=cache.min_similarity,
            band=cache.cross_encoder_band,
        )


@dataclass(frozen=True)
class Step:
    """One step of the decision and what it found: ``eval cache --show-false-hits`` and the
    debug log show them."""

    name: str
    verdict: str

    def __str__(self) -> str:
        return f"{self.name}: {self.verdict}"


@dataclass(frozen=True)
class Match:
    candidate: Candidate | None
    score: float
    confidence: float
    serve: bool
    # none | below_floor | exact | reworded | verified | respelled | in_context | rejected |
    # explore | cosine | contrast | exact_only (no verifier: semantic matching off) |
    # unconfirmed (respelled)
    reason: str
    contrast: str | None = None  # with reason "contrast": which (contrast.CONTRASTS)
    steps: tuple[Step, ...] = ()  # the chain as it ran; the last step decided

    @property
    def decided_by(self) -> str:
        return self.steps[-1].name if self.steps else "none"


NO_MATCH = Match(None, 0.0, 0.0, False, "none")


def confidence(
    score: float, prior: float, observations: Sequence[tuple[float, bool]], strength: float
) -> float:
    """Posterior mean of "serving this entry at ``score`` is right" (Beta-Bernoulli)."""
    right = sum(1 for s, ok in observations if ok and s <= score)
    wrong = sum(1 for s, ok in observations if not ok and s >= score)
    return (strength * prior + right) / (strength + right + wrong)


def below_floor(candidates: Sequence[Candidate]) -> Match:
    """The refusal when no neighbour reached the floor: the closest one, or none at all."""
    best = max(candidates, key=lambda c: c.cosine, default=None)
    return Match(best, 0.0, 0.0, False, "below_floor") if best else NO_MATCH


def closest_vetoed(live: Sequence[Candidate], told: Sequence[str | None]) -> Match:
    """The refusal when the contrast veto refused every candidate: the closest one's."""
    i = max(range(len(live)), key=lambda j: live[j].cosine)
    return Match(live[i], 0.0, 0.0, False, "contrast", told[i])


def vetoed(why: Sequence[str | None]) -> str:
    """How many were vetoed and why: "2 of 3 vetoed (antonym, number)"."""
    kinds = sorted({w for w in why if w})
    n = sum(1 for w in why if w)
    return f"{n} of {len(why)} vetoed" + (f" ({', '.join(kinds)})" if kinds else "")
