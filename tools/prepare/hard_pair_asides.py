"""What people say around a question: the ``preamble`` and ``clause`` rules of
``hard_pairs`` (pure).

An opener or an aside asks nothing ("Hi, quick question: ...", "my kid asked me this and I
blanked: ..."), so the question is the same (label 1). A constraint said the same way does
change it ("I'm pregnant: can I eat sushi?"); such negatives, drawn where the constraint's
words met the question's, were tried at stop 53 and dropped: most were noise ("I'm on a
tight budget: what is the best way to learn a language?" asks what the question asks), and
next to them the models refused more true rewordings of every kind (docs/cache.md). Added
conditions stay the trailing ``condition`` rule's and the corpus's ``scope``.

A circumstance may come before or after the question, or be said first as a premise ("If
I freeze bread, how long does it keep?" / "How long does bread keep if I freeze it?" / "I
froze bread, how long does it keep?"): ``clause`` moves it (label 1).
"""

from __future__ import annotations

import random
import re

from tools.prepare.hard_pair_words import (
    AFTERTHOUGHTS,
    ASIDE_JOINS,
    ASIDE_SLOTS,
    ASIDES,
    PREAMBLES,
)


def _lowered(text: str) -> str | None:
    """The question with its first letter lowered, to follow an opener; None where that
    would lower a name or "I"."""
    if not text[:1].isupper() or text[:2] == "I " or text[1:2].isupper():
        return None
    return text[0].lower() + text[1:]


def _aside(rng: random.Random) -> str:
    return rng.choice(ASIDES).format_map({k: rng.choice(v) for k, v in ASIDE_SLOTS.items()})


def preamble(text: str, rng: random.Random) -> str | None:
    """An opener that asks nothing ("Hi, quick question: ..."), or an aside on why one asks,
    before the question, or an afterthought after it."""
    lowered = _lowered(text)
    if lowered is None:
        return None
    form = rng.randrange(5)
    if form < 2:
        return rng.choice(PREAMBLES) + lowered
    if form < 4:
        aside = _aside(rng)
        return aside + (" " if aside.endswith("but") else rng.choice(ASIDE_JOINS)) + lowered
    return text.rstrip() + " " + rng.choice(AFTERTHOUGHTS)


_QUESTION = r"(?:how|what|why|where|which|who|is|are|can|could|should|do|does|did|will|would)\b"
_SUBORDINATOR = r"(if|when|while|since|because|after|before)"
_LEADING_CLAUSE = re.compile(
    rf"^{_SUBORDINATOR} ([^?,.;:]{{6,}}), ({_QUESTION}[^?,.;:]*)\?$", re.IGNORECASE
)
_TRAILING_CLAUSE = re.compile(
    rf"^((?i:{_QUESTION})[^?,.;:]{{6,}}?) {_SUBORDINATOR} ([^?,.;:]{{6,}})\?$"
)
# "know if", "tell if": whether, not a condition.
_WHETHER = frozenset("know tell check see wonder ask sure determine decide test find".split())
# A premise says the circumstance as a statement of the asker's own case.
_PREMISE_SUBJECTS = frozenset("i my we our".split())


def clause(text: str, rng: random.Random) -> str | None:
    """The circumstance moved to the other side of the question, or said first as a premise
    ("Can I eat sushi if I'm pregnant?" / "I'm pregnant, can I eat sushi?")."""
    text = text.strip()
    if m := _LEADING_CLAUSE.match(text):
        sub, circumstance, question = m.groups()
        return f"{question[0].upper()}{question[1:]} {sub.lower()} {circumstance}?"
    m = _TRAILING_CLAUSE.match(text)
    if m is None or m.group(1).split()[-1].lower() in _WHETHER:
        return None
    question, sub, circumstance = m.groups()
    asked = question[0].lower() + question[1:] if question[:2] != "I " else question
    premise = sub == "if" and circumstance.split()[0].lower() in _PREMISE_SUBJECTS
    if premise and rng.random() < 0.5:
        return f"{circumstance[0].upper()}{circumstance[1:]}, {asked}?"
    return f"{sub.capitalize()} {circumstance}, {asked}?"
