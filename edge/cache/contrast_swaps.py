"""Contrast by argument order: the same things related the other way round (pure).

"convert A to B" / "convert B to A", "is A faster than B" / "is B faster than A", "transfer
my games to a new drive" / "... from a new drive", "can I sue my landlord" / "can my
landlord sue me". Part of ``contrast.contrast_by``; the same roles read through the form of
the question (the passive, asking for the doer) are ``contrast_roles``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from edge.cache.contrast_arguments import (
    ORDERING_WORDS,
    argument_words,
    content_word,
    either_way,
    owners,
)
from edge.cache.contrast_trades import traded, traded_before_tail
from shared.lexicon import PUNCTUATION, UNIT_OF, contrast_words, stem


def _relations(words: Sequence[str]) -> set[tuple[str, str, str]]:
    """(left argument, relation, right argument) for content words near a relation word."""
    found = set()
    for p, w in enumerate(words):
        if w not in ORDERING_WORDS or either_way(words, p):
            continue
        left: list[str] = []
        for x in reversed(words[max(0, p - 3) : p]):
            if x in PUNCTUATION:
                break
            left.append(x)
        right: list[str] = []
        for x in words[p + 1 : p + 4]:
            if x in PUNCTUATION:
                break
            right.append(x)
        rel = "to" if w in ("into", "onto", "towards") else w
        found |= {
            (a, rel, b)
            for a in left
            if content_word(a)
            for b in right
            if content_word(b) and a != b
        }
    return found


_TOWARDS = frozenset(("to", "into", "onto", "towards"))
_FROM = frozenset(("from", "out"))


def _headed(words: Sequence[str], prepositions: frozenset[str]) -> set[str]:
    """The first content word after each of these prepositions ("to a new drive": drive)."""
    found = set()
    for p, w in enumerate(words):
        if w in prepositions:
            for x in words[p + 1 : p + 4]:
                if x in PUNCTUATION:
                    break
                if content_word(x):
                    found.add(x)
                    break
    return found


def _sides_of(words: Sequence[str], relation: str) -> list[tuple[set[str], set[str]]]:
    """For each ``relation`` word of a text: the content words only before it, and only
    after it, within its clause."""
    sides = []
    for at in (i for i, w in enumerate(words) if w == relation and not _inert(words, i)):
        start = end = at
        while start > 0 and words[start - 1] not in PUNCTUATION:
            start -= 1
        while end + 1 < len(words) and words[end + 1] not in PUNCTUATION:
            end += 1
        left = {w for w in words[start:at] if content_word(w)}
        right = {w for w in words[at + 1 : end + 1] if content_word(w)}
        sides.append((left - right, right - left))
    return sides


# Before a passive infinitive ("to be fixed"), these keep who does what: "does the
# landlord have to fix the heater" / "does the heater have to be fixed by the landlord"
# (blind6, 8, 14, 17), "what causes SQL Server to invalidate a plan" / "what causes a plan
# to be invalidated by SQL Server" (blind20). "can a doctor refuse to treat a patient" /
# "can a patient refuse to be treated by a doctor" (blind4, 9) is another question.
_OBLIGED = frozenset("have has had need needs needed ought".split())
_CAUSES = frozenset("cause causes caused causing".split())
_CAUSE_REACH = 5  # words back from the "to" to the "causes"


def _inert(words: Sequence[str], p: int) -> bool:
    """Whether the relation word at ``p`` orders nothing: after a predicate that takes its
    sides either way (``either_way``), or "to" opening a passive infinitive after an
    obligation or a cause (``_OBLIGED``, ``_CAUSES``)."""
    if either_way(words, p):
        return True
    if words[p] != "to" or "be" not in words[p + 1 : p + 2] or p == 0:
        return False
    before = words[max(0, p - _CAUSE_REACH) : p]
    return words[p - 1] in _OBLIGED or (
        not set(before) & PUNCTUATION and bool(set(before[:-1]) & _CAUSES)
    )


def swapped(cached: str, asked: str) -> str | None:
    """The kind ("direction" or "order") when the two questions relate the same two things the other
    way round: "convert A to B" / "convert B to A", "is A faster than B" / "is B faster
    than A", "can a cat outrun a dog" / "... a dog outrun a cat". Arguments of a symmetric
    word ("A or B", "A and B", "A vs B", "A compared to B") may come in any order.
    """
    wa, wb = contrast_words(cached), contrast_words(asked)
    ra, rb = _relations(wa), _relations(wb)
    for x, rel, y in ra:
        if (y, rel, x) in rb and (x, rel, y) not in rb and (y, rel, x) not in ra:
            return ORDERING_WORDS.get(rel, "direction")
    # "transfer my games to a new drive" / "... from a new drive": the same place, the other way.
    ta, fa, tb, fb = (
        _headed(wa, _TOWARDS),
        _headed(wa, _FROM),
        _headed(wb, _TOWARDS),
        _headed(wb, _FROM),
    )
    if (ta - tb) & (fb - fa) or (tb - ta) & (fa - fb):
        return "direction"
    # Longer arguments: "forward my local port to port 80 on the remote machine" / "forward
    # port 80 on the remote machine to my local port": words cross "to" both ways.
    sides_a, sides_b = _sides_of(wa, "to"), _sides_of(wb, "to")
    if len(sides_a) == len(sides_b):
        for (left_a, right_a), (left_b, right_b) in zip(sides_a, sides_b, strict=True):
            if left_a & right_b and right_a & left_b:
                return "direction"
    # The same words, two phrases trading places across something that is not symmetric:
    # "can a Tesla charge a Nissan Leaf" / "can a Nissan Leaf charge a Tesla", "can I sue my
    # landlord" / "can my landlord sue me".
    aa, ab = argument_words(cached), argument_words(asked)
    if traded(aa, ab):
        return "order"
    # The same, read through plurals (a unit's too: "how many feet in a meter" / "how many
    # meters in a foot") and possessives: "can cats eat dog food" / "can dogs eat cat food";
    # "my roommate's boyfriend" / "my boyfriend's roommate" (owner and owned trade places,
    # with nothing between them).
    sa, sb = [_singular(w) for w in aa], [_singular(w) for w in ab]
    if traded(sa, sb) or _owner_traded(_possessives(cached), _possessives(asked)):
        return "order"
    # Subject and predicate of a quantified claim, the other way round: "are all mammals
    # animals" / "are all animals mammals", "is every square a rectangle" / "... every
    # rectangle a square". Only after a quantifier: elsewhere two neighbours trade places in
    # true rewordings ("earn money fast online" / "... online fast").
    if _quantified_traded(aa, ab):
        return "order"
    # Whose it is, traded with who does it: "someone's dog bit me" / "my dog bit someone",
    # "cover me driving my friend's car" / "cover my friend driving my car"; also with a
    # word derived from the other's ("Congress override a presidential veto" / "the
    # president override a congressional veto").
    # Each view only where it reads the words otherwise (the same words were tried above).
    oa, ob = owners(wa), owners(wb)
    if (oa, ob) != (list(aa), list(ab)) and traded(oa, ob):
        return "order"
    # The same with the verb agreeing with its new subject: "if I damage my roommate's TV"
    # / "if my roommate damages my TV".
    so, sob = [stem(w) for w in oa], [stem(w) for w in ob]
    if (so, sob) != (oa, ob) and (so, sob) != (sa, sb) and traded(so, sob):
        return "order"
    if len(oa) == len(ob) and (rooted := _rooted(oa, ob)) != ob and traded(oa, rooted):
        return "order"
    # The doer and whose thing it is traded, each side going on in its own words: "can a
    # pharmacist override a doctor's prescription dosage" / "can a doctor override a
    # pharmacist's dosage change".
    if traded_before_tail(aa, ab) or traded_before_tail(oa, ob):
        return "order"
    return None


def _singular(word: str) -> str:
    return UNIT_OF.get(word) or stem(word)


_QUANTIFIERS = frozenset("all every each any some most no".split())


def _neighbours_differ(a: Sequence[str], b: Sequence[str]) -> int | None:
    """``i`` where ``a`` and ``b`` differ in words ``i`` and ``i + 1`` only, else None."""
    if len(a) != len(b):
        return None
    differ = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    return differ[0] if len(differ) == 2 and differ[1] == differ[0] + 1 else None


def _quantified_traded(a: Sequence[str], b: Sequence[str]) -> bool:
    i = _neighbours_differ(a, b)
    return (
        i is not None
        and i > 0
        and a[i - 1] in _QUANTIFIERS
        and a[i] == b[i + 1]
        and a[i + 1] == b[i]
        and content_word(a[i])
        and content_word(a[i + 1])
    )


def _possessives(text: str) -> list[str]:
    """Lower-case words, a possessive "'s" kept (``contrast_words`` drops it)."""
    return re.findall(r"[a-z0-9]+(?:'s)?", text.lower().replace("\u2019", "'"))


def _owner_traded(a: Sequence[str], b: Sequence[str]) -> bool:
    """``b`` is ``a`` with "X's Y" written "Y's X", nothing else changed."""
    if (i := _neighbours_differ(a, b)) is None:
        return False
    owner_a, owned_a, owner_b, owned_b = a[i], a[i + 1], b[i], b[i + 1]
    return (
        owner_a.endswith("'s")
        and owner_b.endswith("'s")
        and owner_a.removesuffix("'s") == owned_b
        and owner_b.removesuffix("'s") == owned_a
    )


# Endings that make a word of another word's root: "presidential" / "president",
# "congressional" / "congress", "senator" / "senate".
_DERIVED = ("", "e", "al", "ial", "ional", "or", "ian", "ic", "ical")
_ROOT = 5  # letters two derived words share at least


def _derived(x: str, y: str) -> bool:
    if x[:_ROOT] != y[:_ROOT]:
        return False
    n = 0
    while n < min(len(x), len(y)) and x[n] == y[n]:
        n += 1
    return n >= _ROOT and x[n:] in _DERIVED and y[n:] in _DERIVED


def _rooted(a: Sequence[str], b: Sequence[str]) -> list[str]:
    """``b`` with each word only it has written as a word only ``a`` has, if derived alike."""
    only_a = [w for w in a if w not in b]
    return [w if w in a else next((x for x in only_a if _derived(x, w)), w) for w in b]
