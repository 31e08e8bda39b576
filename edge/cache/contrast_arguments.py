"""Who or what a question names: its argument words, read once per text (pure).

The order checks (``contrast_swaps``, ``contrast_trades``, ``contrast_roles``) all start
from ``argument_words``: the contrast tokens with determiners dropped and object pronouns
read as subjects, so "sue me" and "I sue" name the same two parties.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from shared.lexicon import (
    NEGATIONS,
    PUNCTUATION,
    QUESTION_WORDS,
    STOPWORDS,
    contrast_words,
    stem,
)

_DETERMINERS = frozenset(
    "a an the my your our their his her its this that these those some".split()
)
# Words that relate two arguments in order: "A to B", "A than B", "A causes B".
ORDERING_WORDS = {
    **dict.fromkeys(("to", "into", "onto", "towards", "from", "per"), "direction"),
    **dict.fromkeys(("than", "over", "cause", "causes", "caused", "causing", "affect",
                     "affects", "outrun", "outruns", "beat", "beats"), "order"),
}  # fmt: skip
# Between two swapped arguments, these keep the meaning ("A or B?", "A and B").
SYMMETRIC = frozenset(("and", "or", "vs", "with", "between", "&", "nor"))
# Predicates that take their two arguments in either order: "A different from B", "tell A
# from B", "how far is A from B", "what separates A from B", "is A the same as B". A
# "from", "to" or "as" after one of them, in its clause, orders nothing.
_EITHER_WAY = frozenset(
    "different differ differs distinguish distinguishes tell apart distinct far distance "
    "separate separates same".split()
)
_EITHER_WAY_REACH = 5  # words back from the "from" / "to" / "as" to its predicate
_EITHER_WAY_STEMS = frozenset(stem(w) for w in _EITHER_WAY)  # as the views read them
_CONTENT_STOP = (
    STOPWORDS | QUESTION_WORDS | NEGATIONS | _DETERMINERS | frozenset(ORDERING_WORDS) | SYMMETRIC
)


def content_word(word: str) -> bool:
    return word not in _CONTENT_STOP and word not in PUNCTUATION


def either_way(words: Sequence[str], p: int) -> bool:
    """Whether the "from", "to" or "as" at ``p`` follows, in its clause, a predicate whose
    arguments come in either order (``_EITHER_WAY``)."""
    if words[p] not in ("from", "to", "as"):
        return False
    for w in reversed(words[max(0, p - _EITHER_WAY_REACH) : p]):
        if w in PUNCTUATION:
            return False
        if stem(w) in _EITHER_WAY_STEMS:
            return True
    return False


# Who does what to whom, whatever the case: "I sue" / "sue me".
_OBJECT_PRONOUNS = {"me": "i", "him": "he", "her": "she", "us": "we", "them": "they"}
PRONOUNS = frozenset(_OBJECT_PRONOUNS.values()) | {"you"}
# An owner read as the one who owns: "my dog bit someone" / "someone's dog bit me" trade
# "i" and "someone" across "dog bit" ("'s" is already gone from ``contrast_words``).
_OWNERS = {"my": "i", "our": "we", "your": "you", "his": "he", "their": "they"}
# A phrase led by one of these is a circumstance, which may move without changing the
# question: "education during the occupation like in Singapore" / "education in Singapore
# like during the occupation".
ADJUNCT_HEADS = frozenset(
    "in on at during for after before while since until by from of with without about "
    "under over near within across through".split()
)


def arguments(words: Sequence[str]) -> list[str]:
    """The words that say who or what: determiners dropped ("a lower court" / "the lower
    court"), object pronouns read as subjects ("me" / "I")."""
    folded = (_OBJECT_PRONOUNS.get(w, w) for w in words)
    return [w for w in folded if w not in _DETERMINERS]


# A capital letter alone names something ("class A", "B's members", "S corp"), where
# lower-cased "A" would read as the article and be dropped; "A" opening a sentence is the
# article, and "I" the asker.
_LETTER_NAME = re.compile(r"(?<![\w'])([B-HJ-Z])\b|(?<=[^\s.?!] )(A)\b")


@functools.lru_cache(maxsize=4096)
def argument_words(text: str) -> tuple[str, ...]:
    """``arguments`` of a question's ``contrast_words``, read once per text: the order
    checks all start from them."""
    return tuple(arguments(contrast_words(_LETTER_NAME.sub(lambda m: m.group() + "_", text))))


def owners(words: Sequence[str]) -> list[str]:
    """``arguments`` with each possessive read as its owner ("my friend": "i friend")."""
    return arguments([_OWNERS.get(w, w) for w in words])
