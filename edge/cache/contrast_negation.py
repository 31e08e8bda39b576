"""Contrast by negation: one question negated more than the other, or a negation that
negates something else (pure). Part of ``contrast.contrast_by``."""

from __future__ import annotations

import re
from collections.abc import Sequence

from edge.cache.rewording import canonical
from shared.lexicon import (
    AUXILIARIES,
    NEGATORS,
    PUNCTUATION,
    QUESTION_WORDS,
    STOPWORDS,
    contrast_words,
    stem,
)

# Where a negation's reach ends: a clause begins ("... not in the EU | but use the euro").
CLAUSE_OPENERS = frozenset(
    "but and or if when while because although though since unless until that which who "
    "whom whose where why".split()
)
# A subject pronoun inside a text opens a clause too ("a package | I didn't order"), unless
# it follows a question word or a negation ("can I", "didn't I").
_SUBJECTS = frozenset("i you he she we they".split())


def negations(text: str) -> int:
    """How many negating words ("not", "n't", "never", "no", ...)."""
    return sum(w in NEGATORS for w in contrast_words(text))


# A tag after a statement asks what the plain question does ("it's fine to leave butter
# out, isn't it?" / "is it fine to leave butter out?"). A question opened by a negated
# auxiliary is left to the models: "should I refrigerate tomatoes?" / "shouldn't I ...?" is
# labelled different in the dev set.
_TAGGED = frozenset("i you we they he she it there".split())


def _untagged(words: Sequence[str]) -> list[str]:
    """The words without a tag at the end (", isn't it?")."""
    out = list(words)
    while out and out[-1] in PUNCTUATION:
        out.pop()
    if len(out) > 4 and out[-4] == "," and out[-3] in AUXILIARIES and out[-2] == "not":
        if out[-1] in _TAGGED:
            del out[-4:]
    return out


def asks_the_same(cached: str, asked: str) -> bool:
    """The two differ in negations only by a tag: "it's fine to ..., isn't it?" / "is it
    fine to ...?"."""
    a, b = _untagged(contrast_words(cached)), _untagged(contrast_words(asked))
    return sum(w in NEGATORS for w in a) == sum(w in NEGATORS for w in b)


# Where an aside before the question ends: a mark, a spaced dash, or "but".
_ASIDE_ENDS = re.compile(r"[.,;:?!]+\s+|\s[-\u2013\u2014]+\s+|\bbut\s+", re.IGNORECASE)


def framed(cached: str, asked: str) -> bool:
    """Is one question the other, reworded at most (``rewording.canonical``), after an
    aside set off before it ("my kid asked and I had no idea - why do cats purr" / "why do
    cats purr")? A negation in the aside belongs to it, not to the question both ask;
    whether the aside changes what is asked is for the condition check and the models.
    Words added after the question ("... without yeast") are no aside: they narrow it."""
    short, long = sorted((cached, asked), key=lambda t: len(contrast_words(t)))
    question = canonical(short)
    if not question or len(contrast_words(long)) == len(contrast_words(short)):
        return False
    return any(canonical(long[m.end() :]) == question for m in _ASIDE_ENDS.finditer(long))


def lemma(word: str) -> str:
    """A rough lemma: "orders", "ordered" and "ordering" are "order", "flushes" is
    "flush"."""
    if word.endswith(("shes", "ches", "xes", "sses", "zzes")):
        return word[:-2]
    w = stem(word)
    if len(w) > 4 and w.endswith("ed"):
        return w[:-2]
    return w[:-3] if len(w) > 5 and w.endswith("ing") else w


# Content words one side may have and the other not, where a negation moved.
_OTHER_WORDS = 2
_FUNCTION = STOPWORDS | NEGATORS | PUNCTUATION


def content_lemmas(words: Sequence[str], also: frozenset[str] = frozenset()) -> list[str]:
    """The lemmas of the content words, sorted: neither function words nor ``also``."""
    return sorted(lemma(w) for w in words if w not in _FUNCTION and w not in also)


