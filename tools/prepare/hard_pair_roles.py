"""Who does what to whom: hard negatives that change the roles of a question (pure).

``role`` swaps two role nouns or two names where they are not joined symmetrically, or
replaces one role by its counterpart ("the sender" / "the recipient"); ``swap`` swaps the
subject and the object of a verb where both are agents ("Can I sue my landlord?" / "Can my
landlord sue me?"). Both are rules of ``hard_pairs``.
"""

from __future__ import annotations

import random
import re

from shared.lexicon import STOPWORDS
from tools.prepare.hard_pair_corpus import case_like, starts_sentence
from tools.prepare.hard_pair_words import AGENTS, ROLES

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


# Two agents on either side of a verb after an auxiliary: "Can I sue my landlord?" / "Can my
# landlord sue me?", "Can the vice president overrule the president?". Bi-encoders put such
# pairs at cosine 0.98; ``role`` only finds them between role nouns or names.
_SUBJECT_OF = {"me": "I", "us": "we", "you": "you", "him": "he", "them": "they"}
_OBJECT_OF = {"i": "me", "we": "us", "you": "you", "he": "him", "she": "her", "they": "them"}
_AGENT_NOUNS = frozenset(AGENTS) | {noun for pair in ROLES for noun in pair}
# Not verbs here: adverbs, linking verbs ("can I become a lawyer") and verbs whose two sides
# do the same thing ("can I marry my cousin" / "can my cousin marry me").
_NO_SWAP_VERBS = "meet marry date befriend kiss hug resemble know become make let".split()
_SKIP = "|".join(sorted(STOPWORDS | {"not", "never", "also", "ever", "still", "really", "just",
                                     *_NO_SWAP_VERBS}))  # fmt: skip
_PLAIN = rf"(?!(?:{_SKIP})\b)[A-Za-z][\w'-]*\b"
_AGENT = rf"(?:the|a|an|my|your|our|his|her|their) {_PLAIN}(?: {_PLAIN}){{0,2}}"
_CLAUSE_END = (
    r"(?=\s*(?:[?.!,;]|$|(?:for|from|in|on|at|to|with|by|about|after|before|if|when|without|"
    r"during|because|while|over|under|and|or)\b))"
)
_ACTS_ON = re.compile(  # pronouns in lower case: "can I enter US" names no one
    rf"\b((?i:can|could|should|would|will|may|might|must|did|does|do)) "
    rf"(I|we|you|he|she|they|{_AGENT}) ({_PLAIN}) (me|us|you|him|them|{_AGENT}){_CLAUSE_END}"
)


def _an_agent(side: str) -> bool:
    words = side.lower().split()
    return len(words) == 1 or words[-1] in _AGENT_NOUNS  # a pronoun, or an agent noun


def swap(text: str, rng: random.Random) -> str | None:
    """Who acts on whom, swapped: the subject and the object of a verb ("Can I sue my
    landlord?" / "Can my landlord sue me?"). Only where both sides are agents, and never
    after "do"/"does" with a pronoun (its agreement would change too)."""
    for m in _ACTS_ON.finditer(text):
        aux, first, verb, second = m.groups()
        pronoun = " " not in first or " " not in second
        if not (_an_agent(first) and _an_agent(second)) or (
            pronoun and aux.lower() in ("do", "does")
        ):
            continue
        subject = _SUBJECT_OF.get(second.lower(), second)
        obj = _OBJECT_OF.get(first.lower(), first)
        if subject.lower() == first.lower():
            continue  # "can you help you"
        return f"{text[: m.start(2)]}{subject} {verb} {obj}{text[m.end(4) :]}"
    return None
