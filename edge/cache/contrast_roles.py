"""Contrast by roles read through the question's form: who does what to whom (pure).

The asker against another person as the doer of one verb ("what if my coworker takes credit
for my work" / "what if I took credit for my coworker's work"), the active against the
passive ("can a hawk catch a rabbit" / "can a hawk be caught by a rabbit"), asking for the
doer against asking for what is done to ("what eats jellyfish" / "what do jellyfish eat"),
and a preposition left at the end against the same preposition given its object ("what is
fire weak against" / "what is weak against fire"). Part of
``contrast.contrast_by``; ``contrast_swaps`` reads the same things in one form, traded.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from edge.cache.contrast_arguments import ADJUNCT_HEADS, PRONOUNS, argument_words, content_word
from edge.cache.contrast_negation import CLAUSE_OPENERS, clause_numbers, content_lemmas, lemma
from edge.cache.contrast_swaps import swapped
from edge.cache.contrast_trades import unstopped
from shared.lexicon import (
    AUXILIARIES,
    PUNCTUATION,
    RELATIONS,
    ROLES,
    SAME_PARTICIPLE,
    STOPWORDS,
    contrast_words,
    regular_past,
    third_person,
    verb_forms,
)


def roles_traded(cached: str, asked: str) -> bool:
    """Whether the two questions trade who does and who is done to through the form of the
    question: voice, the asked-for role, or a preposition left at the end; or one asks about
    the other of two things both name (``other_named``)."""
    a, b = argument_words(cached), argument_words(asked)
    return (
        voice_traded(a, b)
        or asked_traded(a, b)
        or stranded(a, b)
        or stranded(b, a)
        or other_named(a, b)
    )


def other_named(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether ``b`` is ``a`` with one word put for another thing both questions name:
    "when a sailboat and a motorboat meet, does the sailboat give way" / "... does the
    motorboat give way". Each word is still there on the other side, so the words barely
    differ, but the question is now about the other one."""
    if len(a) != len(b):
        return False
    differ = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    if len(differ) != 1:
        return False
    x, y = a[differ[0]], b[differ[0]]
    return content_word(x) and content_word(y) and y in a and x in b


# Where a sentence's clauses part: a mark, or "and" / "but" between two of them.
_CLAUSES = re.compile(r"[,;:?!]+|\.(?=\s|$)|\s(?:and|but)\s", re.IGNORECASE)
_ASIDE = re.compile(r",[^,.;:?!]*,")


def traded_in_a_clause(cached: str, asked: str) -> str | None:
    """The kind, "order" or "direction", when the questions trade roles once their asides
    are set aside, or in one clause of several, clause by clause: "my sister owes me $2,000
    and won't pay it back, can I take her to small claims?" / "I owe my sister $2,000 and
    can't pay it back, can she take me to small claims?". Read whole, the other clauses'
    words ("won't" / "can't") hide the trade."""
    # An aside set off by commas is no part of who does what: "can my son, who is a US
    # citizen, sponsor me" / "can I, as a US citizen, sponsor my son".
    a, b = _ASIDE.sub(" ", cached), _ASIDE.sub(" ", asked)
    if (a, b) != (cached, asked):
        if (how := swapped(a, b)) is not None:
            return how
        if roles_traded(a, b):
            return "order"
    pa = [p for p in (p.strip() for p in _CLAUSES.split(cached)) if p]
    pb = [p for p in (p.strip() for p in _CLAUSES.split(asked)) if p]
    if len(pa) < 2 or len(pa) != len(pb):
        return None
    for x, y in zip(pa, pb, strict=True):
        if x.casefold() != y.casefold():
            if (how := swapped(x, y)) is not None:
                return how
            if roles_traded(x, y):
                return "order"
    return None


# A verb's forms, read back to it: the passive's participle, and the active's own forms.
_VERBS = verb_forms()
_PARTICIPLES = {part: verb for verb, (_, part) in _VERBS.items()}
_ACTIVE = {
    form: verb for verb, (past, _) in _VERBS.items() for form in (verb, past, third_person(verb))
}
_BE = frozenset("is are was were be been being".split())


def _phrase(words: Sequence[str], ends: frozenset[str] = ADJUNCT_HEADS) -> set[str]:
    """The content words of a phrase, up to a mark or a circumstance ("in", "during")."""
    out = set()
    for w in words:
        if w in PUNCTUATION or w in ends:
            break
        if content_word(w) or w in PRONOUNS:
            out.add(w)
    return out


