import numpy as np
import pytest

from edge.routing.eval import pgr_curve, summarize
from edge.routing.model import FEATURES, RouterModel, text_features
from edge.routing.router import Decision, Load, Router, RouteRules, Saturation, decide, rule
from edge.settings import RouteSettings
from shared.errors import ApiError
from shared.schemas import ChatCompletionRequest

RULES = RouteRules(
    auto_model="auto", edge_model="edge-m", core_model="core-m", max_prompt_chars=100,
    max_tokens=64, edge_context_tokens=2048,
)  # fmt: skip
DIM = 384


def request(**kw: object) -> ChatCompletionRequest:
    body: dict[str, object] = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
    body.update(kw)
    return ChatCompletionRequest.model_validate(body)


def route(**kw: object) -> Decision:
    return decide(request(**kw), RULES)


def toy_model() -> RouterModel:
    """score = vector[0]: tests choose the score through the vector."""
    weights = np.zeros(DIM + len(FEATURES) + 1, dtype=np.float32)
    weights[0] = 1.0
    n = len(FEATURES)
    return RouterModel(
        weights, np.zeros(n), np.ones(n), (10.0, 0.0), np.linspace(-1, 1, 201), {"id": "toy"}
    )


def vec(score: float) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[0] = score
    return v


def test_rules() -> None:
    assert route() == Decision("edge", "simple")
    assert route(model="edge-m", max_tokens=10_000) == Decision("edge", "model")
    assert route(model="core-m") == Decision("core", "model")
    long = [{"role": "user", "content": "x" * 101}]
    assert route(messages=long) == Decision("core", "prompt_length")
    assert route(max_tokens=65) == Decision("core", "max_tokens")
    assert route(max_completion_tokens=65) == Decision("core", "max_tokens")
    assert route(tools=[{"type": "function"}]) == Decision("core", "features")
    assert route(response_format={"type": "json_object"}) == Decision("core", "features")
    huge = [{"role": "user", "content": "x" * 9000}]
    assert rule(request(messages=huge), RULES) == Decision("core", "context")


def test_unknown_model_is_404() -> None:
    with pytest.raises(ApiError) as info:
        route(model="gpt-9")
    assert info.value.status == 404 and info.value.code == "model_not_found"


def test_rules_override_the_classifier() -> None:
    router = Router(RULES, toy_model(), RouteSettings(core_share=0.5))
    assert router.route(request(model="edge-m"), vec(0.99)).reason == "model"
    assert router.route(request(tools=[{"type": "function"}]), vec(-0.99)).tier == "core"
    pinned = Router(
        RouteRules(**{**RULES.__dict__, "policy": "core"}), toy_model(), RouteSettings()
    )
    assert pinned.route(request(), vec(-0.99)) == Decision("core", "policy")
    scored = router.route(request(), vec(0.9))
    assert scored.tier == "core" and scored.reason == "score" and scored.score == pytest.approx(0.9)


@pytest.mark.parametrize("share", [0.1, 0.3, 0.7])
def test_calibration_converges_to_the_target_share(share: float) -> None:
    router = Router(RULES, toy_model(), RouteSettings(core_share=share, window=1000))
    rng = np.random.default_rng(7)
    # Scores drift away from the training distribution: only calibration keeps the share.
    scores = rng.normal(2.0, 0.5, 6000)
    tiers = [router.route(request(), vec(s)).tier for s in scores]
    tail = tiers[-2000:]
    assert tail.count("core") / len(tail) == pytest.approx(share, abs=0.04)


def test_fixed_threshold_mode() -> None:
    router = Router(RULES, toy_model(), RouteSettings(mode="fixed", threshold=0.5))
    # p = sigmoid(10 * score): 0.5 at score 0, whatever the stream looks like.
    assert router.route(request(), vec(0.05)).tier == "core"
    assert router.route(request(), vec(-0.05)).tier == "edge"
    for s in np.linspace(3, 4, 500):
        router.route(request(), vec(s))
    assert router.route(request(), vec(-0.05)).tier == "edge"


def test_saturated_core_sends_borderline_prompts_to_the_edge() -> None:
    router = Router(RULES, toy_model(), RouteSettings(mode="fixed", threshold=0.5, band=0.1))
    assert router.route(request(), vec(0.05)).tier == "core"
    saturated = Load(core_saturated=True)
    flipped = router.route(request(), vec(0.05), saturated)
    assert flipped == Decision("edge", "core_saturated", pytest.approx(0.05), "core-saturated")
    assert router.route(request(), vec(0.5), saturated).tier == "core"  # not borderline


def test_saturation_lasts_its_seconds() -> None:
    now = [100.0]
    saturation = Saturation(30.0, clock=lambda: now[0])
    assert not saturation.active
    saturation.mark()
    now[0] = 129.0
    assert saturation.active
    now[0] = 130.5
    assert not saturation.active


def test_busy_edge_sends_borderline_prompts_to_the_core() -> None:
    router = Router(RULES, toy_model(), RouteSettings(mode="fixed", threshold=0.5, band=0.1))
    busy = Load(edge_queue_high=True)
    assert router.route(request(), vec(-0.05), busy) == Decision(
        "core", "edge_busy", pytest.approx(-0.05)
    )
    assert router.route(request(), vec(-0.5), busy).tier == "edge"


def test_a_conversation_sticks_to_its_tier() -> None:
    router = Router(
        RULES, toy_model(), RouteSettings(mode="fixed", threshold=0.5, sticky_margin=0.1)
    )
    turn1 = [{"role": "user", "content": "plan my trip"}]
    assert router.route(request(messages=turn1), vec(0.05)).tier == "core"
    turn2 = [*turn1, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "and?"}]
    stuck = router.route(request(messages=turn2), vec(-0.05))
    assert (stuck.tier, stuck.reason) == ("core", "sticky")
    assert router.route(request(messages=turn2), vec(-0.5)).tier == "edge"  # decisive move
    other = [{"role": "user", "content": "another chat"}, *turn2[1:]]
    assert router.route(request(messages=other), vec(-0.05)).tier == "edge"


def test_pgr_curve() -> None:
    small = np.array([1.0, 0.0, 0.0, 1.0])
    large = np.array([1.0, 1.0, 1.0, 0.0])
    perfect = summarize(pgr_curve(large - small, small, large))
    assert perfect["curve"][0]["pgr"] == 0.0 and perfect["curve"][-1]["pgr"] == 1.0
    assert perfect["pgr_at"]["0.5"] == 2.0  # two wins routed, the loss kept small
    assert perfect["apgr"] > 1.0
    worst = summarize(pgr_curve(small - large, small, large))
    assert worst["apgr"] < perfect["apgr"]


def test_text_features_flag_code_and_maths() -> None:
    code, maths, plain = (
        text_features("def f(x):\n    return x"),
        text_features("Solve 3 + 4 = x"),
        text_features("Tell me a story"),
    )
    idx = FEATURES.index
    assert code[idx("code")] == 1 and plain[idx("code")] == 0
    assert maths[idx("math")] == 1 and plain[idx("math")] == 0
