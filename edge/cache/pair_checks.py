"""Cheap text checks on a (cached, asked) question pair: pure, no models.

Two kinds. ``lexical_features`` are symmetric inputs to the verifier's MLP (question word,
negation, numbers, names, content-word overlap): a bi-encoder is known to miss them, and the
MLP learns from QQP how much each matters. ``told_apart_by`` is a directional veto applied after
the MLP, for what QQP's symmetric labels taught it to ignore: a new question that names
something the cached one does not, asks more questions than it, asks for the opposite, or
negates it.
A cached answer may cover more than is asked, never something else or less
(``bench.cache_audit``: blind readers call such answers wrong, QQP calls most of the first
two kinds duplicates).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import numpy as np

from edge.cache.contrast_negation import framed, negation_moved, negations
from shared.lexicon import (
    AXES,
    LIST_AXES,
    NEGATIONS,
    QUESTION_WORDS,
    STOPWORDS,
    axis_pairs,
    axis_sides,
    cased_words,
    plain_words,
    stem,
)

LEXICAL = (
    "cosine",
    "exact",
    "qword_differs",
    "negation_differs",
    "numbers_differ",
    "names_differ",
    "content_jaccard",
    "content_only_a",
    "content_only_b",
    "length_ratio",
)

_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
# The verifier's features read words as it was trained to (``VERIFIER_RECIPE``), not as
# the checks below do. Read with ``shared.lexicon.plain_words`` ("don't" as "do not"), a
# rebuilt full verifier lost 0.054 of the dev set's paraphrase recall, 0.024 of the
# hold-out's and 0.022 of the blind set's: a contraction spelled out then looks like the
# swapped word order its hard negatives taught it to refuse (docs/cache.md, stop 48).
_TOKEN = re.compile(r"[A-Za-z0-9']+")


def _names(tokens: list[str]) -> set[str]:
    # Capitalised words after the first: a cheap stand-in for named entities.
    return {t.lower() for t in tokens[1:] if t[:1].isupper() and t != "I"}


def lexical_features(a: str, b: str, cosine: float) -> np.ndarray:
    """Pure, cheap checks a bi-encoder is known to miss (unscaled)."""
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    la, lb = [t.lower() for t in ta], [t.lower() for t in tb]
    qa = next((t for t in la if t in QUESTION_WORDS), "")
    qb = next((t for t in lb if t in QUESTION_WORDS), "")
    neg_a = sum(t in NEGATIONS or t.endswith("n't") for t in la)
    neg_b = sum(t in NEGATIONS or t.endswith("n't") for t in lb)
    ca = {t for t in la if t not in STOPWORDS}
    cb = {t for t in lb if t not in STOPWORDS}
    union = ca | cb
    return np.array(
        [
            cosine,
            1.0 if la == lb else 0.0,
            1.0 if qa != qb else 0.0,
            1.0 if (neg_a % 2) != (neg_b % 2) else 0.0,
            1.0 if set(_NUMBER.findall(a)) != set(_NUMBER.findall(b)) else 0.0,
            1.0 if _names(ta) != _names(tb) else 0.0,
            len(ca & cb) / len(union) if union else 1.0,
            len(ca - cb) / max(1, len(ca)),
            len(cb - ca) / max(1, len(cb)),
            min(len(la), len(lb)) / max(1, len(la), len(lb)),
        ],
        dtype=np.float32,
    )


_FUNCTION_WORDS = STOPWORDS | QUESTION_WORDS | NEGATIONS


def _names_in(text: str) -> set[str]:
    """Stems of capitalised words that do not start a sentence (a stand-in for names)."""
    names = set()
    for start, word in cased_words(text):
        before = text[:start].rstrip()
        if not before or before[-1] in '.?!:;"(' or not word[0].isupper() or word == "I":
            continue
        if (base := stem(word)) not in _FUNCTION_WORDS:
            names.add(base)
    return names


SMALL_WORDS = frozenset("of the and for on in to a an".split())


def spelled_out(acronym: str, words: Sequence[str]) -> set[int]:
    """Positions of the run of ``words`` (lower case) whose initials spell ``acronym`` (lower
    case), small words counted or skipped: "nyc" in "new york city", "roi" in "return on
    investment", "dui" in "driving under the influence". Empty when none does."""
    n = len(acronym)
    for i in range(len(words)):
        for j in range(i + n, min(len(words), i + 2 * n) + 1):
            run = words[i:j]
            if run[0] in SMALL_WORDS or run[-1] in SMALL_WORDS:
                continue
            for kept in (run, [w for w in run if w not in SMALL_WORDS]):
                if "".join(w[0] for w in kept) == acronym:
                    return set(range(i, j))
    return set()


