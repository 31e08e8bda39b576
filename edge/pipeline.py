"""The edge's request path, in one place, for every OpenAI endpoint: cache -> route ->
tier -> remember. What differs between endpoints is the ``Ask`` (``edge.asks``).

    limits         the edge's request limits, then the parameters no tier honours
    rules (model name, parameters the edge model lacks)  -- unknown models fail here
    cache.exact    (chat only) the same words asked before: hit -> the cached answer
    cache.embed    the conversation's embedding (the cache's and the router's)
    cache.semantic nearest entries + the matcher: hit -> the cached answer
    router         the learned score (or the length rule) under a Load snapshot, and
                   stickiness
    tier           the Ask's verb on core (HTTP/2) | local (edge model): answer a chat,
                   continue a prompt, forward as is; it reports a complete answer to the
                   request's context
    remember       after the response is sent: a complete, cacheable answer is stored
    fallback       the core could not take it before its first byte: "auto" falls back to
                   the edge model (x-edgecore-degraded), a pinned model gets 503

Every stage is built once in the lifespan and passed in, as httpx takes its transport; the
pipeline holds no per-request state (that is the RequestContext).
"""

from __future__ import annotations

import time

import numpy as np
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response

from edge.asks import Ask
from edge.cache.step import CacheLookup, CacheStep
from edge.context import RequestContext
from edge.metrics import EdgeMetrics
from edge.routing.router import Decision, Load, Router, Saturation, rule
from edge.settings import EdgeSettings
from edge.tenancy.keys import Tenant
from edge.tiers.core import CoreTier
from edge.tiers.local import LocalTier
from edge.upstream.pool import CoreUnavailable
from shared.errors import ApiError
from shared.parameters import Refusal
from shared.schemas import ChatCompletionRequest
from shared.tracing import traced_sync


class EdgePipeline:
    def __init__(
        self,
        cache: CacheStep,
        router: Router,
        core: CoreTier,
        local: LocalTier,
        metrics: EdgeMetrics,
        settings: EdgeSettings,
    ) -> None:
        self.cache = cache
        self.router = router
        self.core = core
        self.local = local
        self.metrics = metrics
        self.settings = settings
        self.saturation = Saturation(settings.route.saturation_s)

    async def handle(
        self, request: Request, ctx: RequestContext, tenant: Tenant, ask: Ask
    ) -> Response:
        """One request to any OpenAI endpoint, from the cache or a tier."""
        ask.check(self.settings.limits)
        refused = ask.refusals(core_multimodal=self.settings.core.multimodal)
        if "core" in refused:  # no tier could honour it: say which parameter, do no work
            no = refused["core"]
            raise ApiError(400, no.message(), code="unsupported_parameter", param=no.param)
        # Unknown models fail here, before any work; so does a parameter the pinned tier lacks.
        req, edge_refusal = ask.chat, refused.get("edge")
        ruled = self.rules(req, tenant, edge_refusal)
        found = None
        if ask.cacheable:
            found = await self.cache.exact(req, request.headers, ctx, tenant)
            if found is not None and found.hit is not None:
                return self.cache.reply(req, found.hit, ctx)
        vector = None
        if found is not None or (ruled is None and self.router.needs_embedding):
            vector = await self.cache.embed(req)
        if found is not None:
            found = await self.cache.semantic(found, vector, ctx)
            if found is not None and found.hit is not None:
                return self.cache.reply(req, found.hit, ctx)
        decision = ruled or self.degraded(self.route(req, vector), ctx)
        if decision.tier == "core":
            try:
                return self.remembering(
                    await ask.on_core(self.core, request, ctx, tenant), found, ctx
                )
            except CoreUnavailable as exc:
                decision = self.fallback(exc, decision, tenant, ctx, edge_refusal is None)
        self.metrics.route.labels(decision.tier, decision.reason).inc()
        return self.remembering(await ask.on_edge(self.local, request, ctx), found, ctx)

    def remembering(
        self, response: Response, found: CacheLookup | None, ctx: RequestContext
    ) -> Response:
        """Run the remember stage once ``response`` is sent (a stream's answer is complete
        only then); nothing to do when the cache took no part."""
        if found is not None:
            assert response.background is None  # no tier schedules work of its own
            response.background = BackgroundTask(self.remember, found, ctx)
        return response

    async def remember(self, found: CacheLookup, ctx: RequestContext) -> None:
        """The remember stage: a complete answer the tier reported goes to the cache.

        A coroutine on purpose: Starlette runs a plain function's BackgroundTask in a thread,
        away from the loop the store's task needs."""
        if ctx.answer is not None:
            self.cache.remember(found, ctx.answer)

    def rules(
        self, req: ChatCompletionRequest, tenant: Tenant, edge_refusal: Refusal | None
    ) -> Decision | None:
        return rule(req, self.router.rules, tenant.route_policy, edge_refusal)

    def load(self) -> Load:
        """The router's view of the tiers' load, now."""
        if not self.core.pool.candidates():  # every core's breaker is open: saturated
            self.saturation.mark()
        model = self.local.model
        # A dead model process counts as a full queue: "auto" goes to the core meanwhile.
        high = model is not None and (
            not model.alive or model.waiting >= self.settings.route.edge_queue_high
        )
        return Load(core_saturated=self.saturation.active, edge_queue_high=high)

    @traced_sync("edge.route")
    def route(self, req: ChatCompletionRequest, vector: np.ndarray | None) -> Decision:
        """The router's choice for a request no rule decided, under the current load."""
        t = time.perf_counter()
        decision = self.router.score(req, vector, self.load())
        self.metrics.route_seconds.observe(time.perf_counter() - t)
        if decision.score is not None:
            self.metrics.route_score.observe(decision.score)
        return decision

    def degraded(self, decision: Decision, ctx: RequestContext) -> Decision:
        if decision.degraded:
            ctx.degrade(decision.degraded)
        return decision

    def fallback(
        self,
        exc: CoreUnavailable,
        decision: Decision,
        tenant: Tenant,
        ctx: RequestContext,
        edge_can: bool = True,
    ) -> Decision:
        """The fallback policy: the edge model for "auto", 503 + Retry-After otherwise.

        A client that named the core's model gets that model or an error, never a smaller
        model in disguise, and so does a request the edge model cannot serve (tools, JSON
        mode, logprobs, the Responses API: ``edge_can`` False), whatever rule sent it to
        the core; "auto" may fall back, and says so in x-edgecore-degraded.
        """
        s = self.settings
        if exc.reason == "core-saturated":
            self.saturation.mark()
        pinned = decision.reason in ("model", "features")
        policy = tenant.degrade or s.core.unavailable_policy
        if policy == "503" or not self.local.available or pinned or not edge_can:
            raise exc.error(s.retry_after_s) from None
        ctx.degrade(exc.reason)
        return Decision("edge", "fallback")
