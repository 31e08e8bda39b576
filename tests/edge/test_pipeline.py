"""The edge's request path (edge.pipeline) in process, with fake stages (issue 36).

Every branch of ``EdgePipeline.handle`` and ``fallback``: an exact hit, a miss routed to
either tier, a rule (a named model), an unknown model and a refused parameter (both before
any work), the core unavailable for ``auto`` (the edge model answers, degraded) and for a
pinned model or a 503 tenant (503 + Retry-After). Text completions and the Responses API
go through the same ``handle`` (their ``Ask``), with the same limits checked in one place.
The real cache step and router run; the tiers, Redis and the embedder are fakes, the way
httpx's ``MockTransport`` stands in for the network. No servers, no models.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from edge.asks import Ask, ChatAsk, CompletionAsk, ResponsesAsk
from edge.cache.decision import MatchPolicy
from edge.cache.match import Matcher
from edge.cache.step import CacheStep
from edge.cache.store import CachedAnswer
from edge.context import Answer, RequestContext
from edge.embedder import BatchingEmbedder
from edge.metrics import EdgeMetrics
from edge.pipeline import EdgePipeline
from edge.routing.router import Router, RouteRules
from edge.settings import EdgeSettings, RouteSettings
from edge.tenancy.keys import Tenant
from edge.upstream.errors import CoreUnavailable
from shared.errors import ApiError
from shared.schemas import ChatCompletionRequest, CompletionRequest, ResponsesRequest
from tests.edge.fakes import Embedder

AUTO, EDGE, CORE = "auto", "edge-small", "core-large"


class Store:
    """Redis as the cache step uses it: one exact entry, no neighbours, stores recorded."""

    def __init__(self) -> None:
        self.exact: dict[str, CachedAnswer] = {}
        self.reads = 0
        self.stored: list[CachedAnswer] = []

    async def lookup_exact(self, *, partition: str, context: str, text: str) -> Any:
        self.reads += 1
        return self.exact.get(text)

    async def lookup(self, *_: Any, **__: Any) -> list[Any]:
        self.reads += 1
        return []

    async def store(self, vector: Any, *, answer: CachedAnswer, **_: Any) -> None:
        self.stored.append(answer)


class CoreTier:
    model = CORE

    def __init__(self) -> None:
        self.down: CoreUnavailable | None = None
        self.asked: list[str] = []
        self.forwarded: list[str] = []  # the paths forwarded as they are
        self.failure: ApiError | None = None  # what the core answers a forwarded request
        self.pool = self  # the pipeline asks the pool whether any core takes traffic

    def candidates(self) -> list[object]:
        return [] if self.down else [object()]

    async def answer(self, request: Request, req: ChatCompletionRequest, data: Any,
                     ctx: RequestContext, tenant: Tenant) -> Response:  # fmt: skip
        self.asked.append(req.model)
        if self.down is not None:
            raise self.down
        ctx.tier = "core"
        ctx.answered(Answer("from the core", "stop", None, CORE))
        return JSONResponse({"tier": "core"})

    async def forward(self, request: Request, ctx: RequestContext, payload: dict[str, Any],
                      *, path: str, tenant: Tenant) -> Response:  # fmt: skip
        self.forwarded.append(path)
        assert payload["model"] == CORE  # "auto" is resolved before forwarding
        if self.down is not None:
            raise self.down
        if self.failure is not None:
            raise self.failure
        ctx.tier = "core"
        return JSONResponse({"tier": "core"})


class LocalTier:
    model = None
    available = True

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.completed: list[str] = []

    async def complete(self, request: Request, req: CompletionRequest,
                       ctx: RequestContext) -> Response:  # fmt: skip
        self.completed.append(str(req.prompt))
        ctx.tier = "edge"
        return JSONResponse({"tier": "edge"})

    async def answer(self, request: Request, req: ChatCompletionRequest,
                     ctx: RequestContext) -> Response:  # fmt: skip
        self.asked.append(req.model)
        ctx.tier = "edge"
        ctx.answered(Answer("from the edge", "stop", None, EDGE))
        return JSONResponse({"tier": "edge"})


class Stages:
    """One pipeline and its fakes, for one test."""

    def __init__(self, settings: EdgeSettings) -> None:
        self.metrics = EdgeMetrics.create()
        self.store = Store()
        self.embedder = BatchingEmbedder(Embedder())  # type: ignore[arg-type]
        cache = CacheStep(
            self.store,  # type: ignore[arg-type]
            self.embedder,
            Matcher(None, MatchPolicy()),
            self.metrics,
            settings.cache,
            redis_timeout_s=1.0,
        )
        rules = RouteRules(AUTO, EDGE, CORE, max_prompt_chars=100, max_tokens=256)
        self.router = Router(rules, None, RouteSettings())
        self.core, self.local = CoreTier(), LocalTier()
        self.pipeline = EdgePipeline(cache, self.router, self.core, self.local,  # type: ignore[arg-type]
                                     self.metrics, settings)  # fmt: skip
        self.ctx = RequestContext(request_id="r", started=time.perf_counter(), metrics=self.metrics)

    def ask(self, content: str = "Say hi.", tenant: Tenant | None = None, **body: Any) -> Response:
        data = {"model": AUTO, "temperature": 0, "messages": [{"role": "user", "content": content}]}
        data.update(body)
        return self.run(ChatAsk(data, ChatCompletionRequest.model_validate(data)), tenant)

    def complete(self, prompt: Any = "Once upon", **body: Any) -> Response:
        data = {"model": AUTO, "prompt": prompt, **body}
        return self.run(CompletionAsk(data, CompletionRequest.model_validate(data)))

    def respond(self, tenant: Tenant | None = None, **body: Any) -> Response:
        data = {"model": AUTO, "input": "Say hi.", **body}
        return self.run(ResponsesAsk(data, ResponsesRequest.model_validate(data)), tenant)

    def run(self, ask: Ask, tenant: Tenant | None = None) -> Response:
        request = Request({"type": "http", "method": "POST", "path": "/v1/x", "headers": []})

        async def run() -> Response:
            self.embedder.start()
            try:
                response = await self.pipeline.handle(request, self.ctx, tenant or Tenant(), ask)
                await send_through(response)  # its background (the remember stage) runs then
                return response
            finally:
                await self.pipeline.cache.drain()
                await self.embedder.close()

        return asyncio.run(run())


async def send_through(response: Response) -> None:
    scope = {"type": "http", "method": "POST", "path": "/v1/x", "headers": []}

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(3600)  # the client never leaves
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        pass

    await response(scope, receive, send)


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[EdgeSettings]:
    for name in list(os.environ):
        if name.startswith("EDGECORE_EDGE_"):
            monkeypatch.delenv(name)
    yield EdgeSettings()


@pytest.fixture
def path(settings: EdgeSettings) -> Stages:
    return Stages(settings)


def test_an_exact_hit_is_answered_from_the_cache(path: Stages) -> None:
    path.store.exact["Say hi."] = CachedAnswer("hi!", "stop", None, EDGE, entry_id="e1")
    r = path.ask("Say hi.")
    assert r.status_code == 200 and path.ctx.tier == "cache" and path.ctx.cache == "hit"
    assert b"hi!" in r.body
    assert not path.core.asked and not path.local.asked and not path.store.stored


def test_a_miss_is_routed_answered_and_remembered(path: Stages) -> None:
    r = path.ask("Say hi.")  # short: the length rule sends it to the edge model
    assert r.status_code == 200 and path.ctx.tier == "edge" and path.ctx.cache == "miss"
    assert path.local.asked == [AUTO] and not path.core.asked
    assert [a.content for a in path.store.stored] == ["from the edge"]


def test_a_long_prompt_goes_to_the_core(path: Stages) -> None:
    path.ask("Explain " + "the history of lighthouses " * 10)
    assert path.core.asked == [AUTO] and not path.local.asked
    assert [a.content for a in path.store.stored] == ["from the core"]


def test_a_named_model_is_a_rule(path: Stages) -> None:
    path.ask("Say hi.", model=CORE)
    assert path.core.asked == [CORE] and not path.local.asked


def test_an_unknown_model_fails_before_any_work(path: Stages) -> None:
    with pytest.raises(ApiError) as e:
        path.ask("Say hi.", model="gpt-9")
    assert e.value.status == 404 and e.value.code == "model_not_found"
    assert path.store.reads == 0 and not path.core.asked and not path.local.asked


def test_a_parameter_no_tier_honours_is_refused_before_any_work(path: Stages) -> None:
    with pytest.raises(ApiError) as e:
        path.ask("Say hi.", store=True)
    assert e.value.status == 400 and e.value.code == "unsupported_parameter"
    assert e.value.param == "store" and path.store.reads == 0


def test_a_parameter_the_edge_model_lacks_sends_auto_to_the_core(path: Stages) -> None:
    path.ask("Say hi.", logprobs=True)
    assert path.core.asked == [AUTO] and not path.local.asked


def test_core_unavailable_for_auto_falls_back_to_the_edge_model(path: Stages) -> None:
    path.core.down = CoreUnavailable("core-unreachable", "connection refused")
    r = path.ask("Explain " + "the history of lighthouses " * 10)
    assert r.status_code == 200 and path.ctx.tier == "edge"
    assert path.ctx.degraded == "core-unreachable"
    assert path.core.asked == [AUTO] and path.local.asked == [AUTO]


def test_core_unavailable_for_a_pinned_model_is_503(path: Stages) -> None:
    path.core.down = CoreUnavailable("core-unreachable")
    with pytest.raises(ApiError) as e:
        path.ask("Say hi.", model=CORE)
    assert e.value.status == 503 and int(e.value.headers["retry-after"]) > 0
    assert not path.local.asked


def test_a_503_tenant_gets_503_instead_of_a_fallback(path: Stages) -> None:
    path.core.down = CoreUnavailable("core-unavailable", "HTTP 503")
    with pytest.raises(ApiError) as e:
        path.ask("Explain " + "the history of lighthouses " * 10, tenant=Tenant(degrade="503"))
    assert e.value.status == 503 and not path.local.asked


def test_a_saturated_core_is_remembered_by_the_router(path: Stages) -> None:
    path.core.down = CoreUnavailable("core-saturated", "HTTP 429")
    path.ask("Explain " + "the history of lighthouses " * 10)
    assert path.pipeline.saturation.active and path.pipeline.load().core_saturated
    assert path.ctx.degraded == "core-saturated"


def test_the_core_policy_never_falls_back_with_a_parameter_the_edge_lacks(path: Stages) -> None:
    # A tenant pinned to the core asking for logprobs: the edge model cannot honour them,
    # so an unavailable core is a 503, not a small model's answer without them.
    path.core.down = CoreUnavailable("core-unreachable")
    with pytest.raises(ApiError) as e:
        path.ask("Say hi.", tenant=Tenant(route_policy="core"), logprobs=True)
    assert e.value.status == 503 and not path.local.asked


def test_limits_are_the_same_for_every_endpoint(path: Stages) -> None:
    s = path.pipeline.settings.limits
    with pytest.raises(ApiError) as e:
        path.ask("x" * (s.max_prompt_chars + 1))
    assert (e.value.code, e.value.param) == ("context_length_exceeded", "messages")
    with pytest.raises(ApiError) as e:
        path.complete("x" * (s.max_prompt_chars + 1))
    assert (e.value.code, e.value.param) == ("context_length_exceeded", "prompt")
    with pytest.raises(ApiError) as e:
        path.complete(max_tokens=s.max_output_tokens + 1)
    assert (e.value.code, e.value.param) == ("max_tokens_too_large", "max_tokens")
    with pytest.raises(ApiError) as e:
        path.respond(max_output_tokens=s.max_output_tokens + 1)
    assert (e.value.code, e.value.param) == ("max_tokens_too_large", "max_output_tokens")
    assert path.store.reads == 0 and not path.core.forwarded and not path.local.completed


def test_a_text_completion_is_routed_and_never_cached(path: Stages) -> None:
    path.complete("Once upon a time")  # short: the edge model continues it
    assert path.local.completed == ["Once upon a time"] and not path.core.forwarded
    path.complete("Explain " + "the history of lighthouses " * 10)
    assert path.core.forwarded == ["/v1/completions"]
    assert path.store.reads == 0 and not path.store.stored


def test_a_text_completion_falls_back_like_chat(path: Stages) -> None:
    path.core.down = CoreUnavailable("core-unreachable")
    path.complete("Explain " + "the history of lighthouses " * 10)
    assert path.ctx.degraded == "core-unreachable" and len(path.local.completed) == 1
    with pytest.raises(ApiError) as e:
        path.complete("Once", model=CORE)
    assert e.value.status == 503 and len(path.local.completed) == 1


def test_a_text_completion_no_tier_honours_is_refused(path: Stages) -> None:
    with pytest.raises(ApiError) as e:
        path.complete("Once", suffix="the end")
    assert (e.value.status, e.value.param) == (400, "suffix") and not path.core.forwarded


def test_the_responses_api_goes_to_the_core_only(path: Stages) -> None:
    path.respond()  # "auto": the edge model cannot serve it
    assert path.core.forwarded == ["/v1/responses"] and not path.local.asked
    with pytest.raises(ApiError) as e:
        path.respond(model=EDGE)
    assert e.value.status == 400 and e.value.param == "model" and CORE in e.value.message
    with pytest.raises(ApiError) as e:
        path.respond(model="gpt-9")
    assert e.value.status == 404


def test_the_responses_api_never_falls_back_to_the_edge_model(path: Stages) -> None:
    path.core.down = CoreUnavailable("core-unreachable")
    for tenant in (Tenant(), Tenant(route_policy="core")):
        with pytest.raises(ApiError) as e:
            path.respond(tenant)
        assert e.value.status == 503 and "retry-after" in e.value.headers
    assert not path.local.asked and not path.local.completed


def test_engines_without_the_responses_api_give_501(path: Stages) -> None:
    path.core.failure = ApiError(404, "Not Found")
    with pytest.raises(ApiError) as e:
        path.respond()
    assert e.value.status == 501 and e.value.code == "not_implemented"


def test_an_incomplete_answer_is_not_remembered(path: Stages) -> None:
    async def unfinished(*_: Any) -> Response:  # the client left mid-stream: nothing reported
        return JSONResponse({"tier": "edge"})

    path.local.answer = unfinished  # type: ignore[method-assign]
    path.ask("Say hi.")
    assert path.ctx.answer is None and not path.store.stored
