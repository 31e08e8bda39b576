"""The question inside a message (``edge.cache.preamble.question_of``): pure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge.cache.preamble import question_of


@pytest.mark.parametrize(
    ("message", "question"),
    [
        ("hi! quick question: can you freeze milk?", "can you freeze milk?"),
        (
            "my son asked me at dinner and I had no clue \u2014 what year did the titanic sink?",
            "what year did the titanic sink?",
        ),
        # context after the question, and a sign-off
        ("how do I boil an egg? I'm at 9000 ft btw", "how do I boil an egg?"),
        ("what is the capital of France? thanks!", "what is the capital of France?"),
        # no question mark: the last sentence that opens as a question
        (
            "feeling under the weather with a cold today. is it safe to exercise or nah",
            "is it safe to exercise or nah",
        ),
        # one sentence: the clause after its last comma, when only that clause asks
        (
            "baking with the kids and the cup broke, how many tablespoons are in a cup",
            "how many tablespoons are in a cup",
        ),
        (
            "my lease is up next month, any tips for negotiating rent? thank you",
            "any tips for negotiating rent?",
        ),
        # "U.S." ends no sentence
        ("what is the U.S. capital? thanks", "what is the U.S. capital?"),
    ],
)
def test_the_question_is_found_inside_the_message(message: str, question: str) -> None:
    assert question_of(message) == question


@pytest.mark.parametrize(
    "message",
    [
        "can I take ibuprofen",  # nothing around it
        "What is X?",
        "What is 2.5 + 3?",
        "how do I merge two lists? and how do I sort them?",  # two questions: not ours to pick
        "I need help. Thanks!",  # no question at all
        "so tired today. why?",  # too short to look up
        "is it faster, or is it cheaper",  # both sides of the comma ask
    ],
)
def test_no_question_is_made_up(message: str) -> None:
    assert question_of(message) is None


# A story of words of two letters or more (after one letter, a full stop may be "U.S.").
_WORDS = st.lists(st.text(alphabet="abcdefghij", min_size=2, max_size=8), min_size=1, max_size=8)


@given(
    story=_WORDS, question=st.sampled_from(["how do I reset my router?", "why is the sky blue?"])
)
def test_a_story_before_one_question_is_cut_off(story: list[str], question: str) -> None:
    assert question_of(f"{' '.join(story)}. {question}") == question
    assert question_of(question) is None  # the question alone: nothing to cut
