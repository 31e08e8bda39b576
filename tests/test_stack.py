"""The whole path with real parts: OpenAI SDK -> edge -> Redis / edge model / core -> vLLM."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from tests.conftest import Keys, eventually, metric

pytestmark = pytest.mark.slow

CORE_MODEL = "smollm2-135m-instruct"
EDGE_MODEL = "edge-smollm2-135m"


def client(edge_url: str, key: str) -> OpenAI:
    return OpenAI(base_url=edge_url + "/v1", api_key=key, max_retries=0, timeout=120)


@pytest.fixture
def oai(edge_url: str, keys: Keys) -> OpenAI:
    """The official OpenAI SDK, pointed at the edge with tenant alpha's key."""
    return client(edge_url, keys.alpha)


def unique(text: str) -> str:
    """A prompt no earlier test (or run, on a shared Redis) has cached."""
    return f"{text} (ref {uuid.uuid4().hex[:8]})"


def test_models_and_health(oai: OpenAI, edge_url: str) -> None:
    ids = {m.id for m in oai.models.list()}
    assert {"auto", EDGE_MODEL, CORE_MODEL} <= ids
    assert httpx.get(edge_url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(edge_url + "/readyz").json()
    assert ready["status"] == "ready", ready


def test_short_prompt_is_answered_by_the_edge_model(oai: OpenAI, edge_url: str) -> None:
    raw = oai.chat.completions.with_raw_response.create(
        model="auto",
        messages=[{"role": "user", "content": unique("Say hello.")}],
        max_tokens=16,
    )
    assert raw.headers["x-edgecore-tier"] == "edge"
    assert float(raw.headers["x-edgecore-overhead-ms"]) >= 0
    r = raw.parse()
    assert r.model == EDGE_MODEL and r.choices[0].message.content
    assert r.usage is not None and r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_long_prompt_goes_to_the_core(oai: OpenAI, edge_url: str) -> None:
    # Longer than the edge model's window (2048 tokens): a rule, whatever the score says.
    # A JSON request: on an AVX2-only CPU the engine's prefill of these ~2,200 tokens takes
    # about a minute, and the edge once cut such a silent answer at its 60 s idle timeout,
    # ahead of the first-byte deadline meant for it.
    long_prompt = unique("Summarise this text in one sentence: " + "The quick brown fox. " * 420)
    raw = oai.chat.completions.with_raw_response.create(
        model="auto",
        messages=[{"role": "user", "content": long_prompt}],
        max_tokens=16,
    )
    assert raw.headers["x-edgecore-tier"] == "core"
    assert raw.parse().model == CORE_MODEL


def test_trained_router_scores_auto_requests(
    oai: OpenAI, edge_url: str, trained_router: Path
) -> None:
    def scored() -> float:
        text = httpx.get(edge_url + "/metrics").text
        line = next(x for x in text.splitlines() if x.startswith("edgecore_router_score_count"))
        return float(line.split()[-1])

    before = scored()
    raw = oai.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": unique("Hi there!")}], max_tokens=8
    )
    assert raw.headers["x-edgecore-tier"] == "edge"
    assert scored() == before + 1
    metrics = httpx.get(edge_url + "/metrics").text
    assert 'edgecore_route_decisions_total{reason="score",tier="edge"}' in metrics
    # Which pair the live router was trained for, and how well it did on held-out prompts.
    meta = json.loads((trained_router.parent / "router.json").read_text())
    pair = f'large="{meta["large"]}",small="{meta["small"]}"'
    assert f"edgecore_router_heldout_apgr{{{pair}}} {meta['heldout_apgr']}" in metrics
    assert f'edgecore_router_heldout_pgr{{core_share="0.5",{pair}}}' in metrics


