"""The edge's ASGI app and its lifespan (models, Redis pool, HTTP/2 client to the core)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route
from threadpoolctl import threadpool_limits

from edge.cache.loading import load_matcher
from edge.cache.step import CacheStep
from edge.cache.store import SemanticCache, connect
from edge.embedder import BatchingEmbedder, Embedder
from edge.http import admin as cache_admin
from edge.http import ops
from edge.http.chat import chat_completions
from edge.http.completions import text_completions
from edge.http.embeddings import embeddings
from edge.http.middleware import TierHeaders
from edge.http.openapi import openapi
from edge.http.responses import responses
from edge.metrics import EdgeMetrics
from edge.pipeline import EdgePipeline
from edge.routing.model import RouterModel
from edge.routing.router import Router, RouteRules
from edge.services import EdgeServices
from edge.settings import EdgeSettings
from edge.tenancy.keys import KeyStore
from edge.tenancy.limits import Limiter
from edge.tiers.core import CoreTier
from edge.tiers.local import LocalTier
from edge.tiers.local_model import LocalModel, served_name
from edge.upstream.pool import CorePool
from shared import tracing
from shared.accesslog import AccessLog
from shared.disconnect import RememberDisconnect
from shared.errors import EXCEPTION_HANDLERS
from shared.tasks import cancel_and_wait

log = logging.getLogger("edgecore.edge")


async def _load(settings: EdgeSettings) -> tuple[BatchingEmbedder | None, LocalModel | None]:
    """Load the ONNX models off the event loop; a missing model disables its feature."""
    embedder: BatchingEmbedder | None = None
    local: LocalModel | None = None
    embed_dir = settings.embed_model_dir()
    if embed_dir.exists():
        e = await asyncio.to_thread(Embedder, embed_dir, threads=settings.embed.threads)
        embedder = BatchingEmbedder(
            e,
            max_batch=settings.embed.max_batch,
            window_ms=settings.embed.batch_window_ms,
            workers=settings.embed.worker_count(),
        )
    else:
        log.warning(
            "no embedding model at %s: cache disabled (run `edgecore models prepare`)", embed_dir
        )
    model_dir = settings.resolved_edge_model_dir()
    if model_dir.exists():
        local = await asyncio.to_thread(
            LocalModel,
            model_dir,
            threads=settings.local.threads,
            max_concurrency=settings.local.max_concurrency,
            queue_timeout_s=settings.local.queue_timeout_s,
            context_tokens=settings.local.context_tokens,
            max_new_tokens=settings.local.max_new_tokens,
            repetition_penalty=settings.local.repetition_penalty,
            provider=settings.local.provider,
            restart_backoff_s=settings.local.restart_backoff_s,
            batching=settings.local.batching,
        )
    else:
        log.warning("no edge model at %s: every request goes to the core", model_dir)
    return embedder, local


def _key_store(settings: EdgeSettings) -> KeyStore:
    if settings.keys_file is not None:
        return KeyStore(settings.keys_file)
    if settings.profile == "prod":
        raise RuntimeError(
            "EDGECORE_EDGE_PROFILE=prod needs EDGECORE_EDGE_KEYS_FILE: refusing to serve "
            "without API keys (create one with `edgecore keys add TENANT`)"
        )
    log.warning(
        "NO API KEYS CONFIGURED: anyone who can reach this edge may use it (dev profile). "
        "Set EDGECORE_EDGE_KEYS_FILE; the prod profile refuses to start without it."
    )
    return KeyStore(None)


def _router(settings: EdgeSettings, model: RouterModel | None, local: LocalModel | None) -> Router:
    rules = RouteRules(
        auto_model=settings.auto_model,
        edge_model=settings.edge_model,
        core_model=settings.core_model,
        max_prompt_chars=settings.route.max_prompt_chars,
        max_tokens=settings.route.max_tokens,
        # The model folder may have a smaller window than the setting.
        edge_context_tokens=local.context_tokens if local else settings.local.context_tokens,
        policy=settings.route.policy,
    )
    return Router(rules, model, settings.route)  # the route section, whole


def create_app(settings: EdgeSettings) -> Starlette:
    if not settings.edge_model:  # the edge model's folder names it
        name = served_name(settings.resolved_edge_model_dir())
        settings = settings.model_copy(update={"edge_model": name})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Process-wide (OpenBLAS has one pool): set here, restored when the app stops.
        blas = threadpool_limits(limits=settings.blas_threads, user_api="blas")
        tracing.setup("edgecore-edge")  # exports only with an OTLP endpoint configured
        embedder, local = await _load(settings)
        router_model: RouterModel | None = None
        if (settings.router_dir() / "router.npz").exists():
            router_model = RouterModel.load(settings.router_dir())
        else:
            log.warning("no trained router in %s: routing by rules only", settings.router_dir())
        keys = _key_store(settings)
        # One pool for the cache and the rate limits; connections are made lazily, so a
        # Redis that is down at start only degrades those two features.
        redis = connect(settings.redis.url, timeout_s=settings.redis.timeout_s)
        cache: SemanticCache | None = None
        if settings.cache.enabled and embedder is not None:
            cache = SemanticCache(
                redis,
                index=settings.cache.index,
                dim=embedder.dim,
                ttl_s=settings.cache.ttl_s,
                top_k=settings.cache.top_k,
                floor=settings.cache.candidate_floor,
                backoff_s=settings.redis.backoff_s,
            )
        core = CorePool.configured(settings.core_specs(), settings.core)
        await core.probe()
        probes = asyncio.create_task(core.probe_forever(settings.core.probe_interval_s))
        router = _router(settings, router_model if embedder is not None else None, local)
        metrics = EdgeMetrics.create()
        if router_model is not None:
            metrics.observe_router(router_model.meta)
        if local is not None:
            metrics.edge_model_running.set_function(lambda: local.running)
            metrics.edge_model_waiting.set_function(lambda: local.waiting)
            metrics.edge_model_cancelled.set_function(lambda: local.cancelled)
            metrics.edge_model_restarts.set_function(lambda: local.restarts)
        # The stages, built once: the pipeline composes them for every request.
        matcher = load_matcher(settings, metrics)
        matching = ThreadPoolExecutor(settings.cache.match_workers(), thread_name_prefix="match")
        cache_step = CacheStep(
            cache, embedder, matcher, metrics, settings.cache,
            redis_timeout_s=settings.redis.timeout_s, executor=matching,
        )  # fmt: skip
        pipeline = EdgePipeline(
            cache_step,
            router,
            CoreTier(core, metrics, settings.core, model=settings.core_model),
            LocalTier(
                local, metrics, name=settings.edge_model, retry_after_s=settings.retry_after_s
            ),
            metrics,
            settings,
        )
        app.state.edge = EdgeServices(
            settings, metrics, pipeline, keys, Limiter(redis),
            core=core, local=local, embedder=embedder, cache=cache, matcher=matcher,
        )  # fmt: skip
        app.state.openapi = openapi(
            [settings.auto_model, settings.edge_model, settings.core_model],
            settings.limits.max_messages,
            [settings.embed.model, *settings.core.embed_models],
        )
        if embedder is not None:
            embedder.start()
        try:
            yield
        finally:
            await cancel_and_wait([probes])
            await cache_step.drain()
            matching.shutdown(wait=False, cancel_futures=True)
            await core.aclose()
            if embedder is not None:
                await embedder.close()
            await redis.aclose()
            if local is not None:
                await asyncio.to_thread(local.close)
            blas.restore_original_limits()
            tracing.flush()

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/completions", text_completions, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            *ops.ROUTES,
            *cache_admin.ROUTES,
        ],
        # Outermost first: the headers (and the arrival time the overhead counts from), the
        # trace's server span, the access-log line, a client's leaving seen by every listener.
        middleware=[
            Middleware(TierHeaders),
            Middleware(tracing.TraceMiddleware, service="edge"),
            Middleware(AccessLog, service="edge"),
            Middleware(RememberDisconnect),
        ],
        exception_handlers=dict(EXCEPTION_HANDLERS),
        lifespan=lifespan,
    )
