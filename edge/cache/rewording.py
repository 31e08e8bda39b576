"""Is the asked question the cached one reworded, word for word in meaning? (pure)

Some repeats are plainly the same question in other words: contractions ("What's" /
"What is"), filler ("please", "a", "the"), a plural, a common synonym ("fix" / "repair"), or a
qualifier moved ("In Python, how do I ...?" / "How do I ... in Python?"). The MLP verifier,
trained on QQP whose near-identical pairs are often labelled different, scores many of these
under its threshold (the contrast sets' reorder and synonym paraphrases), so they are decided
here, by construction rather than by a model.

Two questions are rewordings when their canonical words (``canonical``) are the same
sequence, or the same up to one moved block that starts with a preposition or a
subordinator or a manner adverb ("in Python", "when traveling to Japan", "to lower my
cholesterol", "quickly"): after the common start and end are
cut off, one middle is a rotation of the other. Prepositions, comparatives and every word
that carries meaning stay, so "convert A to B" / "B to A", "is A faster than B" / "B faster
than A" and "boat house" / "house boat" are never rewordings; the matcher runs the contrast
check before this in any case.

Served with no model, so only what provably keeps the question: case, whitespace, sentence
punctuation, contractions, filler, plurals, the short synonym table below and the ways a unit
is written (``shared.lexicon.UNITS``: "mg" / "milligrams", "lb" / "pounds"). Every other
mark (operators, signs, brackets, symbols), every number as written and every negation must
be the same on both sides (``_fixed``): "2x + 3 = 7" / "2x - 3 = 7" and "2.5" / "25" are
left to the verifier and the contrast checks.
"""

from __future__ import annotations

import itertools
import re

from shared.lexicon import (
    NEGATORS,
    PUNCTUATION,
    SYNONYMS,
    UNIT_OF,
    contrast_words,
    stem,
    written_out,
)

# Words whose presence or absence does not change the question asked.
_FILLER = frozenset("a an the please pls plz kindly just really actually is are am".split())
# Auxiliaries, dropped where they do not end a sentence ("What does Redis do?" keeps its
# last "do": it is the verb asked about).
_AUXILIARY = frozenset(("do", "does", "did"))
# "How can I", "how could you", "how do you": the generic "how do I" (who asks is the same).
_HOW_DO = frozenset(("do", "can", "could"))
_HOW_TO = _HOW_DO | {"to"}
_GENERIC = frozenset(("i", "you", "one", "we"))
# A block may move only when it is a qualifier: it starts with one of these (or an adverb).
_MOVABLE = frozenset(
    "in on at for from to with without by during when while if before after since until "
    "using via under over inside within once unless whenever".split()
)
# "C++" and "C#" are not "C" (the word pattern drops the signs).
_LANGUAGE_NAMES = re.compile(r"\b([A-Za-z])(\+\+|#)")
_SIGNS = {"++": "plusplus", "#": "sharp"}
_LONGEST = 60  # words; longer texts are left to the verifier


def canonical(text: str) -> list[str]:
    """The words that carry the question: contractions spelled out, filler dropped,
    plurals, units and listed synonyms folded."""
    text = _LANGUAGE_NAMES.sub(lambda m: m.group(1) + _SIGNS[m.group(2)], text)
    tokens = contrast_words(text)
    ends = {i - 1 for i, w in enumerate(tokens) if w in PUNCTUATION} | {len(tokens) - 1}
    kept = [(w, i in ends) for i, w in enumerate(tokens) if w not in PUNCTUATION]
    words = [w for w, _ in kept]
    # A plural folds to its singular unless the text has both ("http" and "https").
    present = set(words)
    out = []
    for i, (w, last) in enumerate(kept):
        generic = i >= 2 and words[i - 2] == "how" and words[i - 1] in _HOW_DO
        # "how to" asks what "how do I" does.
        if w in _FILLER or (w in _HOW_TO and i >= 1 and words[i - 1] == "how"):
            continue
        if w in _AUXILIARY and not last:
            continue
        if generic and w in _GENERIC:
            continue
        w = UNIT_OF.get(w) or SYNONYMS.get(w, w)
        base = stem(w)
        if base != w and base not in present:
            w = SYNONYMS.get(base, base)
        out.append(w)
    return out


def _movable(word: str) -> bool:
    """A block starting here qualifies the question: a preposition, a subordinator, or a
    manner adverb ("quickly and cheaply, how can I ...")."""
    return word in _MOVABLE or (len(word) > 4 and word.endswith("ly"))


def _moved_block(a: list[str], b: list[str]) -> bool:
    """``b`` is ``a`` with one qualifier block moved (rotation of the differing middle)."""
    start = 0
    while start < len(a) and a[start] == b[start]:
        start += 1
    end = 0
    while end < len(a) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    middle_a, middle_b = a[start : len(a) - end], b[start : len(b) - end]
    n = len(middle_a)
    for cut in range(1, n):
        head, tail = middle_a[:cut], middle_a[cut:]
        if tail + head == middle_b and (_movable(head[0]) or _movable(tail[0])):
            return True
    return False


