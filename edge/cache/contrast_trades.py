"""Two phrases trading places around a middle, and what that middle means (pure).

"can a Tesla charge a Nissan Leaf" / "can a Nissan Leaf charge a Tesla" trade across
"charge" (who does what: ``traded``); "lions and tigers" / "tigers and lions" trade across
"and", which keeps the meaning (``coordinated_swap``). ``trades`` finds every such
reading; the verdicts are ``contrast_swaps``' and ``contrast_roles``'.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from edge.cache.contrast_arguments import (
    ADJUNCT_HEADS,
    PRONOUNS,
    SYMMETRIC,
    argument_words,
    content_word,
    either_way,
)
from shared.lexicon import PUNCTUATION, QUESTION_WORDS


def _argument(phrase: Sequence[str]) -> bool:
    return (
        phrase[0] not in ADJUNCT_HEADS
        and any(content_word(w) or w in PRONOUNS for w in phrase)
        and not set(phrase) & PUNCTUATION
    )


def traded(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether ``b`` is ``a`` with two phrases, of any lengths, trading places across a
    middle that is not symmetric ("A and B", "A vs B", "A compared with B"): "the vice
    president overrule the president" / "the president overrule the vice president". A
    symmetric word deep in a longer middle joins something else: "as a customer, how do I
    deal with a rude cashier" / "as a cashier, ... a rude customer" is who does what."""
    return any(
        _argument(one)
        and _argument(two)
        and (not set(mid) & PUNCTUATION or _across_clauses(mid))
        and not (len(mid) <= _SHORT_MIDDLE and (_symmetric(mid) or _either_way_at(a, at, mid)))
        for one, mid, two, at in trades(a, b)
    )


def _across_clauses(middle: Sequence[str]) -> bool:
    """A middle that ends one clause and asks in the next: "I can read bass clef, how do I
    learn treble clef" / "... treble clef, ... bass clef". A list ("A, B") is no trade."""
    return len(middle) >= 4 and any(w in QUESTION_WORDS for w in middle)


_PHRASE = 3  # words a traded phrase, or the verb between two, may have


def traded_before_tail(a: Sequence[str], b: Sequence[str]) -> bool:
    """After the same start, ``a`` goes on "ONE VERB TWO ..." and ``b`` "TWO VERB ONE ...",
    whatever follows: two phrases of at most three words trade places (``trades`` over the
    two heads) across the same verb, which holds a content word and is not symmetric
    ("and", "vs", "with")."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    # Each side's next word must come a little later in the other (most pairs stop here).
    reach = p + 2 * _PHRASE + 1
    if p >= min(len(a), len(b)) or a[p] not in b[p + 1 : reach] or b[p] not in a[p + 1 : reach]:
        return False
    return any(
        len(one) <= _PHRASE
        and len(two) <= _PHRASE
        and _argument(one)
        and _argument(two)
        and not set(mid) & PUNCTUATION
        and not _symmetric(mid)
        and any(content_word(w) for w in mid)
        for end in range(p + 3, p + 3 * _PHRASE + 1)
        for one, mid, two, _ in trades(a[:end], b[:end])
    )


_SHORT_MIDDLE = 3  # words: "with", "compared with", "is compatible with"


def _either_way_at(a: Sequence[str], at: int, mid: Sequence[str]) -> bool:
    """Whether a word of ``mid``, which starts at ``at`` in ``a``, relates the two sides of
    a predicate that takes them in either order ("how far is A from B")."""
    return any(either_way(a, at + i) for i in range(len(mid)))


def _with_each_other(middle: Sequence[str]) -> bool:
    return "with" in middle and bool(set(middle) & _WITH_EACH_OTHER)


def _symmetric(middle: Sequence[str]) -> bool:
    if "with" in middle and (len(middle) == 1 or _with_each_other(middle)):
        return True  # a longer "with" alone is who does what: "A interferes with B"
    words = set(middle) - {"with"}
    return bool(words & SYMMETRIC or any(either_way(middle, i) for i in range(len(middle))))


# What "with" leaves symmetric: "A compared with B", "is A compatible with B", "A's
# relationship with B", "A talks with B".
_WITH_EACH_OTHER = frozenset(
    "compared compare compatible combined combine mixed mix paired matched match along "
    "together same equal identical interchangeable versus relationship "
    "relationships relations ties talk talks talking meet meets meeting argue argues "
    "arguing fight fights fighting agree agrees disagree disagrees interact interacts "
    "communicate communicates chat chats".split()
)


# Joining two sides whose order is free: "A or B", "A and B", "between A and B", "A vs B".
# Not "with" ("replace A with B") nor "between" alone.
_COORDINATORS = frozenset(("and", "or", "vs", "&"))


def coordinated_swap(cached: str, asked: str) -> bool:
    """Whether ``asked`` is ``cached`` with the two sides of one "and" / "or" / "vs" in the
    other order and nothing else changed but determiners: "is a crocodile or an alligator
    more dangerous" / "is an alligator or a crocodile ...", "how do lions and tigers
    differ" / "how do tigers and lions differ" (a closing mark may come or go); or the two
    sides of a predicate that takes them in either order (``either_way``: "how far is Paris
    from London" / "... London from Paris"), or of a "with" that ``_symmetric`` keeps
    symmetric ("is retinol compatible with azelaic acid" / "is azelaic acid compatible with
    retinol"). The decision's models then read the asked question as the cached one
    (``match.Matcher``).
    A side is whatever swaps: "a talent manager and an agent" / "a talent agent and a
    manager" reads as "manager" and "agent" swapped (QQP calls them the same question)."""
    a, b = unstopped(list(argument_words(cached))), unstopped(list(argument_words(asked)))
    return any(
        _argument(one)
        and _argument(two)
        and (
            (len(mid) == 1 and mid[0] in _COORDINATORS)
            or (len(mid) <= _SHORT_MIDDLE and (_either_way_at(a, at, mid) or _with_each_other(mid)))
        )
        for one, mid, two, at in trades(a, b)
    )


def unstopped(words: list[str]) -> list[str]:
    while words and words[-1] in PUNCTUATION:  # "...?" / "..."
        words.pop()
    return words


def trades(
    a: Sequence[str], b: Sequence[str], longest: int = 32
) -> Iterator[tuple[Sequence[str], Sequence[str], Sequence[str], int]]:
    """Each way ``b`` is ``a`` with two phrases ``one`` and ``two`` trading places around
    ``mid`` (``one mid two`` / ``two mid one``), the rest the same, and where ``mid`` starts
    in ``a``. Texts over ``longest`` words are not tried (the search is quartic in the words
    at worst)."""
    if len(a) != len(b) or a == b or len(a) > longest or sorted(a) != sorted(b):
        return
    differ = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    for start in range(differ[0], -1, -1):  # the phrases may share words with what is around
        for end in range(differ[-1] + 1, len(a) + 1):
            sa, sb, n = a[start:end], b[start:end], end - start
            for y in (y for y in range(1, n - 1) if sb[:y] == sa[n - y :]):
                for x in (x for x in range(1, n - y) if sb[n - x :] == sa[:x]):
                    if sb[y : n - x] == sa[x : n - y]:
                        yield sa[:x], sa[x : n - y], sa[n - y :], start + x
