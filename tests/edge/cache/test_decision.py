"""The cache's match decision (pure), the verifier's features and the eval CLI."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edge.cache.contrast_roles import voice_kept
from edge.cache.contrast_trades import coordinated_swap
from edge.cache.decision import Candidate, MatchPolicy, confidence
from edge.cache.eval import load_pairs, operating_points
from edge.cache.loading import load_matcher
from edge.cache.match import Matcher
from edge.cache.pair_checks import (
    LEXICAL,
    extra_questions,
    lexical_features,
    negated_head,
    new_names,
    opposite_words,
    told_apart_by,
)
from edge.cache.verifier import (
    PrecisionCurve,
    Stack,
    Verifier,
    calibrate,
    pair_features,
    stacked,
)
from edge.embedder import Embedder
from edge.settings import EdgeSettings
from shared.completions import cached_usage

DIM = 4


def unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def cosine_verifier() -> Verifier:
    """A stand-in verifier whose score rises with the cosine feature only."""
    n = 2 * DIM + len(LEXICAL)
    w = np.zeros((n, 1), dtype=np.float32)
    w[2 * DIM + LEXICAL.index("cosine"), 0] = 40.0
    b = np.array([-36.0], dtype=np.float32)  # P = 0.5 at cosine 0.9
    scores = np.linspace(0.0, 1.0, 101, dtype=np.float32)
    calibration = PrecisionCurve(scores, np.clip(scores, 0.5, 1.0))  # precision == score
    return Verifier([[(w, b)]], np.zeros(n), np.ones(n), calibration, {"version": "test"})


def candidate(cos: float, prompt: str = "cached?", obs: tuple[tuple[float, bool], ...] = ()):  # type: ignore[no-untyped-def]
    q = unit(1, 0, 0, 0)
    other = unit(cos, float(np.sqrt(1 - cos * cos)), 0, 0)
    return q, Candidate("e1", float(q @ other), prompt, other, obs)


def test_below_floor_is_never_verified() -> None:
    m = Matcher(cosine_verifier(), MatchPolicy(floor=0.8))
    q, c = candidate(0.7)
    match = m.decide(q, "asked?", [c])
    assert (match.serve, match.reason) == (False, "below_floor")


def test_same_words_are_served_without_the_verifier() -> None:
    m = Matcher(cosine_verifier(), MatchPolicy(floor=0.9))
    q, c = candidate(0.85, prompt="What is  Redis?")  # below the floor: the words decide
    assert m.decide(q, "what is redis?", [c]).reason == "exact"


def test_delta_sets_the_threshold_and_history_moves_it() -> None:
    m = Matcher(cosine_verifier(), MatchPolicy(delta=0.05, prior_strength=20))
    q, c = candidate(0.99)  # verifier score ~0.98 > 0.95
    assert m.decide(q, "asked?", [c]).serve
    # The entry was once wrong at a higher score: it is not served at this one any more.
    _, wrong = candidate(0.99, obs=((0.999, False),))
    assert m.decide(q, "asked?", [wrong]).reason == "rejected"
    # An entry confirmed many times at lower scores is served below the global threshold.
    _, weak = candidate(0.955)  # score 0.9: below the 0.95 the prior needs
    first = m.decide(q, "asked?", [weak])
    assert first.reason == "rejected"
    confirmed = Candidate(weak.entry_id, weak.cosine, weak.prompt, weak.vector,
                          tuple((first.score - 0.01, True) for _ in range(30)))  # fmt: skip
    assert m.decide(q, "asked?", [confirmed]).serve


def test_exploration_shrinks_with_history() -> None:
    m = Matcher(cosine_verifier(), MatchPolicy(explore_rate=0.5, prior_strength=10))
    q, c = candidate(0.99)
    assert m.decide(q, "asked?", [c], draw=0.4).reason == "explore"
    _, seen = candidate(0.99, obs=tuple((0.9, True) for _ in range(30)))
    assert m.decide(q, "asked?", [seen], draw=0.4).reason == "verified"


def test_without_a_verifier_cosine_decides() -> None:
    m = Matcher(None, MatchPolicy(min_similarity=0.95))
    q, c = candidate(0.96)
    assert m.decide(q, "asked?", [c]).reason == "cosine"
    q, c = candidate(0.9)
    assert not m.decide(q, "asked?", [c]).serve


def test_confidence_counts_monotone_evidence_only() -> None:
    # A right answer at a higher score says nothing about this one; a wrong one at a
    # lower score neither.
    assert confidence(0.8, 0.9, [(0.95, True), (0.5, False)], 10) == pytest.approx(0.9)
    assert confidence(0.8, 0.9, [(0.7, True)], 10) > 0.9
    assert confidence(0.8, 0.9, [(0.85, False)], 10) < 0.9


def test_calibration_threshold_is_monotone_and_conservative() -> None:
    rng = np.random.default_rng(0)
    scores = rng.random(4000)
    labels = (rng.random(4000) < scores).astype(int)  # P(right | score) = score
    cal = calibrate(scores, labels)
    assert np.all(np.diff(cal.precision) >= 0)
    strict, loose = cal.threshold(0.05), cal.threshold(0.2)
    assert loose < strict < 1.0
    served = scores >= strict
    assert labels[served].mean() >= 0.95  # the bound errs on the safe side


def features(a: str, b: str, cosine: float) -> dict[str, float]:
    return dict(zip(LEXICAL, lexical_features(a, b, cosine), strict=True))


def test_lexical_checks_catch_what_embeddings_miss() -> None:
    assert features("Is it safe to swim?", "Is it not safe to swim?", 0.95)["negation_differs"]
    assert features("Best laptop in 2023?", "Best laptop in 2024?", 0.97)["numbers_differ"]
    assert features("Why is Python slow?", "How is Python slow?", 0.9)["qword_differs"]
    assert features("Who is Obama?", "Who is Trump?", 0.8)["names_differ"]


def test_the_checks_read_words_as_the_contrast_check_does() -> None:
    """One reading of words (shared.lexicon) for the checks after the MLP: however a
    negation is spelled, it is one, so a typographic apostrophe loses none ("don\u2019t"
    was "don" and "t")."""
    assert negated_head("Why shouldn\u2019t I vote?") and negated_head("Why can't I vote?")
    assert told_apart_by("Why do cats purr?", "Why don\u2019t cats purr?") == "negation"
    assert told_apart_by("Why don't cats purr?", "Why do cats not purr?") is None


def test_an_asked_question_that_names_something_new_is_told_apart() -> None:
    # QQP's templates call these duplicates; a cache must not answer Kentucky with Florida.
    nra = "What are the safety precautions on handling shotguns proposed by the NRA in {}?"
    assert new_names(nra.format("Florida"), nra.format("Kentucky")) == {"kentucky"}
    assert new_names("Why is taffy imported in Laos?", "Why is taffy imported in Czech Republic?")
    assert new_names("Best HP printer?", "Best HP LaserJet M604dn printer?") == {
        "laserjet",
        "m604dn",
    }
    # Directional: the cached question may name more than the asked one.
    assert not new_names("Is Python or Go faster?", "Which is faster, Python?")
    # Not names: sentence starts, "I", case, possessives, plurals, a shared stem.
    assert not new_names("Do you believe in fate?", "Do you believe in fate? If yes, why?")
    assert not new_names("How do I learn english?", "How can I learn English?")
    assert not new_names("What's Stephen King's style?", "What is Stephen Kings style?")
    assert not new_names("What Pakistani think of Indians?", "What do people in Pakistan think?")


@pytest.mark.parametrize(
    ("cached", "asked", "new"),
    [
        ("best pizza in NYC", "best pizza in New York City", set()),
        ("best pizza in New York City", "best pizza in NYC", set()),
        ("flights los angeles to san francisco", "flights LA to SF", set()),
        ("Is the ROI on solar panels good?", "Is the return on investment on solar good?", set()),
        ("How do I fight a DUI?", "How do I fight a driving under the influence charge?", set()),
        # Another place, spelled out or not, is still another place.
        ("best pizza in NYC", "best pizza in Los Angeles", {"los", "angele"}),
        ("flights to LA", "flights to SF", {"sf"}),
        # A compound's capitals spell it; only a compound's ("IQs" is no "I Qs").
        ("What is a closure in JavaScript?", "What is a closure in JS?", set()),
        ("What is a closure in JS?", "What is a closure in JavaScript?", set()),
        ("What is a closure in Java?", "What is a closure in JS?", {"js"}),
        ("What do IITians think of NITs?", "What do IITians think of IIT?", {"iit"}),
    ],
)
def test_an_acronym_and_its_words_are_one_name(cached: str, asked: str, new: set[str]) -> None:
    assert new_names(cached, asked) == new
    assert (told_apart_by(cached, asked) == "names") is bool(new)


def test_an_asked_text_that_asks_more_questions_is_told_apart() -> None:
    # The cached answer covers one of the two questions asked.
    gst = "What are the advantages and disadvantages of GST bill?"
    assert extra_questions(gst, "What is GST bill? What are its advantages and disadvantages?")
    assert (
        extra_questions(
            "How imminent is World War three?",
            ("How close are we to World War Three, and how bad would it be?"),
        )
        == 1
    )
    assert told_apart_by(gst, "What is GST? What are its advantages?") == "questions"
    # Directional: the cached text may ask more.
    assert not extra_questions("What is GST? Is it good?", "Is GST good?")
    # Not new questions: bare follow-ups, parentheses, statements, a missing "?", a joined
    # "and why", "how and why".
    for cached, asked in [
        ("Do you believe in fate?", "Do you believe in fate? If yes, then why?"),
        ("How do I convert this integral?", "How do I convert one integral? (See details)"),
        ("How can I log into Facebook?", "I forgot my password. How can I log into Facebook?"),
        ("How do I lose weight faster", "How can I lose weight quickly?"),
        ("What's your favourite food?", "What's your favorite food, and why?"),
        ("How did Trump win the election?", "How and why did Trump win the election?"),
    ]:
        assert not extra_questions(cached, asked), asked
        assert told_apart_by(cached, asked) is None, asked


def test_the_asker_in_an_aside_is_no_new_name() -> None:
    # "I've" before the question is the asker; after it, what it adds is the asker's case.
    assert (
        told_apart_by("Can you freeze cheese?", "Hey, I've wondered: can you freeze cheese?")
        is None
    )
    assert told_apart_by("Can I bring food?", "Can I bring food if I'm flying abroad?") == "names"


def test_an_asked_question_for_the_opposite_is_told_apart() -> None:
    caffeine = "What are the {} effects, if any, of long-term caffeine consumption?"
    assert opposite_words(caffeine.format("positive"), caffeine.format("negative")) == {"negative"}
    assert told_apart_by("How to gain weight?", "How to lose weight?") == "opposite"
    # Both sides in the cached question, or a word with no listed opposite: not flagged.
    assert not opposite_words("Pros and cons of Go?", "What are the cons of Go?")
    assert not opposite_words("Is tea less harmful than coffee?", "Is tea more harmful?")
    assert not opposite_words("Is coffee good for you?", "Is coffee bad for you?")
    assert opposite_words("What is the drawback of democracy?", "Advantages and drawbacks of it?")


def test_a_question_negated_at_its_head_is_told_apart() -> None:
    for cached, asked in [
        ("Is coffee bad for you?", "Is coffee not bad for you?"),
        ("Why is the sky blue?", "Why is the sky not blue?"),
        ("Why should one vote for Trump?", "Why shouldn't I vote for Trump?"),
        ("Why don't we let people join ISIS?", "Why do people join ISIS?"),  # either way
        # The negation moved to another clause (the contrast check reads it so too).
        ("why can't I sleep when I drink coffee", "why can I sleep when I don't drink coffee"),
    ]:
        assert told_apart_by(cached, asked) == "negation", asked
    for cached, asked in [
        ("Why can't I lose weight?", "Why am I not losing weight?"),  # both negated
        # The same verb negated, past the head's five words on one side.
        ("why won't my model's loss go down", "why will my model's loss not go down"),
        ("Why isn't my Bluetooth headset pairing?", "Why is my Bluetooth headset not pairing?"),
        ("How do I tell if a guy likes me?", "How do I know if a guy likes me or not?"),
        ("Can you lose weight without exercising?", "How can you lose weight without exercise?"),
        ("How can we control anger?", "What do I do when I get so angry I can't control it?"),
        ("How do I recover my Gmail password?", "I do not remember my Gmail password. Help?"),
    ]:
        assert told_apart_by(cached, asked) is None, asked
    assert negated_head("Is it not safe? Answer yes or no.")


def test_the_verifier_scores_a_pair_that_names_something_new_zero() -> None:
    rome = "Best pizza in Rome?"
    pairs = [(rome, rome), (rome, "Best pizza in Naples?"), (rome, "Is pizza Italian? " + rome)]
    features = np.zeros((3, 2 * DIM + len(LEXICAL)), dtype=np.float32)
    features[:, 2 * DIM + LEXICAL.index("cosine")] = 0.99
    scores = cosine_verifier().score_pairs(features, pairs)
    assert scores[0] > 0.9 and scores[1] == 0.0 and scores[2] == 0.0


def test_cached_usage_marks_every_token() -> None:
    u = cached_usage({"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42})
    assert u is not None
    assert u["total_tokens"] == 42
    assert u["prompt_tokens_details"] == {"cached_tokens": 12}
    assert u["completion_tokens_details"] == {"cached_tokens": 30}
    assert cached_usage(None) is None


def test_pairs_file_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"text_a": "a", "text_b": "b", "label": 1}\n{"text_a": "a"}\n')
    with pytest.raises(ValueError, match=r"pairs\.jsonl:2"):
        load_pairs(path)
    assert len(load_pairs(path, limit=1)) == 1


def test_the_stack_gates_on_the_mlp_and_weighs_the_cross_encoder() -> None:
    stack = Stack(gate=0.2, bias=0.0, w_mlp=1.0, w_cross=1.0)
    mlp = np.array([0.1, 0.5, 0.5, 0.9], dtype=np.float32)
    cross = np.array([9.0, -3.0, 3.0, 0.0], dtype=np.float32)
    out = stacked(mlp, cross, stack)
    assert out[0] == 0.0  # under the gate: the cross-encoder's opinion is never asked
    assert out[1] < 0.1 < 0.9 < out[2]  # same MLP score, the cross-encoder decides
    assert out[3] == pytest.approx(0.9, abs=1e-4)


def test_the_stack_bounds_bracket_every_cross_encoder_answer() -> None:
    stack = Stack(gate=0.2, bias=0.5, w_mlp=1.2, w_cross=0.8, low=-4.0, high=6.0)
    v = cosine_verifier()
    v.stack = stack
    mlp = np.array([0.1, 0.3, 0.6, 0.95], dtype=np.float32)
    low, high = v.bounds(mlp)
    for logit_value in (-100.0, -4.0, 0.0, 3.0, 6.0, 100.0):  # clipped to [low, high]
        out = stacked(mlp, np.full(4, logit_value, dtype=np.float32), stack)
        assert np.all(low <= out) and np.all(out <= high)
    assert low[0] == high[0] == 0.0  # under the gate: 0, nothing to read
    assert stack == Stack(*stack.as_array())  # saved and loaded whole


def test_the_stack_gate_ignores_pairs_the_names_check_zeroed() -> None:
    from tools.prepare.verifier_train import stack_gate

    y = np.array([1] * 100 + [0] * 50)
    mlp = np.concatenate([np.zeros(10), np.linspace(0.5, 1.0, 90), np.full(50, 0.2)])
    assert stack_gate(mlp, y) > 0.5  # not 0: zeroed pairs never reach the cross-encoder


def test_a_stacked_verifier_refuses_another_cross_encoder(tmp_path: Path) -> None:
    cross_dir = tmp_path / "cross"
    cross_dir.mkdir()
    (cross_dir / "edgecore.json").write_text('{"version": "new"}')
    v = cosine_verifier()
    np.savez(tmp_path / "verifier.npz", shape=np.array([1, 1]), mean=v.mean, std=v.std,
             cal_scores=v.calibration.scores, cal_precision=v.calibration.precision,
             m0w0=v.members[0][0][0], m0b0=v.members[0][0][1],
             stack=Stack(0.1, 0.0, 1.0, 1.0).as_array())  # fmt: skip
    (tmp_path / "verifier.json").write_text('{"cross_encoder": "old"}')
    assert Verifier.load(tmp_path).stack is None  # the MLP alone, on its own calibration
    with pytest.raises(ValueError, match="calibrated with cross-encoder old"):
        Verifier.load(tmp_path, cross_dir)


def test_the_shipped_cross_encoder_is_int8_and_its_stack_fits_it(
    models_dir: Path, trained_verifier: Path
) -> None:
    import onnx

    folder = models_dir / "cache-cross-encoder"
    meta = json.loads((folder / "edgecore.json").read_text())
    assert meta["version"].endswith("-int8")
    ops = {node.op_type for node in onnx.load(str(folder / "model.onnx")).graph.node}
    assert "MatMulInteger" in ops or "DynamicQuantizeMatMul" in ops, sorted(ops)
    verifier = json.loads((trained_verifier / "verifier.json").read_text())
    assert verifier["cross_encoder"] == meta["version"]  # fitted on the INT8 logits


def test_a_missing_cross_encoder_leaves_the_mlp_deciding(
    tmp_path: Path, models_dir: Path, trained_verifier: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A models folder with the verifier but without the cross-encoder it was stacked with.
    (tmp_path / "verifier").symlink_to(trained_verifier)
    settings = EdgeSettings(models_dir=tmp_path).with_cache(cross_encoder=True)
    with caplog.at_level(logging.ERROR, logger="edgecore.edge.cache"):
        matcher = load_matcher(settings)
    assert matcher.verifier is not None and matcher.verifier.stack is None
    assert matcher.semantic and "MLP verifier decides alone" in caplog.text


def test_real_verifier_rejects_a_negation(models_dir: Path, trained_verifier: Path) -> None:
    emb = Embedder(models_dir / "all-minilm-l6-v2-onnx")
    mlp = Verifier.load(trained_verifier)
    stacked = Verifier.load(trained_verifier, models_dir / "cache-cross-encoder")
    assert mlp.cross is None and stacked.cross is not None and stacked.stack is not None
    for verifier in (mlp, stacked):
        # The verifier alone decides: no floor, at the shipped budget.
        _rejects_negations(emb, Matcher(verifier, MatchPolicy(floor=0.0, delta=0.1)))


def _rejects_negations(emb: Embedder, m: Matcher) -> None:
    pairs = [
        (
            "Is it safe to drink tap water in Mexico?",
            "Is it not safe to drink tap water in Mexico?",
        ),
        ("Does coffee cause cancer?", "Does coffee not cause cancer?"),
        ("Why is the sky blue?", "Why is the sky not blue?"),
        ("What was the population of Paris in 1990?", "What was the population of Paris in 2020?"),
        (
            "What are the safety precautions on handling shotguns proposed by the NRA in Florida?",
            "What are the safety precautions on handling shotguns proposed by the NRA in Kentucky?",
        ),
    ]
    for cached, asked in pairs:
        a, b = emb.embed([f"user: {cached}", f"user: {asked}"])
        match = m.decide(b, asked, [Candidate("e", float(a @ b), cached, a)])
        assert not match.serve, (cached, asked, match)
        assert float(a @ b) > 0.85  # a cosine threshold would be tempted


def test_eval_cli_runs_on_any_pairs_file(tmp_path: Path, models_dir: Path) -> None:
    pairs = tmp_path / "mine.jsonl"
    rows = [
        {"text_a": "How do I reset my password?", "text_b": "how do I reset my password?"},
        {"text_a": "How do I reset my password?", "text_b": "How can I reset my password?"},
        {"text_a": "Is coffee bad for you?", "text_b": "Is coffee not bad for you?", "label": 0},
        {"text_a": "Capital of France?", "text_b": "Capital of Spain?", "label": 0},
    ]
    for row in rows:
        row.setdefault("label", 1)
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.json"
    # The default decision, then the stacked one (where a verifier was trained).
    stacked = (models_dir / "verifier" / "verifier.npz").exists()
    runs: list[list[str]] = [[], ["--candidate-floor", "0.99", "--false-hit-budget", "0.1"]]
    for extra in [*runs, ["--cross-encoder"]] if stacked else runs:
        done = subprocess.run(
            [sys.executable, "-m", "tools.cli", "eval", "cache", "--pairs", str(pairs),
             "--json", str(out), "--models-dir", str(models_dir), "--threads", "1", *extra],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        result = json.loads(out.read_text())
        for key in ("precision", "recall", "false_hit_rate", "f1", "p50_ms", "p99_ms"):
            assert key in result["decision"]
        assert result["decision"]["recall"] >= 0.5  # the identical pair at least
        assert result["decision"]["false_hit_rate"] == 0.0
        assert {"threshold", "precision", "recall"} <= set(result["cosine"][0])
        assert "edgecore decision" in done.stdout
        if "--candidate-floor" in extra:  # the operator's knobs reach the decision
            assert result["policy"]["candidate_floor"] == 0.99
            assert result["policy"]["false_hit_budget"] == 0.1


def test_a_text_embeds_the_same_whatever_it_is_batched_with(models_dir: Path) -> None:
    # The INT8 model's activation scales are per tensor: batched together, texts used to
    # shift each other's vectors (cosine 0.976 to itself), so a repeat could miss.
    from edge.embedder import Embedder

    emb = Embedder(models_dir / "all-minilm-l6-v2-onnx")
    text = "In one sentence, what is Kubernetes? (#66)"
    others = [f"A much longer question about topic {i}, with many more words in it." * 3
              for i in range(15)]  # fmt: skip
    alone = emb.embed([text])[0]
    batched = emb.embed([*others, text])[-1]
    assert float(alone @ batched) > 0.9999
    assert abs(float(np.linalg.norm(alone)) - 1.0) < 1e-5


def test_the_cross_encoder_reads_only_pairs_whose_decision_it_can_change(
    models_dir: Path, trained_verifier: Path
) -> None:
    """The borderline band: same decisions as reading every pair, fewer reads."""
    emb = Embedder(models_dir / "all-minilm-l6-v2-onnx")
    verifier = Verifier.load(trained_verifier, models_dir / "cache-cross-encoder")
    assert verifier.cross is not None
    read: list[tuple[str, str]] = []
    logits = verifier.cross.logits

    def spy(pairs: list[tuple[str, str]]) -> np.ndarray:  # the real model, counted
        read.extend(pairs)
        return logits(pairs)

    verifier.cross.logits = spy  # type: ignore[method-assign]
    # No contrast veto and no floor: every pair reaches the verifier.
    matcher = Matcher(verifier, MatchPolicy(floor=0.0, delta=0.1, contrast=False))
    band = reference = 0
    dev = Path(__file__).resolve().parents[2] / "data" / "contrast_dev.jsonl"
    for cached, asked, _ in load_pairs(dev):
        a, b = emb.embed([f"user: {cached}", f"user: {asked}"])
        read.clear()
        match = matcher.decide(b, asked, [Candidate("e", float(a @ b), cached, a)])
        if match.reason == "reworded":  # decided before any model
            continue
        band += len(read)
        read.clear()
        # read as the cached question (view:order, view:voice)
        if coordinated_swap(cached, asked) or voice_kept(cached, asked):
            asked, b = cached, a
        features = pair_features(a, b, cached, asked)[None, :]
        score = float(verifier.score_pairs(features, [(cached, asked)])[0])
        reference += len(read)
        served = verifier.calibration.precision_at(score) >= 0.9
        assert match.serve == served, (cached, asked, match, score)
    assert band < reference, (band, reference)


def test_the_match_policy_defaults_are_the_cache_settings() -> None:
    from edge.settings import CacheSettings

    assert MatchPolicy() == MatchPolicy.of(CacheSettings())  # one place for the defaults
    changed = CacheSettings(candidate_floor=0.7, false_hit_budget=0.02, cross_encoder_band=False)
    policy = MatchPolicy.of(changed)
    assert (policy.floor, policy.delta, policy.band) == (0.7, 0.02, False)


def test_the_chain_names_the_step_that_decided() -> None:
    m = Matcher(cosine_verifier(), MatchPolicy(floor=0.8, delta=0.05))
    q, near = candidate(0.99, prompt="How do I solve 2x + 3 = 7?")

    def decided(asked: str, *cands: Candidate) -> tuple[str, str, list[str]]:
        match = m.decide(q, asked, list(cands))
        return match.reason, match.decided_by, [s.name for s in match.steps]

    exact = decided("how do I  solve 2x + 3 = 7?", near)
    assert exact == ("exact", "exact", ["partition", "exact"])
    _, far = candidate(0.5)
    assert decided("asked?", far) == ("below_floor", "floor", ["partition", "floor"])
    # A formula with another sign: vetoed, and the rewording step never saw it.
    reason, by, _ = decided("How do I solve 2x - 3 = 7?", near)
    assert (reason, by) == ("contrast", "veto:contrast")
    assert decided("How can I solve 2x + 3 = 7?", near)[:2] == ("reworded", "reworded")
    # A hit by the models, and a refusal: the picker decides, after every scorer ran.
    reason, by, names = decided("Solving 2x + 3 = 7, how?", near)
    assert (reason, by) == ("verified", "picker:delta")
    assert names[-3:] == ["veto:told_apart", "scorer:mlp", "picker:delta"]
    _, weak = candidate(0.9, prompt="How do I solve 2x + 3 = 7?")
    match = m.decide(q, "Solving 2x + 3 = 7, how?", [weak])
    assert (match.reason, match.decided_by) == ("rejected", "picker:delta")
    assert "refused" in str(match.steps[-1])
    # A pair the verifier's lexical checks tell apart scores 0, and the step says why.
    _, gst = candidate(0.99, prompt="What is GST?")
    match = m.decide(q, "What is GST? What are its advantages?", [gst])
    assert (match.reason, match.score) == ("rejected", 0.0)
    assert "veto:told_apart: 1 of 1 vetoed (questions)" in map(str, match.steps)


def test_an_abbreviation_spelled_out_is_served_whatever_its_cosine() -> None:
    m = Matcher(cosine_verifier(), MatchPolicy(floor=0.8))
    q, far = candidate(0.6, prompt="What does the CPU do?")  # the bi-encoder read 0.62
    match = m.decide(q, "what does the central processing unit do", [far])
    assert (match.serve, match.reason, match.decided_by) == (True, "reworded", "view:abbreviation")
    # Any other word changed: the view is no rewording, and the floor decides as before.
    match = m.decide(q, "what does the central processing unit cost", [far])
    assert (match.serve, match.decided_by) == (False, "floor")
    # Without a verifier only the same words are served, abbreviated or not.
    match = Matcher(None, MatchPolicy(floor=0.8)).decide(q, "what does the central "
                                                         "processing unit do", [far])  # fmt: skip
    assert not match.serve


def test_operating_points_read_the_score_curve() -> None:
    scores = np.array([0.9, 0.8, 0.8, 0.7, 0.6, 0.0])
    labels = np.array([1, 1, 0, 1, 0, 1])
    points = operating_points(scores, labels, recall=0.5, precision=0.95)
    # Recall first reaches 0.5 at 0.8 (serving both 0.8s: 2 right of 3); precision 0.95
    # holds only at 0.9 (1 of 4 positives).
    assert points == {"precision_at_recall_0.50": 0.6667, "recall_at_precision_0.95": 0.25}
    assert operating_points(np.zeros(3), np.zeros(3)) == {
        "precision_at_recall_0.40": 0.0, "recall_at_precision_0.95": 0.0
    }  # fmt: skip
