"""The OpenAI surface beyond chat, through the real stack with the official SDK: embeddings,
completions, logprobs through the core, refused parameters, and the Responses API."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
from openai import OpenAI

from tests.conftest import Keys, free_port, start, start_edge, wait_ready
from tests.test_stack import CORE_MODEL, EDGE_MODEL, unique

pytestmark = pytest.mark.slow

EMBED_MODEL = "edge-minilm-l6-v2"


@pytest.fixture
def oai(edge_url: str, keys: Keys) -> OpenAI:
    return OpenAI(base_url=edge_url + "/v1", api_key=keys.alpha, max_retries=0, timeout=120)


def test_embeddings_float_base64_and_batch(oai: OpenAI) -> None:
    assert EMBED_MODEL in {m.id for m in oai.models.list()}
    texts = ["What is the capital of France?", "Name France's capital city.", "How do I bake?"]
    floats = oai.embeddings.create(model=EMBED_MODEL, input=texts, encoding_format="float")
    # The SDK asks for base64 by default and decodes it itself.
    b64 = oai.embeddings.create(model=EMBED_MODEL, input=texts)
    assert [d.index for d in floats.data] == [0, 1, 2]
    a = np.array([d.embedding for d in floats.data])
    b = np.array([d.embedding for d in b64.data])
    assert a.shape == (3, 384) and np.allclose(a, b, atol=1e-6)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-3)
    assert a[0] @ a[1] > a[0] @ a[2]  # the paraphrase is nearer than the other question
    assert (
        floats.usage.prompt_tokens > 10 and floats.usage.total_tokens == floats.usage.prompt_tokens
    )
    single = oai.embeddings.create(model=EMBED_MODEL, input=texts[0], encoding_format="float")
    assert np.allclose(single.data[0].embedding, a[0], atol=1e-5)  # batching changes nothing
    ids = oai.embeddings.create(
        model=EMBED_MODEL, input=[[101, 7592, 102]], encoding_format="float"
    )
    assert ids.usage.prompt_tokens == 3


def test_embeddings_refuse_what_they_cannot_do(oai: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="dimensions"):
        oai.embeddings.create(model=EMBED_MODEL, input="hi", dimensions=128)
    with pytest.raises(openai.BadRequestError, match="empty"):
        oai.embeddings.create(model=EMBED_MODEL, input="")
    with pytest.raises(openai.BadRequestError, match="vocabulary"):
        oai.embeddings.create(model=EMBED_MODEL, input=[[10**9]])
    with pytest.raises(openai.NotFoundError):
        oai.embeddings.create(model="text-embedding-3-small", input="hi")


def test_completions_stream_and_not(oai: OpenAI) -> None:
    raw = oai.completions.with_raw_response.create(
        model=EDGE_MODEL, prompt="The capital of France is", max_tokens=8, temperature=0
    )
    assert raw.headers["x-edgecore-tier"] == "edge"
    assert raw.headers["x-edgecore-cache"] == "bypass"  # completions are never cached
    done = raw.parse()
    assert done.object == "text_completion" and done.model == EDGE_MODEL
    assert done.choices[0].text and done.usage is not None and done.usage.completion_tokens > 0
    chunks = list(
        oai.completions.create(
            model=EDGE_MODEL, prompt="One, two, three,", max_tokens=8, temperature=0, stream=True,
            stream_options={"include_usage": True},
        )
    )  # fmt: skip
    assert "".join(c.choices[0].text for c in chunks if c.choices)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    core = oai.completions.with_raw_response.create(
        model=CORE_MODEL, prompt="The capital of France is", max_tokens=8, temperature=0
    )
    assert core.headers["x-edgecore-tier"] == "core"
    assert core.parse().choices[0].text
    streamed = list(
        oai.completions.create(
            model=CORE_MODEL, prompt="One, two, three,", max_tokens=8, temperature=0, stream=True
        )
    )
    assert "".join(c.choices[0].text for c in streamed if c.choices)


def test_logprobs_come_from_the_core_and_are_never_cached(oai: OpenAI) -> None:
    question = [{"role": "user", "content": unique("Say yes.")}]
    for _ in range(2):  # the second identical request must not be a cache hit without them
        raw = oai.chat.completions.with_raw_response.create(
            model="auto", messages=question, logprobs=True, top_logprobs=2, max_tokens=4,
            temperature=0,
        )  # fmt: skip
        assert raw.headers["x-edgecore-tier"] == "core"
        assert raw.headers["x-edgecore-cache"] == "bypass"
        r = raw.parse()
        assert r.choices[0].logprobs is not None and r.choices[0].logprobs.content
        assert len(r.choices[0].logprobs.content[0].top_logprobs) == 2


def test_non_stream_core_answers_are_relayed_as_vllm_wrote_them(edge_url: str, keys: Keys) -> None:
    body = {
        "model": CORE_MODEL, "max_tokens": 4, "temperature": 0,
        "messages": [{"role": "user", "content": unique("Say hi.")}],
    }  # fmt: skip
    r = httpx.post(edge_url + "/v1/chat/completions", json=body, headers=keys.auth(), timeout=120)
    assert r.status_code == 200, r.text
    answer = r.json()
    # Fields only vLLM writes: an answer rebuilt from a stream would not have them.
    assert "stop_reason" in answer["choices"][0] and "system_fingerprint" in answer


def test_a_refused_parameter_names_itself(oai: OpenAI) -> None:
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError) as exc:
        oai.chat.completions.create(model=EDGE_MODEL, messages=messages, logprobs=True)
    assert exc.value.body is not None
    assert "logprobs" in exc.value.message and f"model={CORE_MODEL}" in exc.value.message
    with pytest.raises(openai.BadRequestError, match="prediction"):
        oai.chat.completions.create(
            model="auto", messages=messages,
            prediction={"type": "content", "content": "hello"},
        )  # fmt: skip
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    with pytest.raises(openai.BadRequestError, match="image_url"):
        oai.chat.completions.create(model="auto", messages=[{"role": "user", "content": [image]}])


def test_responses_are_forwarded_or_refused_never_404(edge_url: str, keys: Keys) -> None:
    body = {"model": CORE_MODEL, "input": "Say hi.", "max_output_tokens": 16}
    r = httpx.post(edge_url + "/v1/responses", json=body, headers=keys.auth(), timeout=120)
    assert r.status_code in (200, 501), r.text
    if r.status_code == 200:
        assert r.json()["object"] == "response"
    else:
        assert r.json()["error"]["code"] == "not_implemented"


def test_embedding_models_the_core_serves_are_forwarded(
    models_dir: Path, log_dir: Path, redis_url: str, keys: Keys
) -> None:
    port = free_port()
    core = start(
        "fake-embedding-core", [sys.executable, "-m", "bench.fake_upstream", str(port)],
        dict(os.environ), log_dir, f"http://127.0.0.1:{port}",
    )  # fmt: skip
    wait_ready(core, "/readyz", timeout=30)
    edge = start_edge(
        "edge-core-embeddings", log_dir, models_dir, core__url=core.url, redis__url=redis_url,
        keys_file=str(keys.file), core__embed_models='["bge-large"]',
    )  # fmt: skip
    try:
        oai = OpenAI(base_url=edge.url + "/v1", api_key=keys.alpha, max_retries=0, timeout=60)
        assert {"bge-large", EMBED_MODEL} <= {m.id for m in oai.models.list()}
        raw = oai.embeddings.with_raw_response.create(
            model="bge-large", input=["a", "b"], encoding_format="float"
        )
        assert raw.headers["x-edgecore-tier"] == "core"
        answer = raw.parse()
        assert [d.embedding[0] for d in answer.data] == [0.0, 1.0]  # the core's vectors
        assert answer.usage.prompt_tokens == 6
    finally:
        edge.stop()
        core.stop()
