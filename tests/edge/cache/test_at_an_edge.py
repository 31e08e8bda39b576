"""What may match at a real edge: partitions, conversation context, the verifier in the path."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from edge.tenancy.keys import hash_key
from tests.conftest import Keys, eventually, free_port, metric, start_edge

pytestmark = pytest.mark.slow

MODEL = "edge-smollm2-135m"


@pytest.fixture(scope="module")
def edge(models_dir: Path, log_dir: Path, redis_url: str, keys: Keys) -> Iterator[str]:
    server = start_edge(
        "edge-match", log_dir, models_dir, redis__url=redis_url, keys_file=str(keys.file),
        core__url=f"http://127.0.0.1:{free_port()}",
        cache__index=f"edgecore:test-match:{uuid.uuid4().hex[:6]}",
        admin_keys=json.dumps([hash_key(keys.admin)]), cache__explore_rate="0",
    )  # fmt: skip
    yield server.url
    server.stop()


def ask(edge: str, key: str, messages: list[dict[str, str]], **params: Any) -> httpx.Response:
    body = {"model": MODEL, "temperature": 0, "max_tokens": 128, "messages": messages, **params}
    r = httpx.post(edge + "/v1/chat/completions", json=body, timeout=60,
                   headers={"authorization": f"Bearer {key}"})  # fmt: skip
    assert r.status_code == 200, r.text
    return r


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def cached(edge: str, key: str, messages: list[dict[str, str]], **params: Any) -> httpx.Response:
    """Ask until the answer is stored (the store runs just after a response)."""
    first = ask(edge, key, messages, **params)
    assert first.json()["choices"][0]["finish_reason"] == "stop", first.text
    for _ in range(30):
        r = ask(edge, key, messages, **params)
        if r.headers["x-edgecore-tier"] == "cache":
            return r
        time.sleep(0.1)
    raise AssertionError("answer never cached")


_TAGS = itertools.count(1)


def tag() -> str:
    # Unique per test (each run has its own index), yet the same every run: with a random tag
    # the edge model's greedy answer changed too, and now and then it ran to max_tokens
    # (only complete answers are cached), failing a test about something else.
    return f"case {next(_TAGS)}"


def test_system_prompt_and_parameters_are_hard_partitions(edge: str, keys: Keys) -> None:
    q = f"Say hello to {tag()}."
    system = [{"role": "system", "content": "You are terse."}]
    cached(edge, keys.alpha, system + user(q))
    other_system = [{"role": "system", "content": "You are verbose."}]
    assert ask(edge, keys.alpha, other_system + user(q)).headers["x-edgecore-cache"] == "miss"
    assert ask(edge, keys.alpha, user(q)).headers["x-edgecore-cache"] == "miss"
    for params in ({"top_p": 0.5}, {"max_tokens": 512}, {"stop": ["\n"]}):
        r = ask(edge, keys.alpha, system + user(q), **params)
        assert r.headers["x-edgecore-cache"] == "miss", params


def test_identical_follow_ups_after_different_first_turns_do_not_match(
    edge: str, keys: Keys
) -> None:
    t = tag()
    paris = [
        {"role": "user", "content": f"Tell me about Paris ({t})."},
        {"role": "assistant", "content": "Paris is the capital of France."},
        {"role": "user", "content": "How old is it?"},
    ]
    cached(edge, keys.alpha, paris)
    rome = [
        {"role": "user", "content": f"Tell me about Rome ({t})."},
        {"role": "assistant", "content": "Rome is the capital of Italy."},
        {"role": "user", "content": "How old is it?"},
    ]
    assert ask(edge, keys.alpha, rome).headers["x-edgecore-cache"] == "miss"


def test_a_negation_is_not_served_and_the_verifier_decided(
    edge: str, keys: Keys, trained_verifier: Path
) -> None:
    t = tag()
    told = metric(edge, "edgecore_cache_match_decisions_total", 'reason="contrast"')
    rejected = metric(edge, "edgecore_cache_match_decisions_total", 'reason="rejected"')
    scored = metric(edge, "edgecore_cache_verifier_score_count", 'decision="rejected"')
    feedback = sum(
        metric(edge, "edgecore_cache_feedback_total", f'agreed="{a}"') for a in ("true", "false")
    )
    assert metric(edge, "edgecore_cache_semantic_enabled") == 1.0
    cached(edge, keys.alpha, user(f"Is it safe to drink tap water in {t}? Answer yes or no."))
    # The opposite question (cosine 0.99) is told apart before any score (issue 24).
    negation = f"Is it not safe to drink tap water in {t}? Answer yes or no."
    negated = ask(edge, keys.alpha, user(negation))
    assert negated.headers["x-edgecore-tier"] == "edge"
    assert metric(edge, "edgecore_cache_match_decisions_total", 'reason="contrast"') > told
    # One that asks more than the cached one (cosine 0.94) is the verifier's to reject.
    more = f"Is it safe to drink tap water in {t}, and how clean is it? Answer yes or no."
    assert ask(edge, keys.alpha, user(more)).headers["x-edgecore-tier"] == "edge"
    assert metric(edge, "edgecore_cache_match_decisions_total", 'reason="rejected"') > rejected
    assert metric(edge, "edgecore_cache_verifier_score_count", 'decision="rejected"') > scored

    # The fresh answer is compared with the rejected candidate's, in the background.
    def learned() -> bool:
        total = sum(
            metric(edge, "edgecore_cache_feedback_total", f'agreed="{a}"')
            for a in ("true", "false")
        )
        return total > feedback

    assert eventually(learned, timeout=20)


RIGHT, TYPO = "Say hello to the restaurant ({}).", "say hello to the restuarant ({})."


@pytest.mark.parametrize(
    ("stored", "asked", "how"),
    [
        # "restuarant" puts the question at cosine 0.75 from the cached one, under the
        # floor: only the respelled look finds it; the verifier reads it as asked.
        (RIGHT, TYPO, "respelled"),
        # An entry with a typo is stored under its respelled vector: the question asked
        # without it is near it in the first look, which reads the entry's typo fixed.
        (TYPO, RIGHT, "respelled"),
    ],
)
def test_a_typo_on_either_side_is_no_miss(
    edge: str, keys: Keys, trained_verifier: Path, stored: str, asked: str, how: str
) -> None:
    t = tag()
    cached(edge, keys.alpha, user(stored.format(t)))
    r = ask(edge, keys.alpha, user(asked.format(t)))
    assert r.headers["x-edgecore-tier"] == "cache"
    assert r.headers["x-edgecore-cache-match"].startswith(how)
    assert metric(edge, "edgecore_cache_match_decisions_total", f'reason="{how}"') >= 1


def test_a_story_around_a_cached_question_is_no_miss(edge: str, keys: Keys) -> None:
    """The third look: the question inside the message finds the cached one (cosine 0.80
    as asked, under the floor), and the cross-encoder reads the whole message."""
    cached(edge, keys.alpha, user("Can I eat blue cheese?"), max_tokens=256)
    story = "my sister asked me this at lunch and I wasn't sure: can I eat blue cheese?"
    r = ask(edge, keys.alpha, user(story), max_tokens=256)
    assert r.headers["x-edgecore-tier"] == "cache"
    assert r.headers["x-edgecore-cache-match"].startswith("in_context")
    assert metric(edge, "edgecore_cache_match_decisions_total", 'reason="in_context"') >= 1


def test_a_hit_reports_its_tokens_as_cached(edge: str, keys: Keys) -> None:
    hit = cached(edge, keys.alpha, user(f"Say hello to {tag()}."))
    usage = hit.json()["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"]
    assert usage["completion_tokens_details"]["cached_tokens"] == usage["completion_tokens"]
    assert hit.headers["x-edgecore-cache-match"].startswith(("exact", "verified"))


def test_sampled_answers_are_cached_only_for_tenants_that_opt_in(edge: str, keys: Keys) -> None:
    q = user(f"Say hello to {tag()}.")
    r = ask(edge, keys.alpha, q, temperature=0.7)
    assert r.headers["x-edgecore-cache"] == "bypass"
    r = ask(edge, keys.sampled, q, temperature=0.7)
    assert r.headers["x-edgecore-cache"] == "miss"


def test_stats_name_the_verifier_and_the_budget(
    edge: str, keys: Keys, trained_verifier: Path
) -> None:
    r = httpx.get(edge + "/admin/cache/stats", timeout=10,
                  headers={"authorization": f"Bearer {keys.admin}"})  # fmt: skip
    assert r.status_code == 200, r.text
    matching = r.json()["matching"]
    assert matching["false_hit_budget"] == 0.1 and matching["candidate_floor"] == 0.85
    assert matching["verifier"] and 0.5 < matching["threshold"] < 1.0
    assert matching["cross_encoder"]  # the stacked verifier, with its cross-encoder, is live
    assert matching["respell"]


def test_a_word_for_word_repeat_skips_the_embedding(edge: str, keys: Keys) -> None:
    q = user(f"Say  hello to {tag()}.")
    cached(edge, keys.alpha, q)
    embedded = metric(edge, "edgecore_embed_seconds_count")
    again = ask(edge, keys.alpha, [{"role": "user", "content": q[0]["content"].upper()}])
    assert again.headers["x-edgecore-cache-match"].startswith("exact")
    assert metric(edge, "edgecore_embed_seconds_count") == embedded
