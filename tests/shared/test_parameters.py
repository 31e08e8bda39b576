"""The OpenAI parameter audit (pure): each parameter is honoured by a tier or refused by name."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edge.cache.keys import is_cacheable
from edge.http.embeddings import encode
from edge.routing.router import RouteRules, rule
from shared.errors import ApiError
from shared.parameters import completion_refusals, refusals, table
from shared.schemas import ChatCompletionRequest, CompletionRequest, EmbeddingRequest

MSG = [{"role": "user", "content": "hi"}]
RULES = RouteRules(
    auto_model="auto", edge_model="edge-m", core_model="core-m", max_prompt_chars=1000,
    max_tokens=512,
)  # fmt: skip


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "auto", "messages": MSG, **fields}


@pytest.mark.parametrize(
    "fields",
    [
        {"temperature": 0, "top_p": 0.5, "seed": 1, "stop": ["x"], "max_completion_tokens": 9},
        {"user": "u", "metadata": {"a": "b"}, "store": False, "service_tier": "auto"},
        {"modalities": ["text"], "response_format": {"type": "text"}, "presence_penalty": 0},
        {"stream": True, "stream_options": {"include_usage": True}, "n": 1},
    ],
)
def test_both_tiers_honour_the_sampling_parameters(fields: dict[str, Any]) -> None:
    assert refusals(body(**fields)) == {}


@pytest.mark.parametrize(
    "name,value",
    [
        ("logprobs", True),
        ("top_logprobs", 2),
        ("tools", [{"type": "function", "function": {"name": "f"}}]),
        ("tool_choice", "auto"),
        ("response_format", {"type": "json_object"}),
        ("logit_bias", {"1": 5}),
        ("presence_penalty", 0.5),
        ("frequency_penalty", 1.0),
        ("min_p", 0.1),  # a vLLM extension the edge model lacks: the core's
    ],
)
def test_core_only_parameters_are_refused_by_the_edge_by_name(name: str, value: Any) -> None:
    found = refusals(body(**{name: value}))
    assert "core" not in found
    assert found["edge"].param == name
    assert name in found["edge"].message("core-m") and "model=core-m" in found["edge"].message(
        "core-m"
    )


@pytest.mark.parametrize(
    "name,value",
    [
        ("prediction", {"type": "content", "content": "x"}),
        ("audio", {"voice": "alloy", "format": "wav"}),
        ("reasoning_effort", "low"),
        ("web_search_options", {"search_context_size": "low"}),
        ("modalities", ["text", "audio"]),
        ("store", True),
        ("service_tier", "priority"),
        ("functions", [{"name": "f"}]),
    ],
)
def test_parameters_no_tier_has_are_refused_everywhere(name: str, value: Any) -> None:
    found = refusals(body(**{name: value}))
    assert found["core"].param == name == found["edge"].param


def test_image_parts_are_refused_unless_the_core_takes_images() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    data = body(messages=[{"role": "user", "content": [{"type": "text", "text": "what?"}, image]}])
    assert "image_url" in refusals(data)["core"].param
    multimodal = refusals(data, core_multimodal=True)
    assert "core" not in multimodal and "image_url" in multimodal["edge"].param
    req = ChatCompletionRequest.model_validate(data)
    assert not is_cacheable(req, only_deterministic=False)  # the key ignores the image


def test_logprobs_requests_are_not_cacheable() -> None:
    req = ChatCompletionRequest.model_validate(body(temperature=0, logprobs=True))
    assert not is_cacheable(req, only_deterministic=True)
    assert is_cacheable(ChatCompletionRequest.model_validate(body(temperature=0)),
                        only_deterministic=True)  # fmt: skip


def test_auto_routes_to_the_core_and_a_pinned_edge_request_gets_a_400() -> None:
    req = ChatCompletionRequest.model_validate(body(logprobs=True))
    no = refusals(body(logprobs=True))["edge"]
    decision = rule(req, RULES, "auto", no)
    assert decision is not None and decision.tier == "core"
    pinned = ChatCompletionRequest.model_validate({**body(logprobs=True), "model": "edge-m"})
    with pytest.raises(ApiError) as exc:
        rule(pinned, RULES, "auto", no)
    assert exc.value.status == 400 and exc.value.param == "logprobs"
    assert "use model=core-m" in exc.value.message
    with pytest.raises(ApiError):  # a tenant pinned to the edge by policy too
        rule(req, RULES, "edge", no)


def test_completion_refusals() -> None:
    assert completion_refusals({"model": "auto", "prompt": "Once", "max_tokens": 5}) == {}
    assert completion_refusals({"prompt": ["Once"]}) == {}
    assert completion_refusals({"prompt": [1, 2, 3]})["edge"].param == "prompt"
    assert completion_refusals({"prompt": "x", "echo": True})["edge"].param == "echo"
    assert completion_refusals({"prompt": "x", "logprobs": 0})["edge"].param == "logprobs"
    assert completion_refusals({"prompt": "x", "suffix": "y"})["core"].param == "suffix"
    assert completion_refusals({"prompt": "x", "best_of": 3})["core"].param == "best_of"


def test_the_published_table_covers_every_audited_parameter() -> None:
    names = {row[0] for row in table()}
    audited = {
        "logprobs", "top_logprobs", "n", "tools", "tool_choice", "parallel_tool_calls",
        "response_format", "seed", "stop", "logit_bias", "max_completion_tokens", "modalities",
        "prediction", "reasoning_effort", "service_tier", "store", "metadata", "user",
    }  # fmt: skip
    assert audited <= names


def test_embedding_inputs_and_encodings() -> None:
    assert EmbeddingRequest(model="m", input="a").inputs() == ["a"]
    assert EmbeddingRequest(model="m", input=["a", "b"]).inputs() == ["a", "b"]
    assert EmbeddingRequest(model="m", input=[1, 2]).inputs() == [[1, 2]]
    assert EmbeddingRequest(model="m", input=[[1], [2, 3]]).inputs() == [[1], [2, 3]]
    v = np.array([0.5, -1.0], dtype=np.float32)
    assert encode(v, "float") == [0.5, -1.0]
    raw = base64.b64decode(str(encode(v, "base64")))
    assert np.frombuffer(raw, dtype="<f4").tolist() == [0.5, -1.0]


def test_completion_request_as_chat() -> None:
    req = CompletionRequest(model="auto", prompt="Once upon", max_tokens=7, temperature=0)
    chat = req.as_chat()
    assert chat.prompt_text() == "Once upon" and chat.output_limit == 7
    assert CompletionRequest(model="a", prompt=[1, 2]).text() is None


def test_the_docs_table_names_every_audited_parameter() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "openai-compatibility.md").read_text()
    missing = [name for name, _, _ in table() if f"`{name}`" not in doc]
    assert not missing, f"docs/openai-compatibility.md lacks {missing}"


def test_the_edge_honours_vllms_repetition_penalty_and_top_k_when_well_formed() -> None:
    assert refusals(body(repetition_penalty=1.1, top_k=20)) == {}
    assert refusals(body(repetition_penalty="x"))["edge"].param == "repetition_penalty"
    assert refusals(body(top_k=1.5))["edge"].param == "top_k"
    assert completion_refusals({"prompt": "x", "repetition_penalty": 0})["edge"].param == (
        "repetition_penalty"
    )
    assert completion_refusals({"prompt": ""})["edge"].param == "prompt"
