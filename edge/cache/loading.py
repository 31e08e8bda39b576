"""The matcher as the settings ask for it: the prepared models, or word-for-word repeats.

Built once, in the edge's lifespan (and by the benchmarks and ``edgecore eval cache``): the
verifier stacked with the cross-encoder when both are prepared and fit each other, the
speller, and the policy from ``CacheSettings``.
"""

from __future__ import annotations

import logging

from edge.cache.decision import MatchPolicy
from edge.cache.match import Matcher
from edge.cache.spelling import Speller, embedder_words
from edge.cache.verifier import ARTIFACT, Verifier
from edge.metrics import EdgeMetrics
from edge.settings import EdgeSettings

log = logging.getLogger("edgecore.edge.cache")


def _without_verifier(settings: EdgeSettings) -> str:
    if settings.cache.min_similarity is None:
        return (
            "SEMANTIC CACHE OFF: only word-for-word repeats are served "
            "(run `edgecore models prepare` with the cache training data to enable it)"
        )
    return (
        f"cache hits need cosine >= {settings.cache.min_similarity:.2f} alone "
        "(CACHE__MIN_SIMILARITY): opposite questions embed that close, some will be served"
    )


def _load_verifier(settings: EdgeSettings) -> Verifier:
    """The verifier, stacked with the cross-encoder when it is on. A cross-encoder that is
    missing, or is not the one the stack was fitted with, leaves the MLP on its own
    calibration (with an error in the log), not the cache without semantic matching."""
    if settings.cache.cross_encoder:
        try:
            return Verifier.load(settings.verifier_dir(), settings.cross_encoder_dir())
        except (OSError, ValueError) as exc:
            log.error("cache cross-encoder unusable, the MLP verifier decides alone: %s", exc)
    return Verifier.load(settings.verifier_dir())


def load_matcher(settings: EdgeSettings, metrics: EdgeMetrics | None = None) -> Matcher:
    """The configured policy, with the prepared verifier when there is one.

    Without one (``edgecore models prepare`` found no training data) the cache serves
    word-for-word repeats only, and says so loudly, in the log and in the
    ``edgecore_cache_semantic_enabled`` gauge: cosine alone serves opposites.
    """
    verifier: Verifier | None = None
    if (settings.verifier_dir() / ARTIFACT).exists():
        try:
            verifier = _load_verifier(settings)
        except Exception as exc:  # never serve on a verifier (or calibration) we cannot trust
            log.error("cache verifier unusable (%s): %s", exc, _without_verifier(settings))
    else:
        log.warning(
            "no cache verifier in %s: %s", settings.verifier_dir(), _without_verifier(settings)
        )
    speller = None
    if verifier is not None and settings.cache.respell:
        try:
            speller = Speller(embedder_words(settings.embed_model_dir() / "tokenizer.json"))
        except (ImportError, OSError) as exc:  # the cache works without its second look
            log.error("cache respelling off: %s", exc)
    matcher = Matcher(verifier, MatchPolicy.of(settings.cache), speller)
    if metrics is not None:
        metrics.cache_semantic_enabled.set(int(matcher.semantic and settings.cache.enabled))
    return matcher
