"""The cache step of the edge pipeline: ``exact()``, ``embed()`` and ``semantic()`` before
routing (the pipeline runs them as three stages; ``lookup()`` chains them), ``remember()``
after.

    exact:    cacheable? -> exact words (one Redis round trip)
    embed:    the conversation's embedding (the router scores it too)
    semantic: nearest entries -> the matcher's decision (verifier, contrast checks); on a
              miss, once more with the question's typos fixed (``edge.cache.spelling``),
              and once more for the one sentence of the message that asks, the whole
              message read by the cross-encoder (``edge.cache.preamble``)
    remember: store a complete answer (under its respelled vector if it has typos), and
              tell a rejected neighbour whether it was right

Built once in the lifespan from its parts (Redis store, embedder, matcher, metrics); a
Redis or embedder failure bypasses the cache for that request, it never fails it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import random
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from starlette.datastructures import Headers
from starlette.responses import Response

from edge.cache import keys as cache_key
from edge.cache.decision import Candidate, Match
from edge.cache.match import Matcher
from edge.cache.spelling import Respelling
from edge.cache.store import CachedAnswer, CacheUnavailable, SemanticCache
from edge.context import Answer, RequestContext
from edge.embedder import BatchingEmbedder
from edge.metrics import EdgeMetrics
from edge.replies import json_answer, once, sse_answer, text_events
from edge.settings import CacheSettings
from edge.tenancy.keys import Tenant
from shared import completions
from shared.schemas import ChatCompletionRequest, Message
from shared.tracing import traced

# One look's decision on the neighbours it found (a ``Matcher`` method, its look's own
# arguments bound).
Decide = Callable[..., Match]

log = logging.getLogger("edgecore.edge.cache")


@dataclass
class CacheLookup:
    """One request's cache state: the partition it reads and writes, and what was found."""

    vector: np.ndarray | None  # the conversation's embedding, once computed
    partition: str
    context: str
    read: bool  # False: refresh (write only)
    text: str = ""  # the last message: what the matcher compares
    messages: list[Message] = field(default_factory=list)  # the conversation, as asked
    respelled: np.ndarray | None = None  # its embedding with the typos fixed, once computed
    tenant: str = "default"
    max_entries: int = 10_000
    hit: CachedAnswer | None = None
    # A verified neighbour that was not served: the fresh answer will tell if it was right.
    candidate: CachedAnswer | None = None
    match: Match | None = None


def directive_of(headers: Headers) -> str:
    """'off' (neither read nor write), 'refresh' (write only) or 'on'."""
    explicit = headers.get("x-edgecore-cache", "").strip().lower()
    if explicit in ("off", "refresh"):
        return explicit
    cache_control = headers.get("cache-control", "").lower()
    if "no-store" in cache_control:
        return "off"
    if "no-cache" in cache_control:
        return "refresh"
    return "on"


