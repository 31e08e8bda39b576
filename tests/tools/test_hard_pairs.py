"""The hard training pairs of the cache's models: each rule rewrites a question the way its
kind says, or yields nothing (pure, ``tools/prepare/hard_pairs.py``)."""

from __future__ import annotations

import random

import pytest

from tools.prepare import hard_pairs as hp


def rng() -> random.Random:
    return random.Random(0)


@pytest.mark.parametrize(
    ("rule", "question", "expected"),
    [
        (hp.polarity, "How do I enable dark mode?", "How do I disable dark mode?"),
        (hp.polarity, "How do I turn on Bluetooth?", "How do I turn off Bluetooth?"),
        (hp.direction, "How to convert Celsius to Kelvin?", "How to convert Kelvin to Celsius?"),
        (hp.direction, "Flights from Tokyo to Seoul?", "Flights from Seoul to Tokyo?"),
        (hp.comparison, "Is Java faster than Python?", "Is Python faster than Java?"),
        (hp.comparison, "Are cakes better than ice creams?", "Are ice creams better than cakes?"),
        (hp.negation, "Is coffee bad for you?", "Isn't coffee bad for you?"),
        (hp.negation, "Why doesn't my phone charge?", "Why does my phone charge?"),
        (hp.negation, "Why can't I sleep at night?", "Why can I sleep at night?"),
        (hp.condition, "How do I lose weight?", None),  # an added condition: checked below
        (hp.contraction, "What is the capital of France?", "What's the capital of France?"),
        (hp.reorder, "How do I sort a list in Python?", "In Python, how do I sort a list?"),
    ],
)  # fmt: skip
def test_each_rule_rewrites_as_its_kind_says(
    rule: hp.Rule, question: str, expected: str | None
) -> None:
    out = rule(question, rng())
    assert out is not None and out != question
    if expected is not None:
        assert out == expected
    else:
        assert out.startswith("How do I lose weight ") and out.endswith("?")


def test_numbers_and_units_change() -> None:
    assert hp.number("How many calories are in 2 eggs?", rng()) in {
        f"How many calories are in {n} eggs?" for n in (4, 6, 20)
    }
    year = hp.number("Who won the World Cup in 2014?", rng())
    assert year is not None and year != "Who won the World Cup in 2014?" and "in 20" in year
    assert hp.number("How many km is a marathon?", rng()) == "How many miles is a marathon?"
    assert hp.number("Is 1,000,000 a big number?", rng()) in {
        "Is 2000000 a big number?", "Is 3000000 a big number?", "Is 10000000 a big number?"
    }  # fmt: skip


def test_names_are_swapped_for_other_names_from_the_corpus() -> None:
    out = hp.entity("What is the capital of France?", rng(), ["Germany"])
    assert out == "What is the capital of Germany?"
    assert hp.entity("What is a good book?", rng(), ["Germany"]) is None  # no name inside
    # A sentence's first word is no name: "Are" after a question mark stays.
    assert hp.entity("Why? Are cats smart?", rng(), ["Germany"]) is None


def test_a_rule_that_does_not_apply_yields_nothing() -> None:
    assert hp.polarity("What is the meaning of life?", rng()) is None
    assert hp.direction("How do I learn to cook?", rng()) is None  # "to" is no direction
    assert hp.direction("How do I talk someone down from trying to commit suicide?", rng()) is None
    assert hp.comparison("Is there anything other than love?", rng()) is None
    assert hp.reorder("What is love?", rng()) is None


def test_synonyms_and_surface_noise_keep_the_question() -> None:
    assert hp.synonym("How do I fix a flat tire?", rng()) in {
        "How can I fix a flat tire?", "How do I repair a flat tire?"
    }  # fmt: skip
    out = hp.surface("What are the raw materials for chocolate?", random.Random(1))
    assert out is not None and "chocolate" in out.lower()


def test_generation_is_reproducible_capped_and_labelled_by_kind() -> None:
    texts = [
        "How do I enable dark mode in Chrome?", "Is Java faster than Python?",
        "How do I convert Celsius to Fahrenheit?", "What is the capital of France?",
        "How do I sort a list in Python?", "Why is the sky blue in Paris?",
        "How many calories are in 2 eggs?", "Where do I live in London?",
    ] * 3  # fmt: skip
    out = hp.generate(texts, per_kind=2)
    assert out == hp.generate(list(reversed(texts)), per_kind=2)  # order of the input: no matter
    kinds = {k for *_, k in out}
    assert {"polarity", "direction", "comparison", "negation", "contraction"} <= kinds
    for kind in kinds:
        assert sum(1 for *_, k in out if k == kind) <= 2
    for a, b, label, kind in out:
        assert a != b
        assert label == (1 if kind in hp.POSITIVE_RULES else 0)
