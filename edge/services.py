"""What the edge's handlers read: the pipeline and the few resources endpoints need directly.

Built once in the app's lifespan (``edge.app``) and kept on ``app.state.edge``. Handlers
never reach past it into module globals; the stages inside the pipeline get their own
parts as constructor arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

from edge.cache.match import Matcher
from edge.cache.store import SemanticCache
from edge.embedder import BatchingEmbedder
from edge.metrics import EdgeMetrics
from edge.pipeline import EdgePipeline
from edge.settings import EdgeSettings
from edge.tenancy.keys import KeyStore
from edge.tenancy.limits import Limiter
from edge.tiers.local_model import LocalModel
from edge.upstream.pool import CorePool


@dataclass(frozen=True)
class EdgeServices:
    settings: EdgeSettings
    metrics: EdgeMetrics
    pipeline: EdgePipeline  # every OpenAI endpoint: cache -> route -> tier
    keys: KeyStore
    limiter: Limiter

    # Read directly by endpoints besides chat (embeddings, readiness, admin).
    @property
    def core(self) -> CorePool:
        return self.pipeline.core.pool

    @property
    def local(self) -> LocalModel | None:
        return self.pipeline.local.model

    @property
    def embedder(self) -> BatchingEmbedder | None:
        return self.pipeline.cache.embedder

    @property
    def cache(self) -> SemanticCache | None:
        return self.pipeline.cache.store

    @property
    def matcher(self) -> Matcher:
        return self.pipeline.cache.matcher
