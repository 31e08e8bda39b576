"""The cache step (edge.cache.step) in process, with a fake Redis store and embedder.

Who may use the cache (directives, tenants, sampled requests), what a failing Redis does
(the request goes on without the cache), a semantic hit through the matcher, and what the
remember stage stores. No servers, no models.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest
from starlette.datastructures import Headers

from edge.cache.decision import Candidate, Match, MatchPolicy
from edge.cache.match import Matcher
from edge.cache.preamble import question_of
from edge.cache.step import CacheStep
from edge.cache.store import CachedAnswer, CacheUnavailable
from edge.context import Answer, RequestContext
from edge.embedder import BatchingEmbedder
from edge.metrics import EdgeMetrics
from edge.settings import CacheSettings
from edge.tenancy.keys import Tenant
from shared.schemas import ChatCompletionRequest
from tests.edge.fakes import Embedder

METRICS = EdgeMetrics.create()


class Store:
    def __init__(self) -> None:
        self.exact: dict[str, CachedAnswer] = {}
        self.near: list[tuple[Candidate, CachedAnswer]] = []
        self.reads = 0
        self.stored: list[CachedAnswer] = []
        self.partitions: list[str] = []
        self.down = False

    async def lookup_exact(self, *, partition: str, context: str, text: str) -> Any:
        self.reads += 1
        self.partitions.append(partition)
        if self.down:
            raise CacheUnavailable("down")
        return self.exact.get(text)

    async def lookup(self, *_: Any, **__: Any) -> list[tuple[Candidate, CachedAnswer]]:
        self.reads += 1
        if self.down:
            raise CacheUnavailable("down")
        return self.near

    async def store(self, vector: Any, *, answer: CachedAnswer, **_: Any) -> None:
        self.stored.append(answer)


def request(content: str = "What is a lighthouse?", **body: Any) -> ChatCompletionRequest:
    data = {"model": "auto", "temperature": 0, "messages": [{"role": "user", "content": content}]}
    return ChatCompletionRequest.model_validate({**data, **body})


def context() -> RequestContext:
    return RequestContext(request_id="r", started=time.perf_counter(), metrics=METRICS)


class Step:
    def __init__(
        self, policy: MatchPolicy | None = None, *, matcher: type[Matcher] = Matcher,
        executor: Executor | None = None,
    ) -> None:  # fmt: skip
        self.store = Store()
        self.embedder = BatchingEmbedder(Embedder())  # type: ignore[arg-type]
        self.step = CacheStep(
            self.store,  # type: ignore[arg-type]
            self.embedder,
            matcher(None, policy or MatchPolicy()),
            METRICS,
            CacheSettings(),
            redis_timeout_s=1.0,
            executor=executor,
        )

    def lookup(
        self, req: ChatCompletionRequest, ctx: RequestContext, tenant: Tenant | None = None,
        **headers: str,
    ) -> Any:  # fmt: skip
        async def run() -> Any:
            self.embedder.start()
            try:
                return await self.step.lookup(req, Headers(headers), ctx, tenant or Tenant())
            finally:
                await self.embedder.close()

        return asyncio.run(run())


@pytest.fixture
def cache() -> Step:
    return Step()


def test_an_exact_repeat_is_a_hit_before_any_embedding(cache: Step) -> None:
    cache.store.exact["What is a lighthouse?"] = CachedAnswer("A tower.", "stop", None, "m")
    ctx = context()
    found = cache.lookup(request(), ctx)
    assert found.hit.content == "A tower." and ctx.cache == "hit"
    assert cache.store.reads == 1  # no KNN search: the exact step answered
    assert ctx.extra_headers["x-edgecore-cache-match"].startswith("exact")


@pytest.mark.parametrize(
    ("headers", "expected"),
    [({"x-edgecore-cache": "off"}, "bypass"), ({"cache-control": "no-store"}, "bypass")],
)
def test_a_client_can_turn_the_cache_off(
    cache: Step, headers: dict[str, str], expected: str
) -> None:
    ctx = context()
    assert cache.lookup(request(), ctx, **headers) is None
    assert ctx.cache == expected and cache.store.reads == 0


def test_refresh_writes_without_reading(cache: Step) -> None:
    ctx = context()
    found = cache.lookup(request(), ctx, **{"cache-control": "no-cache"})
    assert found is not None and not found.read and ctx.cache == "refresh"
    assert cache.store.reads == 0


def test_sampled_requests_and_opted_out_tenants_bypass_the_cache(cache: Step) -> None:
    ctx = context()
    assert cache.lookup(request(temperature=0.7), ctx) is None and ctx.cache == "bypass"
    assert cache.lookup(request(), context(), Tenant(cache=False)) is None
    assert cache.store.reads == 0
    opted_in = Step()  # (an embedder is started once per loop)
    sampled = opted_in.lookup(
        request(temperature=0.7), context(), Tenant(cache_nondeterministic=True)
    )
    assert sampled is not None and opted_in.store.reads == 2  # the exact step, then KNN


def test_a_tenant_scoped_to_users_shares_answers_only_within_a_user(cache: Step) -> None:
    scoped = Tenant(cache_scope="user")
    ctx = context()
    assert cache.lookup(request(), ctx, scoped) is None and ctx.cache == "bypass"
    assert cache.store.reads == 0  # no user: neither read nor stored
    # (an embedder is started once per loop: a step per lookup)
    ann = Step().lookup(request(user="ann"), context(), scoped)
    bob = Step().lookup(request(user="bob"), context(), scoped)
    assert ann is not None and bob is not None and ann.partition != bob.partition
    # The same user is the same partition; tenant-wide, who asks does not matter.
    assert Step().lookup(request(user="ann"), context(), scoped).partition == ann.partition
    assert Step().lookup(request(user="ann"), context()).partition == (
        Step().lookup(request(user="bob"), context()).partition
    )


def test_a_failing_redis_sends_the_request_on_without_the_cache(cache: Step) -> None:
    cache.store.down = True
    ctx = context()
    assert cache.lookup(request(), ctx) is None
    assert ctx.cache == "error"


def test_a_near_neighbour_is_served_through_the_matcher() -> None:
    cache = Step(MatchPolicy(min_similarity=0.9))  # no verifier: cosine alone
    near = Candidate("e1", 0.97, "What's a lighthouse?", None)
    cache.store.near = [(near, CachedAnswer("A tower.", "stop", None, "m", 0.97, "e1"))]
    ctx = context()
    found = cache.lookup(request(), ctx)
    assert found.hit is not None and found.hit.entry_id == "e1" and ctx.cache == "hit"
    assert cache.store.reads == 2  # the exact step, then the KNN search


def test_a_decision_that_blocks_runs_on_the_steps_own_threads() -> None:
    threads = []

    class CrossEncoding(Matcher):  # as a matcher with a cross-encoder: milliseconds a call
        @property
        def blocking(self) -> bool:
            return True

        def decide(self, *args: Any, **kwargs: Any) -> Any:
            threads.append(threading.current_thread().name)
            return super().decide(*args, **kwargs)

    with ThreadPoolExecutor(1, thread_name_prefix="matching") as pool:
        cache = Step(MatchPolicy(min_similarity=0.9), matcher=CrossEncoding, executor=pool)
        near = Candidate("e1", 0.97, "What's a lighthouse?", None)
        cache.store.near = [(near, CachedAnswer("A tower.", "stop", None, "m", 0.97, "e1"))]
        found = cache.lookup(request(), context())
    assert found.hit is not None and found.hit.entry_id == "e1"
    assert len(threads) == 1 and threads[0].startswith("matching")


def test_a_miss_looks_again_for_the_question_inside_the_message() -> None:
    """The third look (``Matcher.question_in``, ``decide_in_context``): the one sentence that
    asks finds the neighbours, and the decision gets it with the whole message."""
    looks: list[tuple[str, str]] = []

    class InContext(Matcher):
        def decide(self, *args: Any, **kwargs: Any) -> Any:
            return replace(super().decide(*args, **kwargs), serve=False, reason="below_floor")

        def question_in(self, text: str) -> str | None:
            return question_of(text)

        def decide_in_context(
            self, vector: Any, question: str, asked: str, candidates: Any, **_: Any
        ) -> Match:
            looks.append((question, asked))
            return Match(candidates[0], 0.95, 0.95, True, "in_context")

    cache = Step(MatchPolicy(min_similarity=0.9), matcher=InContext)
    near = Candidate("e1", 0.97, "Why is the sky blue?", None)
    cache.store.near = [(near, CachedAnswer("Rayleigh.", "stop", None, "m", 0.97, "e1"))]
    asked = "my son asked me at dinner and I had no idea. Why is the sky blue?"
    ctx = context()
    found = cache.lookup(request(asked), ctx)
    assert looks == [("Why is the sky blue?", asked)]
    assert found.hit is not None and found.hit.entry_id == "e1"
    assert ctx.extra_headers["x-edgecore-cache-match"].startswith("in_context")
    plain = Step(MatchPolicy(min_similarity=0.9), matcher=InContext)
    plain.lookup(request("Why is the sky blue today?"), context())
    assert len(looks) == 1  # nothing around the question: no third look


def test_a_miss_remembers_only_complete_answers(cache: Step) -> None:
    async def run() -> list[CachedAnswer]:
        cache.embedder.start()
        try:
            found = await cache.step.lookup(request(), Headers({}), context(), Tenant())
            assert found is not None and found.hit is None
            cache.step.remember(found, Answer("cut", "length", None, "m"))  # hit max_tokens
            cache.step.remember(found, Answer("", "stop", None, "m"))  # nothing to serve
            cache.step.remember(found, Answer("A tower.", "stop", None, "m"))
            await cache.step.drain()
            return cache.store.stored
        finally:
            await cache.embedder.close()

    assert [a.content for a in asyncio.run(run())] == ["A tower."]