class CacheStep:
    def __init__(
        self,
        store: SemanticCache | None,
        embedder: BatchingEmbedder | None,
        matcher: Matcher,
        metrics: EdgeMetrics,
        settings: CacheSettings,
        *,
        redis_timeout_s: float,
        executor: Executor | None = None,
    ) -> None:
        """``executor``: the threads that make blocking match decisions (None: the loop's
        default executor)."""
        self.store = store
        self.executor = executor
        self.redis_timeout_s = redis_timeout_s
        self.embedder = embedder
        self.matcher = matcher
        self.metrics = metrics
        self.settings = settings
        self._background: set[asyncio.Task[None]] = set()

    async def lookup(
        self, req: ChatCompletionRequest, headers: Headers, ctx: RequestContext, tenant: Tenant
    ) -> CacheLookup | None:
        """The three lookup stages chained: the cache's answer for ``req``, if any
        (``.hit``), and the state ``remember`` needs; None when the cache takes no part."""
        found = await self.exact(req, headers, ctx, tenant)
        if found is None or found.hit is not None:  # word for word: no embedding needed
            return found
        return await self.semantic(found, await self.embed(req), ctx)

    def reply(self, req: ChatCompletionRequest, hit: CachedAnswer, ctx: RequestContext) -> Response:
        """The cached answer, as JSON or SSE (usage marks every token as cached)."""
        ctx.tier = "cache"
        cid = completions.new_id()
        ctx.extra_headers["x-edgecore-cache-similarity"] = f"{hit.similarity:.4f}"
        ctx.extra_headers["x-edgecore-cache-entry"] = hit.entry_id  # for /admin/cache
        usage = completions.cached_usage(hit.usage)
        ctx.response_model = hit.model
        if not req.stream:
            body = completions.completion(
                id=cid, model=hit.model, content=hit.content,
                finish_reason=hit.finish_reason, usage=usage,
            )  # fmt: skip
            return json_answer(body, ctx)
        ctx.first_token()  # the whole answer is in hand

        async def on_error(exc: BaseException) -> str:
            return "cache read failed"

        events = text_events(
            once(hit.content), id=cid, model=hit.model, include_usage=req.include_usage,
            finish=lambda: (hit.finish_reason, usage), on_error=on_error,
        )  # fmt: skip
        return sse_answer(events, ctx, usage=lambda: usage)

    def remember(self, found: CacheLookup | None, answer: Answer) -> None:
        """Store a complete answer after the response (a background task)."""
        if found is None or not found.partition or self.store is None:
            return
        if answer.finish_reason != "stop" or not answer.content or found.vector is None:
            return
        self._spawn(self._store(found, found.vector, answer))

    @traced("edge.embed")
    async def embed(self, req: ChatCompletionRequest) -> np.ndarray | None:
        """The conversation's embedding (the cache's and the router's); None on failure."""
        if self.embedder is None:
            return None
        return await self._embed(cache_key.conversation_text(req.messages, self.window))

    @property
    def window(self) -> int:
        return self.settings.context_messages

    async def _embed(self, text: str) -> np.ndarray | None:
        assert self.embedder is not None
        t = time.perf_counter()
        try:
            async with asyncio.timeout(2.0):
                return await self.embedder.embed(text)
        except Exception:  # the cache and the learned router are bypassed; serving goes on
            self.metrics.embed_failures.inc()
            return None
        finally:
            self.metrics.embed_seconds.observe(time.perf_counter() - t)

    async def drain(self, timeout: float = 5.0) -> None:
        """Let pending stores finish (shutdown)."""
        if self._background:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*self._background, return_exceptions=True)

    def _directive(
        self, req: ChatCompletionRequest, headers: Headers, ctx: RequestContext, tenant: Tenant
    ) -> str | None:
        """'on' or 'refresh' when this request may use the cache, else None (recorded)."""
        if self.store is None or self.embedder is None or not tenant.cache:
            return None
        directive = directive_of(headers)
        # A tenant may opt in to caching sampled (temperature > 0) answers.
        only_deterministic = self.settings.only_deterministic and not tenant.cache_nondeterministic
        # A tenant whose answers stay with each user: no user, nothing shared or stored.
        anonymous = tenant.cache_scope == "user" and not req.user
        if (
            directive == "off"
            or anonymous
            or not cache_key.is_cacheable(req, only_deterministic=only_deterministic)
        ):
            ctx.cache = "bypass"
            self.metrics.cache.labels("bypass").inc()
            return None
        return directive

    @traced("edge.cache.lookup")
    async def exact(
        self, req: ChatCompletionRequest, headers: Headers, ctx: RequestContext, tenant: Tenant
    ) -> CacheLookup | None:
        """Before any embedding: the same question, word for word."""
        directive = self._directive(req, headers, ctx, tenant)
        if directive is None or self.store is None or self.embedder is None:
            return None
        found = CacheLookup(
            vector=None,
            partition=cache_key.partition_key(
                req,
                tenant=tenant.name,
                embedder_id=self.embedder.model_id,
                user=req.user if tenant.cache_scope == "user" else None,
            ),
            context=cache_key.context_key(req.messages),
            read=directive == "on",
            text=req.messages[-1].text(),
            messages=req.messages,
            tenant=tenant.name,
            max_entries=tenant.cache_max_entries or self.settings.max_entries_per_tenant,
        )
        if not found.read:
            ctx.cache = "refresh"
            return found
        t = time.perf_counter()
        try:
            async with asyncio.timeout(self.redis_timeout_s):
                found.hit = await self.store.lookup_exact(
                    partition=found.partition, context=found.context, text=found.text
                )
        except (TimeoutError, CacheUnavailable):
            self._failed(ctx)
            return None
        if found.hit is not None:
            self.metrics.cache_lookup_seconds.observe(time.perf_counter() - t)
            self.metrics.cache_match.labels("exact").inc()
            self._outcome(ctx, found, "exact 1.000")
        return found

    @traced("edge.cache.semantic")
    async def semantic(
        self, found: CacheLookup, vector: np.ndarray | None, ctx: RequestContext
    ) -> CacheLookup | None:
        """After embedding: the nearest entries in the partition, and the matcher's decision."""
        if self.store is None:
            return found
        if vector is None:
            self._failed(ctx)
            return None
        found.vector = vector
        if not found.read:
            return found
        m = self.metrics
        t, draw = time.perf_counter(), random.random()
        try:
            match, near = await self._decide(found, vector, draw)
        except (TimeoutError, CacheUnavailable):
            self._failed(ctx)
            return None
        if not match.serve and (respelled := self.matcher.respelling(found.text)) is not None:
            second = await self._second_look(found, respelled, draw)
            if second is not None and second[0].serve:
                match, near = second
        if not match.serve and (question := self.matcher.question_in(found.text)) is not None:
            third = await self._third_look(found, question, draw)
            if third is not None and third[0].serve:
                match, near = third
        m.cache_lookup_seconds.observe(time.perf_counter() - t)
        m.cache_match.labels(match.reason).inc()
        if log.isEnabledFor(logging.DEBUG):
            log.debug("cache decision %s by %s: %s", match.reason, match.decided_by,
                      "; ".join(map(str, match.steps)))  # fmt: skip
        if near:
            m.cache_candidate_similarity.observe(near[0][0].cosine)
        if match.reason in ("verified", "respelled", "in_context", "rejected", "explore"):
            m.cache_verifier_score.labels(match.reason).observe(match.score)
        answers = {c.entry_id: a for c, a in near}
        if match.candidate is not None:
            answer = answers[match.candidate.entry_id]
            if match.serve:
                found.hit = answer
            elif match.reason in ("rejected", "explore"):
                found.candidate, found.match = answer, match
        self._outcome(ctx, found, f"{match.reason} {match.score:.3f}")
        return found

    async def _decide(
        self, found: CacheLookup, vector: np.ndarray, draw: float, decide: Decide | None = None
    ) -> tuple[Match, list[tuple[Candidate, CachedAnswer]]]:
        """The nearest entries to ``vector`` and the matcher's decision on them (``decide``:
        the first look's, on the asked words, unless another look's is given)."""
        assert self.store is not None
        async with asyncio.timeout(self.redis_timeout_s):
            near = await self.store.lookup(vector, partition=found.partition, context=found.context)
        candidates = [c for c, _ in near]
        if decide is None:
            decide = functools.partial(self.matcher.decide, vector, found.text)
        if self.matcher.blocking and candidates:
            # A cross-encoder run takes milliseconds: off the event loop, on the step's
            # threads (the context goes along, as with asyncio.to_thread).
            run = functools.partial(contextvars.copy_context().run, decide, candidates, draw=draw)
            return await asyncio.get_running_loop().run_in_executor(self.executor, run), near
        return decide(candidates, draw=draw), near

    async def _second_look(
        self, found: CacheLookup, respelled: Respelling, draw: float
    ) -> tuple[Match, list[tuple[Candidate, CachedAnswer]]] | None:
        """The decision on the question with its typos fixed; None where it could not be
        made (the miss stands: the first look worked)."""
        vector = await self._respelled_vector(found, respelled)
        if vector is None:
            return None
        decide = functools.partial(self.matcher.decide_respelled, vector, respelled)
        try:
            return await self._decide(found, vector, draw, decide)
        except (TimeoutError, CacheUnavailable):
            return None

    async def _third_look(
        self, found: CacheLookup, question: str, draw: float
    ) -> tuple[Match, list[tuple[Candidate, CachedAnswer]]] | None:
        """The decision on the one sentence of the message that asks, the whole message read
        beside each candidate (``Matcher.decide_in_context``); None where it could not be
        made (the miss stands)."""
        text = cache_key.conversation_text(found.messages, self.window, last=question)
        vector = await self._embed(text)
        if vector is None:
            return None
        decide = functools.partial(self.matcher.decide_in_context, vector, question, found.text)
        try:
            return await self._decide(found, vector, draw, decide)
        except (TimeoutError, CacheUnavailable):
            return None

    def _failed(self, ctx: RequestContext) -> None:
        """Redis or the embedder failed: serve without the cache (and store nothing)."""
        ctx.cache = "error"
        self.metrics.cache.labels("error").inc()

    def _outcome(self, ctx: RequestContext, found: CacheLookup, how: str) -> None:
        ctx.cache = "hit" if found.hit else "miss"
        self.metrics.cache.labels(ctx.cache).inc()
        if found.hit is not None:
            self.metrics.cache_similarity.observe(found.hit.similarity)
            ctx.extra_headers["x-edgecore-cache-match"] = how

    async def _agrees(self, cached: str, fresh: str) -> bool:
        """Would serving the cached answer have been right? Compared with the fresh one."""
        if cache_key.normalize(cached) == cache_key.normalize(fresh):
            return True
        if self.embedder is None:
            return False
        a, b = await asyncio.gather(self.embedder.embed(cached), self.embedder.embed(fresh))
        return float(np.dot(a, b)) >= self.settings.answer_agreement

    async def _stored_vector(self, found: CacheLookup, vector: np.ndarray) -> np.ndarray:
        """What an entry is found by: its question's vector or, when the speller fixes typos
        in it, the fixed question's, so a later question written without them finds it
        (``decide_respelled`` finds it again from one with the same typos)."""
        respelled = self.matcher.respelling(found.text)
        if respelled is None:
            return vector
        fixed = await self._respelled_vector(found, respelled)
        return vector if fixed is None else fixed

    async def _respelled_vector(
        self, found: CacheLookup, respelled: Respelling
    ) -> np.ndarray | None:
        """The conversation's embedding with its last message respelled: once per request
        (the second look's is the one stored)."""
        if found.respelled is None:
            text = cache_key.conversation_text(found.messages, self.window, last=respelled.text)
            found.respelled = await self._embed(text)
        return found.respelled

    async def _store(self, found: CacheLookup, vector: np.ndarray, answer: Answer) -> None:
        assert self.store is not None
        vector = await self._stored_vector(found, vector)
        store, timeout = self.store, self.redis_timeout_s * 4
        entry = CachedAnswer(
            content=answer.content, finish_reason=answer.finish_reason or "stop",
            usage=answer.usage, model=answer.model, prompt=found.text,
        )  # fmt: skip
        with contextlib.suppress(CacheUnavailable, TimeoutError):
            candidate, match = found.candidate, found.match
            if candidate is not None and match is not None:
                agreed = await self._agrees(candidate.content, answer.content)
                self.metrics.cache_feedback.labels(str(agreed).lower()).inc()
                async with asyncio.timeout(timeout):
                    await store.observe(candidate.entry_id, match.score, agreed)
            # Stored even when the neighbour agreed: this wording then gets its own exact
            # key, so its repeats hit every time instead of waiting on the neighbour's
            # confidence (and its explorations). The tenant's entry cap bounds the copies.
            async with asyncio.timeout(timeout):
                await store.store(
                    vector, partition=found.partition, context=found.context, answer=entry,
                    tenant=found.tenant, max_entries=found.max_entries,
                )  # fmt: skip

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run a store after the response, without losing the task."""
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("cache store failed: %r", task.exception())
