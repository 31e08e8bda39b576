"""The cache's one word table (``shared.lexicon``): consistent with itself, and the same
words for the decision's checks and the hard-pair generator."""

from __future__ import annotations

import random

from edge.cache.contrast import opposed_words
from shared.lexicon import (
    AXES,
    LIST_AXES,
    SYNONYMS,
    axis_pairs,
    axis_sides,
    cased_words,
    comparisons,
    plain_words,
)
from tools.prepare import hard_pairs


def test_every_axis_has_two_sides_that_share_no_word() -> None:
    firsts = [axis_pairs(a)[0][0] for a in AXES]
    assert len(firsts) == len(set(firsts)), "an axis is named by its first word"
    assert LIST_AXES <= set(firsts)
    for axis in AXES:
        a, b = axis_sides(axis)
        assert a and b and not a & b, axis
        assert all("-" not in pair or pair.count("-") == 1 for pair in axis_pairs(axis))


def test_no_synonym_pair_straddles_an_axis() -> None:
    for word, same in SYNONYMS.items():
        for axis in AXES:
            a, b = axis_sides(axis)
            assert not ({word, same} & a and {word, same} & b), (word, same, axis)


def test_the_generator_and_the_contrast_check_read_the_same_opposites() -> None:
    # An opposite the generator writes is one the check vetoes, and the other way round.
    out = hard_pairs.polarity("How do I log in to Gmail?", random.Random(0))
    assert out == "How do I log out to Gmail?"
    assert opposed_words("How do I log in to Gmail?", out) is not None
    for axis in AXES:
        for a, b in axis_pairs(axis):
            if "-" not in (a, b) and "_" not in a + b:
                assert opposed_words(f"Is it {a}?", f"Is it {b}?") is not None, (a, b)


def test_words_are_read_one_way_with_or_without_their_case() -> None:
    text = "Why doesn\u2019t Java's GC pause, and can't Go's?"
    assert [w for _, w in cased_words(text)] == ["Why", "doesn\u2019t", "Java's", "GC", "pause",
                                                 "and", "can't", "Go's"]  # fmt: skip
    assert all(text[i:].startswith(w) for i, w in cased_words(text))
    assert plain_words(text) == ("why", "does", "not", "java", "gc", "pause", "and", "can",
                                 "not", "go")  # fmt: skip


def test_comparisons_in_words_read_as_their_signs() -> None:
    assert comparisons("is x greater than or equal to 7") == [">="]
    assert comparisons("at least 3 but less than 9, x > 1") == [">=", "<", ">"]
    assert comparisons("the greatest thing") == []
    # A shell's test, not a word's hyphen: "[ $a -le $b ]", "a well-lit e-ticket".
    assert comparisons("[ $a -le $b ] && [ $c -ne 0 ]") == ["<=", "!="]
    assert comparisons("a well-lit e-ticket for a log-level flag") == []
