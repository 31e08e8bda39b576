"""Active and passive voice: the ``voice`` rule of ``hard_pairs`` (pure).

"Who invented the telephone?" and "By whom was the telephone invented?" ask one thing, and
so do "How do plants absorb water?" and "How is water absorbed by plants?". The embedder
puts such pairs at cosine 0.93-0.97, where a model trained on one-word opposites refuses
them: this rule teaches that a change of voice keeps the question (label 1).

A negative twin, the passive with agent and patient swapped ("Can a rat kill a lizard?" /
"Can a rat be killed by a lizard?"), was tried at stop 53 and dropped: next to it the
models refused more true passives than before, not fewer (docs/cache.md).

Only a verb of ``VERBS`` is turned (transitive, with its participle: ``shared.lexicon``),
and only where subject and object read as noun phrases: no pronoun ("How do I learn
Python?" has no passive anyone asks), no clause inside.
"""

from __future__ import annotations

import random
import re

from shared.lexicon import third_person, verb_forms

VERBS = verb_forms()
_PAST = {past: base for base, (past, _) in VERBS.items()}
_THIRD = {third_person(base): base for base in VERBS}
_PRONOUNS = frozenset("i you we they he she it me us them people one someone somebody".split())
_PLURAL_LEAD = frozenset("these those many some both".split())
_SINGULAR_S = frozenset("news physics series species gas bus its this is was has does us".split())
# Where the object ends: a preposition or conjunction starts what follows it.
_TAIL = frozenset(
    "in on at for with without during after before using when if from into over under "
    "through while to".split()
)
_DETERMINERS = frozenset("a an the my your his her its our their this these those".split())
# Words no noun phrase here holds: a verb, an adverb, a clause's start ("girls have to",
# "citizens think about", "India perform poorly").
_NOT_NOUN = frozenset(
    "have has had be is are was were been not no so too very really always never also just "
    "about like want need feel think get go going who that which what whom whose there here "
    "than then as and or but ever still even only up out off down away back say says know "
    "believe try let seem tend keep start begin continue help love hate prefer more most "
    "less least better worse faster slower again alone together anything something "
    "everything nothing anyone everyone".split()
)
_WH = frozenset(("how", "why", "when", "where"))
_SECOND = frozenset("and or but how why what when where which who".split())
_DO = frozenset(("do", "does", "did"))
_MODALS = frozenset("can could should will would may must".split())
_PLAIN = re.compile(r"^[\w'+#. -]+\?$")  # one question, no commas or colons


def _plural(words: list[str]) -> bool:
    first, last = words[0].lower(), words[-1].lower()
    if first in _PLURAL_LEAD:
        return True
    return last.endswith("s") and not last.endswith(("ss", "us", "is")) and last not in _SINGULAR_S


def _be(words: list[str], past: bool) -> str:
    """The auxiliary of a passive, numbered by its subject."""
    if past:
        return "were" if _plural(words) else "was"
    return "are" if _plural(words) else "is"


def _noun_phrase(words: list[str]) -> bool:
    """One to five words that read as a noun phrase: no pronoun, a determiner only first,
    and no verb of ``VERBS``, preposition, adverb or clause word inside."""
    low = [w.lower() for w in words]
    if not 0 < len(low) <= 5 or low[0] in _PRONOUNS or low[-1] in _DETERMINERS:
        return False
    return not any(
        w in VERBS or w in _TAIL or w in _NOT_NOUN or (w.endswith("ly") and w == words[i])
        or (i == 0 and w.endswith("ing"))
        or (i and w in _DETERMINERS)
        for i, w in enumerate(low)
    )  # fmt: skip


def _object_and_tail(words: list[str]) -> tuple[list[str], str] | None:
    """The object, up to a preposition, and what follows it (" in Python", or ""); None
    where a second question follows ("... and how can it be lowered?")."""
    if any(w.lower() in _SECOND for w in words):
        return None
    for i, w in enumerate(words):
        if w.lower() in _TAIL and i:
            return words[:i], " " + " ".join(words[i:])
    return words, ""


def _words(text: str) -> list[str] | None:
    text = text.strip()
    if not _PLAIN.match(text):
        return None
    return text[:-1].split()


def _who(text: str, rng: random.Random) -> str | None:
    """Who did it, asked in the passive: "Who wrote Hamlet?" -> "By whom was Hamlet
    written?" (or two other phrasings)."""
    words = _words(text)
    if not words or len(words) < 3 or words[0].lower() not in ("who", "what"):
        return None
    verb = words[1].lower()
    if verb in ("make", "makes", "made"):  # "What makes a computer slow?": a complement
        return None
    if verb in _PAST:
        base, past = _PAST[verb], True
    elif verb in _THIRD:
        base, past = _THIRD[verb], False
    else:
        return None
    split = _object_and_tail(words[2:])
    if split is None or not _noun_phrase(split[0]):
        return None
    obj, tail = split
    o, part, be = " ".join(obj), VERBS[base][1], _be(obj, past)
    agent = "whom" if words[0].lower() == "who" else "what"
    out = rng.choice((
        f"By {agent} {be} {o} {part}{tail}?",
        f"{words[0].capitalize()} {be} {o} {part} by{tail}?",
        f"{o[0].upper()}{o[1:]} {be} {part} by {agent}{tail}?",
    ))  # fmt: skip
    return out.lower() if text.islower() else out


def _passive(text: str) -> str | None:
    """The question's clause in the passive: "How do plants absorb water?" -> "How is water
    absorbed by plants?"."""
    words = _words(text)
    if not words or len(words) < 4:
        return None
    lead = [w.lower() for w in words[:2]]
    if lead[0] in _WH and lead[1] in _DO:
        head, rest = words[:2], words[2:]
    elif lead[0] in _MODALS:
        head, rest = words[:1], words[1:]
    elif lead[0] == "what" and lead[1] in _DO:
        head, rest = words[:2], words[2:]
    else:
        return None
    at = next((i for i, w in enumerate(rest) if w.lower() in VERBS), None)
    if at is None or not _noun_phrase(rest[:at]):
        return None
    subj, part = rest[:at], VERBS[rest[at].lower()][1]
    if lead[0] == "what":  # "What do pandas eat?": the object is the question word
        if rest[at + 1 :] and rest[at + 1].lower() not in _TAIL:
            return None
        tail = " " + " ".join(rest[at + 1 :]) if rest[at + 1 :] else ""
        be = "was" if lead[1] == "did" else "is"
        return f"{head[0]} {be} {part} by {' '.join(subj)}{tail}?"
    split = _object_and_tail(rest[at + 1 :])
    if split is None or not _noun_phrase(split[0]):
        return None
    obj, tail = split
    if [w.lower() for w in obj] == [w.lower() for w in subj]:
        return None
    if rest[at].lower() == "make" and len(obj) > 2:  # "make Russia great again": a complement
        return None
    a, p = " ".join(subj), " ".join(obj)
    if lead[0] in _MODALS:
        return f"{head[0]} {p} be {part} by {a}{tail}?"
    return f"{head[0]} {_be(obj, lead[1] == 'did')} {p} {part} by {a}{tail}?"


def voice(text: str, rng: random.Random) -> str | None:
    """The same question in the passive voice, its agent kept ("Who wrote Hamlet?" / "By
    whom was Hamlet written?", "How do bees make honey?" / "How is honey made by bees?")."""
    return _who(text, rng) or _passive(text)
