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
    # The resources endpoints besides the pipeline read directly (embeddings, readiness,
    # admin), passed in as the lifespan built them: the same objects the stages hold.
    core: CorePool
    local: LocalModel | None
    embedder: BatchingEmbedder | None
    cache: SemanticCache | None
    matcher: Matcher
