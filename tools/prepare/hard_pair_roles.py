"""Who does what to whom: the ``role`` rule of ``hard_pairs`` (pure).

It swaps two role nouns or two names where they are not joined symmetrically ("Did Apple
sue Samsung?" / "Did Samsung sue Apple?"), or replaces one role by its counterpart ("the
sender" / "the recipient"). ``pronoun`` swaps the asker and someone they have ("can I sue
my landlord" / "can my landlord sue me").
"""

from __future__ import annotations

import random
import re

from shared.lexicon import RELATIONS, ROLES
from tools.prepare.hard_pair_corpus import case_like, starts_sentence

Span = tuple[int, int]  # a (start, end) slice of a text


# Two names or roles side by side ("A and B", "A vs B", "between A and B") are symmetric:
# swapping them keeps the question (``symmetric``); anywhere else it changes who does what.
_JOINS = frozenset(("and", "or", "vs", "vs.", "versus", ",", "&", "/", "and the", "or the", "nor"))
_VERB_GAP = re.compile(
    r"^ (?!(?:in|on|of|at|for|from|to|with|by|about|into|and|or|vs)\b)[a-z]+(?: [a-z]+){0,2} $"
)
_CAPITALISED = re.compile(r"\b[A-Z][\w+#]*(?: [A-Z][\w+#]*)*")


def _names_in(text: str) -> list[Span]:
    """Spans of capitalised runs ("New York"), a sentence's first word left out."""
    spans = []
    for m in _CAPITALISED.finditer(text):
        i, j = m.span()
        if starts_sentence(text, i):
            i = text.find(" ", i, j) + 1  # "Did Apple": "Apple"
            if i == 0:
                continue
        if text[i:j] != "I":
            spans.append((i, j))
    return spans


def _swap_spans(text: str, a: Span, b: Span) -> str:
    (i, j), (k, m) = a, b
    return text[:i] + text[k:m] + text[j:k] + text[i:j] + text[m:]


def _role_spots(lower: str) -> list[tuple[Span, str]]:
    """Each role noun's span and its counterpart ("sender": "recipient"), in text order."""
    return sorted(
        (m.span(), other) for a, b in ROLES for x, other in ((a, b), (b, a))
        for m in re.finditer(rf"(?<![\w']){x}(?![\w'])", lower)
    )  # fmt: skip


def _role_swaps(text: str, spans: list[Span]) -> list[tuple[Span, Span]]:
    """Pairs whose swap changes who does what to whom: two role nouns, or two names with a
    verb between them ("Did Apple sue Samsung?", not "Rs 500 ... India"). Never two joined
    symmetrically ("A and B", "between A and B") nor the same word twice."""
    lower = text.lower()
    pairs = [(x, y) for n, x in enumerate(spans) for y in spans[n + 1 :]]
    names = _names_in(text)
    pairs += [
        (x, y) for n, x in enumerate(names) for y in names[n + 1 :]
        if _VERB_GAP.match(text[x[1] : y[0]])
    ]  # fmt: skip
    return [
        (x, y) for x, y in pairs
        if x[1] <= y[0] and text[x[1] : y[0]].strip().lower() not in _JOINS
        and text[x[0] : x[1]].lower() != text[y[0] : y[1]].lower()
        and "between" not in lower[: x[0]].split()[-2:]
    ]  # fmt: skip


def role(text: str, rng: random.Random) -> str | None:
    """Who does what to whom, changed: two roles or two names swapped where they are not
    joined symmetrically, else one role replaced by its counterpart ("the sender" / "the
    recipient")."""
    spots = _role_spots(text.lower())
    swaps = _role_swaps(text, [span for span, _ in spots])
    if swaps:
        return _swap_spans(text, *rng.choice(swaps))
    if not spots:
        return None
    (i, j), other = rng.choice(spots)
    return text[:i] + case_like(other, text[i:j]) + text[j:]


# The auxiliary before "I" and before "my <someone>": "do I" / "does my boss", "do my parents".
_FOR_ONE = {"do": "does", "have": "has", "am": "is"}
_FOR_MANY = {"am": "are", "was": "were"}
_FOR_ME = {"does": "do", "do": "do", "has": "have", "have": "have", "is": "am", "are": "am",
           "was": "was", "were": "was"}  # fmt: skip
_MODALS = "can could should would will may might must did".split()
_AUX_I = "|".join([*_MODALS, "do", "have", "am", "was"])
_AUX_THEM = "|".join([*_MODALS, *_FOR_ME])
_WHO = r"((?:best |new |old |ex-|ex |former |current |younger |older |little |big )?(?:{}))".format(
    "|".join(sorted(RELATIONS, key=len, reverse=True))
)
# One verb, maybe after an adverb and before a particle; never a function word ("do if").
_VERB = (
    r"((?:(?:really|still|ever|legally|actually|even|not|never|just) )?"
    r"(?!(?:if|to|with|for|about|that|when|what|so|and|or|in|on|at|be|get|go)\b)[a-z]+"
    r"(?: (?:up|out|off|over|back|down|away|on))?)"
)
# Not "my friend list": the person ends the noun phrase.
_END = r"(?=[\s?.,!]|$)(?! (?:list|account|name|card|number|phone|profile|page|car|house)\b)"
_I_VERB_MY = re.compile(rf"\b({_AUX_I}) I {_VERB} my {_WHO}{_END}", re.IGNORECASE)
_MY_VERB_ME = re.compile(rf"\b({_AUX_THEM}) my {_WHO} {_VERB} me\b", re.IGNORECASE)


def _plural(who: str) -> bool:
    word = who.split()[-1].lower()
    return word == "children" or (word.endswith("s") and word != "boss")


def pronoun(text: str, rng: random.Random) -> str | None:
    """The asker and someone they have, swapped across the verb: "can I sue my landlord?" /
    "can my landlord sue me?", "does my dog love me" / "do I love my dog" (auxiliaries
    agree). Deterministic: ``rng`` is unused."""
    if m := _I_VERB_MY.search(text):
        aux, verb, who = m.groups()
        new = (_FOR_MANY if _plural(who) else _FOR_ONE).get(aux.lower(), aux.lower())
        swapped = f"{case_like(new, aux)} my {who} {verb} me"
    elif m := _MY_VERB_ME.search(text):
        aux, who, verb = m.groups()
        swapped = f"{case_like(_FOR_ME.get(aux.lower(), aux.lower()), aux)} I {verb} my {who}"
    else:
        return None
    return text[: m.start()] + swapped + text[m.end() :]
