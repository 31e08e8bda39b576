"""The semantic cache: is this the same question, and what did we answer then?

``CacheStep`` is the pipeline's stage (lookup before routing, remember after). Below it:
``SemanticCache`` (Redis vector search, ``store``), the match decision (``Matcher``:
verifier, cross-encoder, contrast checks) and the pure cache keys (``keys``).
"""

from edge.cache.decision import Match, MatchPolicy
from edge.cache.loading import load_matcher
from edge.cache.match import Matcher
from edge.cache.step import CacheLookup, CacheStep
from edge.cache.store import CachedAnswer, CacheUnavailable, SemanticCache

__all__ = [
    "CacheLookup",
    "CacheStep",
    "CacheUnavailable",
    "CachedAnswer",
    "Match",
    "MatchPolicy",
    "Matcher",
    "SemanticCache",
    "load_matcher",
]