_CAMEL_PART = re.compile(r"[A-Z][a-z]+")


def word_parts(text: str) -> list[tuple[int, int, str]]:
    """The words of ``text`` in lower case, each with the span of the word it is of, a
    capitalised compound split where its capitals are ("JavaScript": java, script;
    "iPhone", "IQs" and "MemSQL" are one)."""
    out: list[tuple[int, int, str]] = []
    for start, w in cased_words(text):
        split = _CAMEL_PART.findall(w) if w[0].isupper() and not w.isupper() else []
        for part in split if len(split) > 1 and "".join(split) == w else [w]:
            out.append((start, start + len(w), part.lower()))
    return out


def _parts(text: str) -> tuple[list[str], list[str]]:
    """``word_parts``' parts, and the word (in lower case) each part is of."""
    spans = word_parts(text)
    return [p for _, _, p in spans], [text[a:b].lower() for a, b, _ in spans]


def _acronyms(text: str) -> set[str]:
    return {w.lower() for _, w in cased_words(text) if 2 <= len(w) <= 6 and w.isupper()}


@functools.lru_cache(maxsize=512)  # the contrast check and the verifier both ask, per pair
def new_names(cached: str, asked: str) -> frozenset[str]:
    """Names the asked question has and the cached one does not mention in any form.

    QQP labels templated questions that differ only in the place or thing ("... proposed
    by the NRA in Florida?" / "... in Kentucky?") as duplicates, so a verifier trained on it
    learns to serve them; blind readers call such answers wrong (``bench.cache_audit``).
    Directional on purpose: a cached answer may cover less than the new question asks,
    never something else. A name counts as mentioned when a word of the cached question
    shares its stem, or a prefix of at least four letters ("Pakistani" after "Pakistan"),
    or when one side spells out the other's acronym ("NYC" / "New York City", "LA" / "los
    angeles", "JS" / "JavaScript": ``spelled_out``).
    """
    have = {stem(w) for _, w in cased_words(cached)}
    parts, owner = _parts(asked)
    spelled = {stem(owner[i]) for a in _acronyms(cached) for i in spelled_out(a, parts)}
    cached_parts, _ = _parts(cached)
    short = {a for a in _acronyms(asked) if spelled_out(a, cached_parts)}
    return frozenset(
        n
        for n in _names_in(asked)
        if n not in spelled
        and n not in short
        and not any(
            n == h or (min(len(n), len(h)) >= 4 and (n.startswith(h) or h.startswith(n)))
            for h in have
        )
    )


_FOLLOW_UP = frozenset(
    "why how if so yes no not then and or when what where which who is it that".split()
)
_JOINED = re.compile(
    r",\s*and\s+(?:how|what|why|when|where|which|who)\b(?:\W+[A-Za-z0-9']+){2,}", re.IGNORECASE
)


def questions(text: str) -> list[str]:
    """The questions a text asks: its sentences ending in "?", and wh-clauses joined to one.

    "How close are we to World War Three, and how bad would it be?" asks two. Bare
    follow-ups ("Why?", "If so, how?") and parentheses ("(See details)?") ask nothing new;
    statements ("I forgot my password.") ask nothing.
    """
    found = []
    segments = re.split(r"[?\uff1f]+", re.sub(r"\([^)]*\)", " ", text))
    for segment in segments[:-1]:  # each of these ended in a question mark
        sentence = re.split(r"[.!:;](?:\s|$)", segment)[-1].strip()
        words = plain_words(sentence)
        if not words or (len(words) <= 4 and all(w in _FOLLOW_UP for w in words)):
            continue
        found.append(sentence)
        found.extend(m.group() for m in _JOINED.finditer(sentence))
    return found


