"""The cache's store: its search reply parsing, and the real Redis Stack behind it."""

from __future__ import annotations

import asyncio
import uuid

import numpy as np
import pytest
from redis.asyncio import Redis
from redis.utils import HIREDIS_AVAILABLE

from edge.cache.decision import MatchPolicy
from edge.cache.store import CachedAnswer, SemanticCache, connect, search_results

DIM = 8


def test_the_edges_client_speaks_resp2_through_the_c_parser() -> None:
    redis = connect("redis://127.0.0.1:1/0", timeout_s=1.0)  # lazy: nothing connects
    assert redis.connection_pool.connection_kwargs["protocol"] == 2
    assert HIREDIS_AVAILABLE  # the edge extra brings redis-py's C reply parser


def test_search_replies_of_both_protocols_read_alike() -> None:
    resp2 = [2, b"i:e:a", [b"dist", b"0.25", b"prompt", b"q"], b"i:e:b", None]
    resp3 = {
        b"total_results": 2,
        b"results": [
            {b"id": b"i:e:a", b"extra_attributes": {b"dist": b"0.25", b"prompt": b"q"}},
            {b"id": b"i:e:b", b"extra_attributes": {}},
        ],
    }
    want = [("i:e:a", {"dist": "0.25", "prompt": "q"}), ("i:e:b", {})]
    assert search_results(resp2) == search_results(resp3) == want
    assert search_results([0]) == search_results({b"results": []}) == []


def test_a_search_result_whose_entry_just_expired_is_skipped() -> None:
    cache = SemanticCache(connect("redis://127.0.0.1:1/0", timeout_s=1.0), index="t", dim=DIM,
                          ttl_s=60)  # fmt: skip
    assert cache.floor == MatchPolicy().floor  # one default for "never a candidate"
    # The TTL ran out between the index match and the read: the key comes back, no fields.
    assert cache._hit("t:e:gone", {}) is None
    fields = {"dist": "0.02", "content": "Paris.", "finish_reason": "stop", "model": "m",
              "usage": "", "prompt": "Capital of France?", "obs": "", "vec16": ""}  # fmt: skip
    hit = cache._hit("t:e:abc", fields)
    assert hit is not None
    candidate, answer = hit
    assert candidate.entry_id == "abc" and abs(candidate.cosine - 0.98) < 1e-9
    assert answer.content == "Paris." and answer.usage is None


@pytest.mark.slow  # Redis
@pytest.mark.parametrize("protocol", [2, 3])
def test_a_stored_answer_comes_back_whole(redis_url: str, protocol: int) -> None:
    """A search reply becomes the candidate the verifier reads (question, float16 vector,
    history) and its answer, over the edge's RESP2 client and over redis-py's default
    (RESP3); the exact step finds the same entry."""

    async def run() -> None:
        redis = connect(redis_url, timeout_s=2.0) if protocol == 2 else Redis.from_url(redis_url)
        cache = SemanticCache(
            redis, index=f"edgecore:test-store:{uuid.uuid4().hex[:6]}", dim=DIM, ttl_s=60,
            top_k=2, floor=0.5,
        )  # fmt: skip
        vector = np.linspace(1.0, 2.0, DIM, dtype=np.float32)
        answer = CachedAnswer(content="Paris.", finish_reason="stop", usage={"total_tokens": 7},
                              model="edge-m", prompt="capital of France?")  # fmt: skip
        await cache.store(vector, partition="p", context="none", answer=answer, tenant="t",
                          max_entries=10)  # fmt: skip
        other = np.roll(vector, 3)
        await cache.store(other, partition="q", context="none", answer=answer, tenant="t",
                          max_entries=10)  # fmt: skip

        found = await cache.lookup(vector, partition="p", context="none")
        assert len(found) == 1  # the other partition's entry is never a candidate
        candidate, hit = found[0]
        assert candidate.cosine == pytest.approx(1.0, abs=1e-5)
        assert candidate.prompt == "capital of France?"
        assert candidate.vector is not None
        np.testing.assert_allclose(candidate.vector, vector, rtol=1e-3)
        assert (hit.content, hit.finish_reason, hit.usage, hit.model) == (
            "Paris.", "stop", {"total_tokens": 7}, "edge-m",
        )  # fmt: skip

        await cache.observe(candidate.entry_id, 0.93, True)
        again, _ = (await cache.lookup(vector, partition="p", context="none"))[0]
        assert again.observations == ((0.93, True),)

        exact = await cache.lookup_exact(partition="p", context="none", text="Capital of France?")
        assert exact is not None and exact.entry_id == candidate.entry_id
        assert await cache.lookup_exact(partition="p", context="none", text="capital?") is None
        await redis.aclose()

    asyncio.run(run())
