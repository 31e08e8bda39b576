"""The hard training pairs of the cache's models: each rule rewrites a question the way its
kind says, or yields nothing (pure, ``tools/prepare/hard_pairs.py``)."""

from __future__ import annotations

import random

import pytest

from tools.prepare import hard_pairs as hp
from tools.prepare.hard_pair_corpus import Corpus, entity, scope, sibling


def rng() -> random.Random:
    return random.Random(0)


@pytest.mark.parametrize(
    ("rule", "question", "expected"),
    [
        (hp.polarity, "How do I enable autoplay?", "How do I disable autoplay?"),
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
    out = entity("What is the capital of France?", rng(), ["Germany"])
    assert out == "What is the capital of Germany?"
    assert entity("What is a good book?", rng(), ["Germany"]) is None  # no name inside
    # A sentence's first word is no name: "Are" after a question mark stays.
    assert entity("Why? Are cats smart?", rng(), ["Germany"]) is None


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
        "Can the sender recall a wire?", "What is the difference between TCP and UDP?",
    ] * 3  # fmt: skip
    out = hp.generate(texts, per_kind=2)
    assert out == hp.generate(list(reversed(texts)), per_kind=2)  # order of the input: no matter
    kinds = {k for *_, k in out}
    assert {"polarity", "direction", "comparison", "negation", "contraction"} <= kinds
    assert {"role", "symmetric", "preamble", "typo"} <= kinds
    for kind in kinds:
        assert sum(1 for *_, k in out if k == kind) <= 2
    for a, b, label, kind in out:
        assert (a == b) == (kind == "identity")
        assert label == (1 if kind in hp.POSITIVE_RULES or kind == "identity" else 0)
    assert sum(1 for *_, k in out if k == "identity") == 2


@pytest.mark.parametrize(
    ("rule", "question", "expected"),
    [
        (hp.role, "Can the sender recall a wire?", "Can the recipient recall a wire?"),
        (hp.role, "Should the buyer pay the seller?", "Should the seller pay the buyer?"),
        (hp.role, "Did Apple sue Samsung over patents?", "Did Samsung sue Apple over patents?"),
        (hp.pronoun, "Can I sue my landlord for mold?", "Can my landlord sue me for mold?"),
        (hp.pronoun, "Does my dog really love me?", "Do I really love my dog?"),
        (hp.pronoun, "How do I convince my parents?", "How do my parents convince me?"),
        (hp.pronoun, "Why did my ex block me?", "Why did I block my ex?"),
        (hp.pronoun, "Am I annoying my parents?", "Are my parents annoying me?"),
        (hp.operator, "How do I solve 2x + 3 = 7?", None),
        (hp.operator, "Why does i++ differ from ++i in C?", None),
        (hp.intent, "How do I apply for a patent?", "How do I oppose a patent?"),
        (hp.preamble, "How do I boil an egg?", None),
        (hp.abbreviation, "How do I learn Kubernetes networking?", None),
        (hp.abbreviation, "Best pizza in New York City?", "Best pizza in NYC?"),
        (hp.symmetric, "What is the difference between TCP and UDP?",
         "What is the difference between UDP and TCP?"),
        (hp.symmetric, "Django vs Flask for a REST API?", "Flask vs Django for a REST API?"),
        (hp.symmetric, "Which is better, Goa or Kerala?", "Which is better, Kerala or Goa?"),
    ],
)  # fmt: skip
def test_the_new_kinds_rewrite_as_they_say(
    rule: hp.Rule, question: str, expected: str | None
) -> None:
    out = rule(question, rng())
    assert out is not None and out != question, question
    if expected is not None:
        assert out == expected


def test_an_operator_change_changes_only_the_formula() -> None:
    out = hp.operator("How do I solve 2x + 3 = 7?", rng())
    assert out in {"How do I solve 2x - 3 = 7?", "How do I solve 2x + 3 < 7?"}
    assert hp.operator("Why does i++ differ from ++i in C?", rng()) in {
        "Why does i-- differ from ++i in C?", "Why does i++ differ from --i in C?"
    }  # fmt: skip
    # Prose, a range, a choice and a language name are no formulas.
    prose = ("How do I send an e-mail?", "Is a 7-speed DSG good?", "I wake up at 2-3 am, why?",
             "Should I buy an i5/i7?", "Is C++ hard?")  # fmt: skip
    for text in prose:
        assert hp.operator(text, rng()) is None, text


def test_no_symmetric_swap_where_the_order_is_a_sequence_or_a_comparison() -> None:
    assert hp.symmetric("How do I cook and eat rice?", rng()) is None
    assert hp.symmetric("Why is lead more common than gold or silver?", rng()) is None
    # Two names joined symmetrically are no role swap either.
    assert hp.role("What is the difference between Java and Python?", rng()) is None


def test_a_typo_and_a_preamble_keep_every_other_word() -> None:
    question = "How many countries are part of West Africa?"
    for seed in range(10):
        out = hp.typo(question, random.Random(seed))
        assert out is not None and out != question
        changed = [(a, b) for a, b in zip(question.split(), out.split(), strict=True) if a != b]
        assert len(changed) == 1 and abs(len(changed[0][0]) - len(changed[0][1])) <= 1
    out = hp.preamble("How do I boil an egg?", rng())
    assert out is not None and out.endswith(", how do I boil an egg?")


def test_the_corpus_offers_siblings_scopes_and_names() -> None:
    texts = [
        "Which is better, Python or Ruby?", "Python vs Ruby for scripting?",
        "What is the difference between TCP and UDP?", "Is TCP vs UDP faster?",
        "How do I find a job in India?", "What is the best food in India?",
        "Where do I study in India?", "Is it cold in India?", "Can I vote in India?",
        "Why is Python slow?", "Is Python easy?", "Can Python run on a phone?",
        "Is Python good?", "Who made Python?",
    ]  # fmt: skip
    corpus = Corpus.of(texts)
    assert corpus.siblings["python"] == ["Ruby"] and corpus.siblings["udp"] == ["TCP"]
    assert corpus.scopes == ["in india"] and "Python" in corpus.names
    assert sibling("How do I install Python on Linux?", rng(), corpus) == (
        "How do I install Ruby on Linux?"
    )
    # A version is a sibling too: "iPhone 6" / "iPhone 5" or "7".
    assert sibling("Where can I unlock an iPhone 6?", rng(), Corpus()) in {
        "Where can I unlock an iPhone 5?", "Where can I unlock an iPhone 7?"
    }  # fmt: skip
    assert (
        scope("How do I learn to swim?", rng(), corpus.scopes) == "How do I learn to swim in india?"
    )
    assert scope("How do I find a job in India?", rng(), corpus.scopes) is None  # has one


@pytest.mark.parametrize(
    ("question", "passive"),
    [
        ("How do bees make honey?", {"How is honey made by bees?"}),
        ("Can my landlord raise my rent?", {"Can my rent be raised by my landlord?"}),
        ("Why did Napoleon invade Russia?", {"Why was Russia invaded by Napoleon?"}),
        ("How do plants absorb water in winter?", {"How is water absorbed by plants in winter?"}),
        ("What do pandas eat?", {"What is eaten by pandas?"}),
        ("Who wrote Hamlet?", {"By whom was Hamlet written?", "Who was Hamlet written by?",
                               "Hamlet was written by whom?"}),
        ("who discovered penicillin", set()),  # no question mark: left alone
        ("who discovered penicillin?", {"by whom was penicillin discovered?",
                                        "who was penicillin discovered by?",
                                        "penicillin was discovered by whom?"}),
        ("Who owns the Beatles songs?", {"By whom are the Beatles songs owned?",
                                         "Who are the Beatles songs owned by?",
                                         "The Beatles songs are owned by whom?"}),
    ],
)  # fmt: skip
def test_the_passive_keeps_the_question_and_its_agent(question: str, passive: set[str]) -> None:
    for seed in range(6):
        out = hp.voice(question, random.Random(seed))
        assert (out in passive) if passive else out is None, (question, out)


@pytest.mark.parametrize(
    "question",
    [
        "How do I learn Python?",  # a pronoun's passive ("by me") nobody asks
        "How does a nuclear power station work?",  # "power" is a noun here
        "What makes a computer slow?",  # a complement, not an object
        "Why do girls have to make eye contact?",
        "Why do some people say vaccines cause autism?",  # a clause inside the subject
        "What causes inflation and how can it be stopped?",  # two questions
        "Will Donald Trump make Russia great again?",
    ],
)
def test_no_passive_where_the_words_do_not_read_as_subject_verb_object(question: str) -> None:
    assert hp.voice(question, rng()) is None


def test_an_aside_keeps_the_question() -> None:
    question = "Can I eat sushi?"
    seen = set()
    for seed in range(30):
        out = hp.preamble(question, random.Random(seed))
        assert out is not None
        assert out.endswith(" can I eat sushi?") or out.startswith("Can I eat sushi? "), out
        seen.add("before" if out.endswith("sushi?") else "after")
    assert seen == {"before", "after"}
    # A question that starts with "I" or a name is not lowered after an opener.
    assert hp.preamble("I want to learn Python, where do I start?", rng()) is None
    assert hp.preamble("NASA or ESA: who landed first?", rng()) is None


def test_the_askers_circumstance_is_said_first_as_a_premise() -> None:
    premise = hp.POSITIVE_RULES["premise"]
    expected = "I freeze bread, how long does it keep?"
    assert premise("If I freeze bread, how long does it keep?", rng()) == expected
    assert premise("How long does it keep if I freeze bread?", rng()) == expected
    # Not a circumstance of someone else's, "know if" (whether), or a statement.
    assert premise("How long does it keep if the bread is frozen?", rng()) is None
    assert premise("How do I know if I like her?", rng()) is None
    assert premise("How can I find out if my phone is hacked?", rng()) is None
    assert premise("I eat sushi if I am pregnant.", rng()) is None


def test_no_pronoun_swap_where_my_thing_is_not_someone() -> None:
    assert hp.pronoun("How can I improve my general awareness?", rng()) is None
    assert hp.pronoun("How do I hide my friend list on Facebook?", rng()) is None
    assert hp.pronoun("What should I do if my dog bites me?", rng()) is None


def test_a_new_rule_leaves_the_other_rules_pairs_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [
        "Can the sender recall a wire?", "How do I sort a list in Python?",
        "Is Java faster than Python?", "Can I sue my landlord?", "Is tea good?",
    ] * 2  # fmt: skip
    before = hp.generate(texts, per_kind=2)

    def draws(text: str, g: random.Random) -> str:  # a new rule that draws from its stream
        return f"{text} {g.random()}"

    monkeypatch.setattr(hp, "NEGATIVE_RULES", {"new": draws, **hp.NEGATIVE_RULES})
    after = hp.generate(texts, per_kind=2)
    assert [p for p in after if p[3] != "new"] == before
    assert any(p[3] == "new" for p in after)


def test_the_new_kinds_are_generated() -> None:
    texts = ["How do bees make honey?", "Can I drink coffee?", "Who wrote Hamlet?"] * 2
    kinds = {(k, label) for *_, label, k in hp.generate(texts, per_kind=1)}
    assert {("voice", 1), ("preamble", 1)} <= kinds