def _passive(words: Sequence[str]) -> tuple[str, set[str], set[str]] | None:
    """(verb, patient, agent) of "... be VERBed by AGENT": "can a hawk be caught by a
    rabbit" -> ("catch", {"hawk"}, {"rabbit"})."""
    for i, w in enumerate(words[1:-2], 1):
        verb = _PARTICIPLES.get(w)
        if verb and words[i + 1] == "by" and _BE & set(words[:i]):
            patient = {x for x in words[:i] if content_word(x) and x not in _BE}
            return verb, patient, _phrase(words[i + 2 :])
    return None


def voice_traded(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether one question is active, the other passive, with agent and patient swapped:
    "can a hawk catch a rabbit" / "can a hawk be caught by a rabbit" (not "... can a rabbit
    be caught by a hawk", the same question)."""
    pa, pb = _passive(a), _passive(b)
    if pa is not None and pb is None:
        active, (verb, patient, agent) = b, pa
    elif pb is not None and pa is None:
        active, (verb, patient, agent) = a, pb
    else:  # both active, or both passive (``_traded``'s business)
        return False
    for i, w in enumerate(active):
        if _ACTIVE.get(w) != verb:
            continue
        subject = {x for x in active[:i] if content_word(x) or x in PRONOUNS}
        obj = _phrase(active[i + 1 :])
        if subject & patient and obj & agent and not subject & agent:
            return True
    return False


def voice_kept(cached: str, asked: str) -> bool:
    """Whether one question is the other in the other voice, doer and done-to kept, and
    nothing else changed: "can my employer read my work email" / "can my work email be
    read by my employer", "when did congress pass the civil rights act" / "when was the
    civil rights act passed by congress", "who invented the jet engine" / "by whom was the
    jet engine invented", "what do koalas eat" / "what is eaten by koalas". The decision's
    models then read the asked question as the cached one (``match.Matcher``), as for a
    coordinated swap: taught that who does what matters, they refuse many such rewordings.
    Any verb, not only the lexicon's: the participle is a word near "by", the active verb
    the one word the other question has in its place."""
    a, b = argument_words(cached), argument_words(asked)
    pa, pb = _by_passives(a), _by_passives(b)
    if bool(pa) == bool(pb):  # both in one voice: the order checks' business
        return False
    return _kept(b, a, pa) if pa else _kept(a, b, pb)


def _kept(
    active: Sequence[str], passive: Sequence[str], readings: list[tuple[int, set[str], set[str]]]
) -> bool:
    """Whether one of the passive's ``readings`` is ``active`` with its roles kept."""
    for at, patient, agent in readings:
        rest = content_lemmas([w for k, w in enumerate(passive) if k != at])
        for i, w in enumerate(active):
            if not _participle_of(w, passive[at]):
                continue
            if content_lemmas([x for k, x in enumerate(active) if k != i]) != rest:
                continue
            subject, obj = _roles(active, i)
            # The doer before the verb and after "by", the done-to after the verb and before
            # it. A word on both sides is neither only as an adverb (just before the verb in
            # both, or in "-ly") or in the words both questions open with ("how long until",
            # "actually"); else it is a role that moved ("can a doctor refuse to treat" /
            # "can a patient refuse to be treated").
            adverb = {active[i - 1]} & {passive[at - 1]} if i else set()
            both = (subject & patient) - adverb
            moved = _moved(both, active, passive) | both & (agent | obj)
            if subject & agent and obj & patient and not moved:
                return True
    return False


# Words an adjunct may hold between the participle and its "by" ("encrypted at rest by").
_BY_REACH = 4


def _moved(words: set[str], a: Sequence[str], b: Sequence[str]) -> set[str]:
    """Of ``words``, those neither an adverb nor in the opening ``a`` and ``b`` share."""
    opening = set()
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        opening.add(x)
    return {w for w in words if not w.endswith("ly") and w not in opening}


def _by_passives(words: Sequence[str]) -> list[tuple[int, set[str], set[str]]]:
    """(a participle's place, patient, agent) for each reading of "... be ... PARTICIPLE
    [adjunct] by AGENT", any verb ("when was the act passed by congress", "are my messages
    encrypted at rest by google"): the participle is one of the words after the "be" and up
    to a few before the "by"; ``_kept`` tells which."""
    out = []
    for j, w in enumerate(words):
        if w != "by":
            continue
        whom = j + 1 < len(words) and words[j + 1] in _WHO_DOES
        if j == 0 and whom:  # asked first: "by whom are airlines regulated in the us"
            out.extend(_asked_first(words))
            continue
        be = [k for k in range(j - 1) if words[k] in _BE]
        if j < 2 or not be:
            continue
        agent = {"who"} if whom else _phrase(words[j + 1 :])
        if not agent and words[0] in _WHO_DOES and _ends(words, j):
            agent = {"who"}  # left at the end: "who was the jet engine invented by"
        # The done-to asked for: "what is eaten by cats", "who was killed by caesar".
        wh = {_asked(words[0])} if words[0] in _WHO and agent != {"who"} else set()
        for i in range(max(be[0] + 1, j - 1 - _BY_REACH), j):
            patient = {x for x in words[:i] if content_word(x) and x not in _BE}
            out.append((i, patient | wh, agent))
    return out


def _asked_first(words: Sequence[str]) -> list[tuple[int, set[str], set[str]]]:
    """The readings of "by whom BE PATIENT PARTICIPLE ...": the participle a few words after
    the "be", the patient between them."""
    be = next((k for k in range(2, len(words)) if words[k] in _BE), None)
    if be is None:
        return []
    return [
        (i, {x for x in words[be + 1 : i] if content_word(x)}, {"who"})
        for i in range(be + 2, min(len(words), be + 2 + _BY_REACH))
    ]


# The doer asked for: "who invented ...", "... invented by whom".
_WHO_DOES = frozenset(("who", "whom"))


def _asked(wh: str) -> str:
    return "who" if wh == "whom" else wh


def _ends(words: Sequence[str], j: int) -> bool:
    return all(w in PUNCTUATION for w in words[j + 1 :])


def _roles(active: Sequence[str], i: int) -> tuple[set[str], set[str]]:
    """(doer, done-to) of the active verb at ``i``: the words before it and the phrase after
    it; "who" asking for the doer ("who invented the jet engine"); with "do" after a
    question's opening words, the doer between them and the verb and the done-to asked
    for ("what gas do plants absorb": plants do it to the gas)."""
    obj = _phrase(active[i + 1 :])
    do = next((k for k in range(1, i) if active[k] in _DO), None)
    if do is not None and active[0] in _WHO:
        asked = {x for x in active[:do] if content_word(x)} | {_asked(active[0])}
        return _someone(active[do + 1 : i]), obj | asked
    return _someone(active[:i]) | ({"who"} if active[0] in _WHO_DOES else set()), obj


def _someone(words: Sequence[str]) -> set[str]:
    return {x for x in words if content_word(x) or x in PRONOUNS}


def _participle_of(verb: str, participle: str) -> bool:
    """Whether ``participle`` is ``verb``'s: the lexicon's forms, a regular one ("tow" /
    "towed", "log" / "logged", "carry" / "carried"), or the verb itself ("read", a
    regular past)."""
    if verb in _BE or verb in AUXILIARIES or not content_word(verb):
        return False
    if _PARTICIPLES.get(participle) == _ACTIVE.get(verb, verb):
        return True
    root = verb[:-1] if verb.endswith("s") and not verb.endswith("ss") else verb
    if participle == root:  # "read" / "read", or a regular past ("who synthesized urea")
        return root in SAME_PARTICIPLE or (root.endswith("ed") and not root.endswith("eed"))
    return participle in (
        regular_past(root),
        root + root[-1:] + "ed",
        root[:-1] + "ied",
    )


_WHO = frozenset(("what", "who", "whom"))
_DO = frozenset(("do", "does", "did"))


def asked_traded(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether one question asks for the doer and the other for what is done to, of the
    same verb and thing: "what eats jellyfish" / "what do jellyfish eat", "who killed
    Caesar" / "who did Caesar kill", "what preys on hawks" / "what do hawks prey on";
    "which team" asks as "what" does ("which team beat X" / "which team did X beat")."""
    a, b = _which_as_what(a), _which_as_what(b)
    return _doer_and_done(a, b) or _doer_and_done(b, a)


def _doer_and_done(doer: Sequence[str], done: Sequence[str]) -> bool:
    """``doer`` is "what VERBs X ...", ``done`` is "what do X VERB ..."."""
    asks = [k for k in range(len(done) - 3) if done[k] in _WHO and done[k + 1] in _DO]
    if not asks:
        return False
    for i in range(len(doer) - 2):
        verb = doer[i + 1]
        if doer[i] not in _WHO or verb in _DO or verb in _BE or verb in STOPWORDS:
            continue
        thing = _phrase(doer[i + 2 :], ends=_NO_ENDS)  # "preys on hawks": the "on" too
        for k in asks:
            for v in range(k + 3, min(k + 7, len(done))):  # a subject of a few words
                if verb in _inflected(done[v]):
                    subject = {w for w in done[k + 2 : v] if content_word(w)}
                    if subject and subject <= thing:
                        return True
    return False


_NO_ENDS: frozenset[str] = frozenset()
# Prepositions a question may leave at its end: "what is fire weak against?".
_STRANDED = ADJUNCT_HEADS | frozenset(("against", "than", "to", "into", "like"))


def stranded(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether ``a`` leaves a preposition at its end and ``b`` gives it, as its object, a
    phrase that ``a`` has before it, the rest the same: "what types is fire weak against"
    / "what types are weak against fire", "who is Sam afraid of" / "who is afraid of Sam"."""
    a, b = unstopped(list(a)), unstopped(list(b))
    if len(a) < 3 or a[-1] not in _STRANDED or a[-1] not in b[:-1]:
        return False
    at = len(b) - 1 - b[::-1].index(a[-1])
    tail = b[at + 1 :]  # a thing or someone: no "in Australia", no "when buying a bike"
    if not tail or not all(content_word(w) or w in PRONOUNS for w in tail):
        return False
    for i in range(len(a) - len(tail)):
        if a[i : i + len(tail)] == tail:
            return _be_as_one(a[:i] + a[i + len(tail) : -1]) == _be_as_one(b[:at])
    return False


def _be_as_one(words: Sequence[str]) -> list[str]:
    return ["be" if w in _BE else w for w in words]


def _which_as_what(words: Sequence[str]) -> Sequence[str]:
    """ "which team ..." read as "what ...": one content word after "which" is the asker."""
    out = list(words)
    for k in range(len(out) - 1, -1, -1):
        if out[k] == "which" and k + 1 < len(out) and content_word(out[k + 1]):
            out[k : k + 2] = ["what"]
    return out


@functools.lru_cache(maxsize=4096)
def _inflected(verb: str) -> frozenset[str]:
    """How a question asking for the doer writes ``verb``: "eats", "ate". Not the bare
    verb ("what language do you think ..." is no doer of "language"), unless it is the
    listed past ("which team beat the Lakers")."""
    past = _VERBS[verb][0] if verb in _VERBS else regular_past(verb)
    return frozenset((third_person(verb), past))


# The asker and another person (someone they have, a role, "someone") as the doer of the
# same verb, one on each side: "my sister owes me" / "I owe my sister".
_ASKER = frozenset(("i", "we"))
_MINE = frozenset(("me", "my", "us", "our", "mine", "myself"))
_PEOPLE = RELATIONS | {w for pair in ROLES for w in pair} | {"someone", "somebody"}
# Doers who stand for anyone, the asker too: "how does a person lose weight".
_GENERIC = frozenset(
    "person people one someone somebody anyone anybody individual guy girl man woman men "
    "women beginner student user human adult kid child".split()
)
_BEFORE_PERSON = frozenset("my our your his her their the a an".split())
_BEFORE_SUBJECT = AUXILIARIES | {"not"}
_BEFORE_VERB = _BEFORE_SUBJECT | frozenset(
    "never just really still also ever even always accidentally actually be".split()
)
# The asker done to, not doing: "what if I get yelled at by my boss" asks what "what if my
# boss yells at me" does.
_DONE_TO = frozenset(("by", "get", "got", "gets", "getting", "been", "being"))


def asker_traded(cached: str, asked: str) -> bool:
    """Whether the asker and someone else each do the verb of one clause, one on each side,
    the asker's clause not a passive unless both are ("if I get yelled at by my boss" is
    "if my boss yells at me"; "my teen is embarrassed by me" is not "I'm embarrassed by my
    teen"):
    - traded, the other (someone they have, a role, "someone", not "a person") on the
      asker's side too and the asker ("me", "my") on theirs: "what if my coworker takes
      credit for my work" / "what if I took credit for my coworker's work", "someone
      rear-ends me" / "I rear-end someone", "I'm moving in with my parents" / "my parents
      are moving in with me";
    - or put for the asker, doing it to something of the asker's: "if I cancel my flight" /
      "if the airline cancels my flight". Not a generic doer ("a person", "people")."""
    a, b = contrast_words(cached), contrast_words(asked)
    if not (_ASKER.intersection(a) or _ASKER.intersection(b)):
        return False  # most pairs: read no further
    if not (_MINE.intersection(a) or _MINE.intersection(b)):
        return False
    for x, y in _aligned(_clauses(a), _clauses(b)):
        doer_x, doer_y = _doer(x), _doer(y)
        if doer_x is None or doer_y is None or doer_x[1] != doer_y[1]:
            continue
        if doer_x[0] == "i" and doer_y[0] != "i":
            mine, person, theirs, (asker_side, person_side) = x, doer_y[0], y, (a, b)
        elif doer_y[0] == "i" and doer_x[0] != "i":
            mine, person, theirs, (asker_side, person_side) = y, doer_x[0], x, (b, a)
        else:
            continue
        if _DONE_TO.intersection(mine) and not _DONE_TO.intersection(theirs):
            continue  # the asker done to, the other doing: the same event
        if person in asker_side and (person in _PEOPLE or person not in _GENERIC):
            if _MINE.intersection(person_side):
                return True
        elif person not in _GENERIC and "my" in theirs and not _BE.intersection(theirs):
            return True  # not "if my flight is cancelled": the flight is done to
    return False


def _clauses(words: Sequence[str]) -> list[list[str]]:
    """The words of each clause (``contrast_negation.clause_numbers``), without marks and
    the words that open clauses."""
    out: dict[int, list[str]] = {}
    for w, n in zip(words, clause_numbers(words), strict=True):
        if w not in PUNCTUATION and w not in CLAUSE_OPENERS:
            out.setdefault(n, []).append(w)
    return list(out.values())


def _aligned(a: list[list[str]], b: list[list[str]]) -> list[tuple[list[str], list[str]]]:
    """Each clause of ``a`` with the clause of ``b`` that shares the most of its content
    words, at least half of the fewer's, in whatever order the clauses come."""
    out = []
    for x in a:
        cx = _content(x)
        shares = [
            (len(cx & cy) / min(len(cx), len(cy)), y) for y in b if cx and (cy := _content(y))
        ]
        if shares and (best := max(shares, key=lambda s: s[0]))[0] >= 0.5:
            out.append((x, best[1]))
    return out


def _content(clause: Sequence[str]) -> set[str]:
    return {w for w in clause if w not in STOPWORDS and w not in _ASKER and w not in _MINE}


def _doer(clause: Sequence[str]) -> tuple[str, str] | None:
    """("i" or the doer's head word, the verb's lemma) of a clause that opens with its
    subject, after any auxiliary ("can my landlord ..."); "be" where no other verb follows."""
    i = 0
    if clause and (clause[0] in ADJUNCT_HEADS or clause[0] == "as"):
        # A qualifier first, then the question: "as a US citizen, can I sponsor ...".
        i = next((k for k, w in enumerate(clause) if w in _BEFORE_SUBJECT), len(clause))
    while i < len(clause) and clause[i] in _BEFORE_SUBJECT:
        i += 1
    if i == len(clause):
        return None
    if clause[i] in _ASKER or clause[i] in ("someone", "somebody"):
        who, rest = ("i" if clause[i] in _ASKER else clause[i]), clause[i + 1 :]
    elif clause[i] in _BEFORE_PERSON and i + 1 < len(clause):
        # A person after a few words that describe them: "my US citizen parents".
        k = next((k for k in range(i + 1, min(i + 4, len(clause))) if clause[k] in _PEOPLE), i + 1)
        if clause[k] in STOPWORDS:
            return None
        who, rest = clause[k], clause[k + 1 :]
    else:
        return None
    verb = next((w for w in rest if w not in _BEFORE_VERB and w not in _BE), None)
    if verb is not None:
        return who, _ACTIVE.get(verb) or _PARTICIPLES.get(verb) or lemma(verb)
    return (who, "be") if _BE & set(rest) else None