def extra_questions(cached: str, asked: str) -> int:
    """How many more questions the asked text asks than the cached one (0 if not more).

    "What is GST bill? What are its advantages and disadvantages?" after "What are the
    advantages and disadvantages of GST bill?": the cached answer covers one of the two.
    A text with no question mark asks one question.
    """
    return max(0, max(1, len(questions(asked))) - max(1, len(questions(cached))))


# Two sides of one axis ("positive effects" / "negative effects" embed at cosine 0.97), from
# ``shared.lexicon``: only the axes where the asked question wants the other side's list or
# figure (``LIST_AXES``). Yes/no attributes ("Is coffee good?" / "Is coffee bad?", "safe" /
# "unsafe") are opposites too, since "Yes" answers one and not the other:
# ``contrast.opposed_words`` vetoes those before any score, so they are not read here.
_AXES = tuple(axis_sides(a) for a in AXES if axis_pairs(a)[0][0] in LIST_AXES)


def opposite_words(cached: str, asked: str) -> set[str]:
    """Words of the asked question on a side of an axis the cached one does not cover.

    "What are the negative effects of caffeine?" after "... the positive effects ...";
    "Advantages and drawbacks of democracy?" after "What is the drawback of democracy?"
    (it asks for both sides, the cached answer gives one). Only where the cached question
    takes a side: "Pros and cons of Go?" answers "What are the cons of Go?".
    """
    have, want = set(plain_words(cached)), set(plain_words(asked))
    found: set[str] = set()
    for side_a, side_b in _AXES:
        if (have & side_a or have & side_b) and not have & side_a:
            found |= want & side_a
        if (have & side_a or have & side_b) and not have & side_b:
            found |= want & side_b
    return found


_HEADNEGATIONS = frozenset(("not", "no", "never", "cannot"))
_OR_NOT = re.compile(r"\bor not\b", re.IGNORECASE)


def negated_head(text: str) -> bool:
    """A question negated at its head: a sentence opening with a question word or an
    auxiliary that has "not", "no", "never" or "n't" within its first five words.

    "Is coffee not bad for you?", "Why shouldn't I vote for him?", "Why is the sky not
    blue?". A terse answer to the plain question ("No.") is wrong for the negated one, and
    the two embed at cosine 0.97. Negations further in ("... that I can't control?",
    "... without dieting?") and "or not" are left to the MLP: blind readers call most
    such pairs the same question.
    """
    for sentence in re.split(r"[?.!;]", _OR_NOT.sub(" ", text)):
        words = plain_words(sentence)
        if words and words[0] in QUESTION_WORDS:
            if any(w in _HEADNEGATIONS for w in words[:5]):
                return True
    return False


def told_apart_by(cached: str, asked: str) -> str | None:
    """Why the cached answer cannot answer the asked question, or None.

    "names": the asked question names something new; "questions": it asks more questions;
    "opposite": it asks for the opposite; "negation": one of the two is negated at its head,
    and the two are negated unequally or the negation moved to another clause: "why won't my
    loss go down" / "why will my loss not go down" negate the same verb (the head's window is
    five words), as the contrast check reads them.
    """
    names = new_names(cached, asked)
    # "I'm", "I've" read as names: an aside before the question about the asker ("Hey,
    # I've always wondered: can you freeze cheese?") names nothing. Elsewhere they mostly
    # add what the cached question lacks ("... if I'm flying internationally").
    if names and not (framed(cached, asked) and all(n.startswith("i'") for n in names)):
        return "names"
    if extra_questions(cached, asked):
        return "questions"
    if opposite_words(cached, asked):
        return "opposite"
    if negated_head(cached) != negated_head(asked) and (
        negations(cached) != negations(asked) or negation_moved(cached, asked)
    ):
        return "negation"
    return None


def told_apart(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """Per (cached, asked) pair: ``told_apart_by`` found a reason; the verifier scores it 0."""
    return np.array([told_apart_by(a, b) is not None for a, b in pairs], dtype=bool)
