"""The edge's long-lived services, built in the app's lifespan and passed explicitly."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from edge.cache.match import Matcher
from edge.cache.store import SemanticCache
from edge.embedder import BatchingEmbedder
from edge.metrics import EdgeMetrics
from edge.routing.router import Router
from edge.settings import EdgeSettings
from edge.tenancy.keys import KeyStore
from edge.tenancy.limits import Limiter
from edge.tiers.local_model import LocalModel
from edge.upstream.pool import CorePool

log = logging.getLogger("edgecore.edge")


@dataclass
class EdgeServices:
    settings: EdgeSettings
    router: Router
    metrics: EdgeMetrics
    core: CorePool
    embedder: BatchingEmbedder | None
    cache: SemanticCache | None
    local: LocalModel | None
    keys: KeyStore
    limiter: Limiter
    matcher: Matcher
    _background: set[asyncio.Task[None]] = field(default_factory=set)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run follow-up work (cache stores) after the response, without losing the task."""
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("background task failed: %r", task.exception())

    async def drain(self, timeout: float = 5.0) -> None:
        if self._background:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(*self._background, return_exceptions=True), timeout
                )