def test_explicit_core_model_streams_with_usage(oai: OpenAI, edge_url: str) -> None:
    with oai.chat.completions.with_streaming_response.create(
        model=CORE_MODEL,
        messages=[{"role": "user", "content": unique("Name three colours.")}],
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
    ) as raw:
        assert raw.headers["x-edgecore-tier"] == "core"
        assert raw.headers["content-type"].startswith("text/event-stream")
        assert raw.headers["x-accel-buffering"] == "no"
        chunks = list(raw.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    # Recorded when the edge finishes the response, which may be just after the client has
    # read its last chunk; and only for answers of more than one token.
    tpot = "gen_ai_server_time_per_output_token_seconds_count"
    assert eventually(lambda: metric(edge_url, tpot, 'tier="core"') > 0)


def test_stream_without_usage_request_has_no_usage_chunk(oai: OpenAI, edge_url: str) -> None:
    stream = oai.chat.completions.create(
        model=CORE_MODEL,
        messages=[{"role": "user", "content": unique("Name a fruit.")}],
        max_tokens=8,
        stream=True,
    )
    chunks = list(stream)
    assert all(c.choices for c in chunks)


def test_edge_model_streams(oai: OpenAI, edge_url: str) -> None:
    stream = oai.chat.completions.create(
        model=EDGE_MODEL,
        messages=[{"role": "user", "content": unique("Count to three.")}],
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert any(c.choices and c.choices[0].finish_reason for c in chunks)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert metric(edge_url, "gen_ai_server_time_per_output_token_seconds_count", 'tier="edge"')


@pytest.mark.parametrize("model", ["auto", CORE_MODEL])
def test_repeated_prompt_is_answered_by_the_cache(oai: OpenAI, edge_url: str, model: str) -> None:
    c = oai
    # A 135M model at temperature 0 can loop until max_tokens, and cut answers are never
    # cached; a mild repetition penalty (a vLLM extension, part of the cache partition)
    # makes it finish, and a question it still loops on is swapped for another.
    for _ in range(5):
        question = unique("What is two plus two? Answer with one number.")
        ask = {
            "model": model,
            "messages": [{"role": "user", "content": question}],
            "temperature": 0,
            "max_tokens": 128,
            "extra_body": {"repetition_penalty": 1.1},
        }
        first = c.chat.completions.with_raw_response.create(**ask)  # type: ignore[call-overload]
        answer = first.parse()
        assert first.headers["x-edgecore-cache"] == "miss"
        if answer.choices[0].finish_reason == "stop":
            break
    else:
        raise AssertionError(f"no answer finished in five questions: {answer}")
    for _ in range(50):  # the store runs just after the response
        second = c.chat.completions.with_raw_response.create(**ask)  # type: ignore[call-overload]
        if second.headers["x-edgecore-tier"] == "cache":
            break
    assert second.headers["x-edgecore-tier"] == "cache"
    assert second.parse().choices[0].message.content == answer.choices[0].message.content
    # Streaming clients get the cached answer as SSE.
    stream = c.chat.completions.create(stream=True, **ask)  # type: ignore[call-overload]
    text = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
    assert text == answer.choices[0].message.content


def test_cache_respects_opt_out_and_other_parameters(oai: OpenAI, edge_url: str) -> None:
    c = oai
    messages = [{"role": "user", "content": unique("Reply with the word yes.")}]
    c.chat.completions.create(model=EDGE_MODEL, messages=messages, temperature=0, max_tokens=32)  # type: ignore[arg-type]
    no_store = c.chat.completions.with_raw_response.create(
        model=EDGE_MODEL,
        messages=messages,
        temperature=0,
        max_tokens=32,  # type: ignore[arg-type]
        extra_headers={"cache-control": "no-store"},
    )
    assert no_store.headers["x-edgecore-tier"] == "edge"
    other = c.chat.completions.with_raw_response.create(
        model=EDGE_MODEL,
        messages=messages,
        temperature=0,
        max_tokens=32,
        seed=7,  # type: ignore[arg-type]
    )
    assert other.headers["x-edgecore-tier"] == "edge"
    sampled = c.chat.completions.with_raw_response.create(
        model=EDGE_MODEL,
        messages=messages,
        temperature=0.8,
        max_tokens=32,  # type: ignore[arg-type]
    )
    assert sampled.headers["x-edgecore-cache"] == "bypass"


def test_edge_to_core_speaks_http2(oai: OpenAI, edge_url: str, core_url: str) -> None:
    oai.chat.completions.create(
        model=CORE_MODEL,
        messages=[{"role": "user", "content": unique("Hi")}],
        max_tokens=4,
    )
    core_metrics = httpx.get(core_url + "/metrics").text
    assert 'edgecore_core_requests_total{http_version="2",status="200"}' in core_metrics
    assert 'edgecore_core_requests_total{http_version="1.1"' not in core_metrics
    edge_metrics = httpx.get(edge_url + "/metrics").text
    assert 'edgecore_core_forwards_total{http_version="HTTP/2"}' in edge_metrics
