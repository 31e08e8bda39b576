import pytest

from edge.router import Decision, RouteRules, decide
from shared.errors import ApiError
from shared.schemas import ChatCompletionRequest

RULES = RouteRules(
    auto_model="auto", edge_model="edge-m", core_model="core-m", max_prompt_chars=100, max_tokens=64
)


def route(**kw: object) -> Decision:
    body: dict[str, object] = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
    body.update(kw)
    return decide(ChatCompletionRequest.model_validate(body), RULES)


def test_rules() -> None:
    assert route() == Decision("edge", "simple")
    assert route(model="edge-m", max_tokens=10_000) == Decision("edge", "model")
    assert route(model="core-m") == Decision("core", "model")
    assert route(messages=[{"role": "user", "content": "x" * 101}]) == Decision(
        "core", "prompt_length"
    )
    assert route(max_tokens=65) == Decision("core", "max_tokens")
    assert route(max_completion_tokens=65) == Decision("core", "max_tokens")
    assert route(tools=[{"type": "function"}]) == Decision("core", "features")
    assert route(response_format={"type": "json_object"}) == Decision("core", "features")


def test_unknown_model_is_404() -> None:
    with pytest.raises(ApiError) as info:
        route(model="gpt-9")
    assert info.value.status == 404 and info.value.code == "model_not_found"
