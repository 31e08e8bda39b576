"""What people say around a question: the ``preamble`` and ``premise`` rules of
``hard_pairs`` (pure).

An opener or an aside asks nothing ("Hi, quick question: ...", "my kid asked me this and I
blanked: ..."), so the question is the same (label 1). A constraint said the same way does
change it ("I'm pregnant: can I eat sushi?"); such negatives, drawn where the constraint's
words met the question's, were tried at stop 53 and dropped: most were noise ("I'm on a
tight budget: what is the best way to learn a language?" asks what the question asks), and
next to them the models refused more true rewordings of every kind (docs/cache.md). Added
conditions stay the trailing ``condition`` rule's and the corpus's ``scope``.

The asker's circumstance may be said first as a premise instead of as a condition ("Will my
insurance go up if I got a ticket?" / "I got a ticket, will my insurance go up?"):
``premise`` says it so (label 1).
"""

from __future__ import annotations

import random
import re

from shared.lexicon import WHETHER
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
_ASKER = r"(?:I|my|we|our)\b"  # a premise is the asker's own case
_LEADING_IF = re.compile(rf"^If ({_ASKER}[^?,.;:]{{4,}}), ({_QUESTION}[^?,.;:]*)\?$", re.IGNORECASE)
_TRAILING_IF = re.compile(rf"^((?i:{_QUESTION})[^?,.;:]{{6,}}?) if ({_ASKER}[^?,.;:]{{4,}})\?$")


def premise(text: str, rng: random.Random) -> str | None:
    """The asker's circumstance said first, as a premise, not as a condition: "Can I eat
    sushi if I'm pregnant?" / "I'm pregnant, can I eat sushi?". Only that: a circumstance
    merely moved ("If I'm pregnant, can I eat sushi?") is the rewording step's, and as
    generated pairs such moves taught the models that phrases may trade places (stop 58:
    role swaps served)."""
    text = text.strip()
    if m := _LEADING_IF.match(text):
        circumstance, question = m.groups()
    elif (m := _TRAILING_IF.match(text)) and m[1].split()[-1].lower() not in WHETHER:
        question, circumstance = m.groups()
    else:
        return None
    asked = question[0].lower() + question[1:] if question[:2] != "I " else question
    case = circumstance[0].upper() + circumstance[1:]
    return f"{case}, {asked}?"