def clause_numbers(words: Sequence[str]) -> list[int]:
    """Each word's clause, counted from 0: a clause begins at punctuation, a clause opener
    or a subject pronoun that opens one."""
    clause, out = 0, []
    for i, w in enumerate(words):
        opens = w in _SUBJECTS and i > 0 and words[i - 1] not in QUESTION_WORDS | NEGATORS
        clause += w in PUNCTUATION or w in CLAUSE_OPENERS or opens
        out.append(clause)
    return out


def _split(words: Sequence[str]) -> tuple[set[str], set[str]] | None:
    """The content words after the (one) negation, up to the end of its clause (its
    reach), and those of the other clauses; None when no word follows the negation there
    ("roll no. 1": no negation)."""
    at = next(i for i, w in enumerate(words) if w in NEGATORS)
    if at + 1 == len(words) or words[at + 1] in PUNCTUATION:
        return None
    clauses = clause_numbers(words)
    reach = [w for i, w in enumerate(words) if i > at and clauses[i] == clauses[at]]
    elsewhere = [w for i, w in enumerate(words) if clauses[i] != clauses[at]]
    return _negatable(reach), _negatable(elsewhere)


# "Get" is a function word elsewhere, but what a negation of it says is the point: "... says
# delivered but I didn't get it" / "... says not delivered but I already got it".
_GET = frozenset(("get", "got", "gotten"))


def _negatable(words: Sequence[str]) -> set[str]:
    return set(_folded(words)) | ({"get"} if _GET.intersection(words) else set())


def _folded(words: Sequence[str]) -> list[str]:
    """``content_lemmas`` with a final e after a consonant dropped, as "-ing" and "-ed" drop
    it: "charging" / "charge" ("iphone is charging but won't turn on" / "iphone turns on
    but won't charge")."""
    return [
        w[:-1] if len(w) > 3 and w.endswith("e") and w[-2] not in "aeiou" else w
        for w in content_lemmas(words)
    ]


def negation_moved(cached: str, asked: str) -> bool:
    """One negation each, and what one negates the other affirms, both ways, in nearly the
    same words: "a package I didn't order" / "didn't get a package I ordered", "my toilet
    flushes but doesn't refill" / "my toilet refills but doesn't flush properly". A negation
    that only moves within what it negates ("why isn't my oven heating" / "why is my oven
    not heating") or with it ("without a car, how do I ..." / "how do I ... without a car")
    is no contrast, nor is the same clause in the other voice ("X is not specified in the
    document" / "the document does not specify X")."""
    a, b = contrast_words(cached), contrast_words(asked)
    if sum(w in NEGATORS for w in a) != 1 or sum(w in NEGATORS for w in b) != 1:
        return False
    ca, cb = sorted(_folded(a)), sorted(_folded(b))
    if len(set(ca) ^ set(cb)) > _OTHER_WORDS:
        return False
    sa, sb = _split(a), _split(b)
    if sa is None or sb is None:
        return False
    (ra, other_a), (rb, other_b) = sa, sb
    if _onto_another_word(a, b):
        return True
    # One may negate only function words: "... but I didn't get it" / "... never says
    # delivered".
    if not ra | rb or ra & rb:
        return False
    # The same words: negating nothing in common is enough. Otherwise each negates a word
    # that the other affirms in another clause.
    return ca == cb or bool(ra & other_b and rb & other_a)


def _onto_another_word(a: Sequence[str], b: Sequence[str]) -> bool:
    """The same words, the one negation put before another content word: "is it ok to not
    tip" / "is it not ok to tip". Not after an auxiliary on either side, where a contraction
    stands for it ("why doesn't my printer connect" / "why does my printer not connect")."""
    i = next(k for k, w in enumerate(a) if w in NEGATORS)
    j = next(k for k, w in enumerate(b) if w in NEGATORS)
    if i == j or a[i] != b[j] or [*a[:i], *a[i + 1 :]] != [*b[:j], *b[j + 1 :]]:
        return False
    if (i and a[i - 1] in AUXILIARIES) or (j and b[j - 1] in AUXILIARIES):
        return False
    return _negated_word(a, i) != _negated_word(b, j)


def _negated_word(words: Sequence[str], at: int) -> str | None:
    return next((w for w in words[at + 1 :] if w not in _FUNCTION), None)