def _unread(text: str) -> list[str]:
    """Letters the word pattern does not read (other scripts, quoted symbols): these must
    match exactly, since ``canonical`` cannot see them."""
    return sorted(c for c in text if ord(c) > 127 and c.isalnum())


# Sentence punctuation and quotes (contractions, a quoted word) may differ; no other mark
# may. A "!" right after a number, a bracket or a one-letter variable is a factorial ("5!",
# "5!!", "(n-1)!", "n!"), not punctuation. A quote against a digit makes a number a string
# ("1 + 2 + \"3\"" is not "\"1\" + 2 + 3" in Java), so it stays a mark.
_PROSE_MARKS = re.compile(
    r"""(\b[A-Za-z]|[\d)\]])?([.,!?;:]+)(?=\s|$)|(?<!\d)['"\u2018\u2019\u201c\u201d](?!\d)"""
)


def _prose(match: re.Match[str]) -> str:
    after, run = match.group(1), match.group(2)
    if not run:  # a quote
        return " "
    factorial = len(run) - len(run.lstrip("!")) if after else 0
    return (after or "") + "!" * factorial + " "


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_MARKED = re.compile(r"\w+|[^\w\s]")
_NOT = re.compile(r"n['\u2019]t\b|(?<=can)not\b")


def _fixed(text: str) -> tuple[list[tuple[str, ...]], list[str], int]:
    """What a rewording may not change, and the words do not show: the marks in order
    (operators, signs, brackets, symbols), each with the words either side of it and how it
    is spaced, the numbers as written, and the negations. "'a%'" is not "'%a'": there "a" is
    the pattern, not an article. A mark spaced on both sides or on neither is one style
    ("1=-1" is "1 = -1"), but one between two words and spaced on one side only is another
    mark: ".card.active" is not ".card .active" (a CSS class, or a descendant). Shorthand
    is written out first ("w/" is a word, not a slash)."""
    text = written_out(text)
    marked = _PROSE_MARKS.sub(_prose, text).lower()
    marks = [(*around, spacing) for around, spacing in mark_spacings(marked)]
    words = re.findall(r"[a-z]+", _NOT.sub(" not", text.lower()))
    return marks, _NUMBER.findall(text), sum(w in NEGATORS for w in words)


def mark_spacings(text: str) -> list[tuple[tuple[str, ...], str]]:
    """Each mark of ``text`` (operator, sign, bracket, symbol, punctuation), with the tokens
    either side of it and how it is spaced between two words (``_spacing``)."""
    found = list(_MARKED.finditer(text))
    tokens = [m.group() for m in found]
    return [
        (tuple(tokens[max(0, i - 1) : i + 2]), _spacing(text, found, i))
        for i, m in enumerate(found)
        if not _is_word(m.group())
    ]


def _is_word(token: str) -> bool:
    return token[0].isalnum() or token[0] == "_"


def _spacing(text: str, found: list[re.Match[str]], n: int) -> str:
    """Between two words, the side a mark is glued to when it is glued to one only ("card
    .active"); else "" (glued to both, to neither, or next to another mark)."""
    if not (0 < n < len(found) - 1 and _is_word(found[n - 1].group())):
        return ""
    if not _is_word(found[n + 1].group()):
        return ""
    i, j = found[n].span()
    left, right = not text[i - 1].isspace(), not text[j].isspace()
    return "" if left == right else ("left" if left else "right")


_LETTERS = re.compile(r"[A-Za-z]+")


def joined_alike(cached: str, asked: str) -> tuple[str, str]:
    """Both texts with a compound that one writes apart or hyphenated ("non profit",
    "non-profit") written as one word where the other has it so ("nonprofit"): a spacing,
    not a prefix that negates (blind21)."""
    return _joined(cached, asked), _joined(asked, cached)


def _joined(text: str, other: str) -> str:
    words = {w.lower() for w in _LETTERS.findall(other)}
    found = list(_LETTERS.finditer(text))
    out, end = [], 0
    for left, right in itertools.pairwise(found):
        gap = text[left.end() : right.start()]
        if (
            left.start() >= end
            and gap in (" ", "-")
            and (left.group() + right.group()).lower() in words
            and left.group().lower() not in words
        ):
            out += [text[end : left.start()], left.group() + right.group()]
            end = right.end()
    return "".join(out) + text[end:] if out else text


def _negated(words: list[str]) -> list[tuple[str, str]]:
    """Each negation with the word it negates (the next one): a moved block may carry a
    negation along, but not slip under or out of one ("not in the EU but use the euro" /
    "in the EU but not use the euro")."""
    after = [*words[1:], ""]
    return sorted((w, after[i]) for i, w in enumerate(words) if w in NEGATORS)


def reworded(cached: str, asked: str) -> bool:
    """Whether ``asked`` is ``cached`` reworded without any change of meaning."""
    if _unread(cached) != _unread(asked) or _fixed(cached) != _fixed(asked):
        return False
    a, b = canonical(cached), canonical(asked)
    if not a or len(a) != len(b) or len(a) > _LONGEST or sorted(a) != sorted(b):
        return False
    return a == b or (_moved_block(a, b) and _negated(a) == _negated(b))
