"""Abbreviations read from their letters (``edge.cache.initialisms``)."""

from __future__ import annotations

import pytest

from edge.cache.initialisms import abbreviated_as
from edge.cache.rewording import reworded


@pytest.mark.parametrize(
    ("cached", "asked", "view"),
    [
        # Either side may be the short one; the view is written as the cached side writes it.
        ("what does the CPU do", "what does the central processing unit do",
         "what does the CPU do"),
        ("what does the central processing unit do", "what does the CPU do",
         "what does the central processing unit do"),
        # Small words counted or skipped, hyphens and a compound's capitals split words.
        ("how to fill out the Free Application for Federal Student Aid",
         "how to fill out the FAFSA",
         "how to fill out the Free Application for Federal Student Aid"),
        ("is an MBA worth it", "is a Master of Business Administration worth it",
         "is a MBA worth it"),
        ("what is PTSD", "what is post-traumatic stress disorder", "what is PTSD"),
        ("best DIY gifts for mom", "best do-it-yourself gifts for mom", "best DIY gifts for mom"),
        ("how to use closures in JS", "how to use closures in JavaScript",
         "how to use closures in JS"),
        # Lower case with no vowel; an apostrophe keeps its word.
        ("how do i renew my dl", "how do i renew my driver's license", "how do i renew my dl"),
        # Any lower-case word of 3-5 letters, where the other question spells it out.
        ("what does the fbi do", "what does the federal bureau of investigation do",
         "what does the fbi do"),
        ("how to reply as soon as possible", "how to reply asap",
         "how to reply as soon as possible"),
        # Numeronyms: first letter, letters left out, last letter.
        ("how do I deploy on k8s", "how do I deploy on kubernetes", "how do I deploy on k8s"),
        # A number after the letters follows the words they spell, in digits or as a word.
        ("when did WW2 end", "when did world war two end", "when did WW2 end"),
        ("when did world war 2 end", "when did WW2 end", "when did world war 2 end"),
        ("how to change DNS on a PS5", "how to change DNS on a PlayStation 5",
         "how to change DNS on a PS5"),
        # Two places traded: the view shows the trade, for the rewording step to refuse.
        ("flights from NYC to LA", "flights from Los Angeles to New York City",
         "flights from LA to NYC"),
    ],
)  # fmt: skip
def test_an_abbreviation_is_written_as_the_cached_question_writes_it(
    cached: str, asked: str, view: str
) -> None:
    assert abbreviated_as(cached, asked) == view


@pytest.mark.parametrize(
    ("cached", "asked"),
    [
        # Two lower-case letters are a word, not an initialism ("it", "us"); a longer word is
        # read only where the other question spells it.
        ("how to use it", "how to use information technology"),
        ("how do I cook rice", "how do I cook brown rice"),
        # The run may not use words the abbreviating question has itself.
        ("What is the best laptop for student?", "What is the best laptop for an IT student?"),
        ("What is the literacy rate in India?", "What is the IT literacy rate in India?"),
        # A numeronym's count must fit, and be at least 3 ("p2p" is no numeronym).
        ("how do I deploy on k9s", "how do I deploy on kubernetes"),
        ("what is p2p lending", "what is pop lending"),
        # Another number is another thing, and a number the words lack is not theirs.
        ("when did WW2 end", "when did world war 1 end"),
        ("when did WW2 end", "when did world war end"),
        ("is the PS5 worth it", "is the PlayStation 4 worth it"),
        # Nothing abbreviated.
        ("what is the GDP of Brazil", "what is the GDP of Chile"),
    ],
)
def test_no_view_without_an_abbreviation_spelled_out(cached: str, asked: str) -> None:
    assert abbreviated_as(cached, asked) is None


def test_the_view_is_still_checked_word_for_word() -> None:
    """The view only removes the abbreviation: every other word must still agree."""
    view = abbreviated_as("how to set up a VPN on my router", "how to set up a virtual private "
                          "network on my laptop")  # fmt: skip
    assert view == "how to set up a VPN on my laptop"
    assert not reworded("how to set up a VPN on my router", view)
    view = abbreviated_as("flights from NYC to LA", "flights from Los Angeles to New York City")
    assert view is not None and not reworded("flights from NYC to LA", view)
