"""Contrast checks' view of a question: lower-case words, contractions spelled out, phrases
that mean one word of an axis joined ("turn on" is "enable"), punctuation kept. Pure.
"""

from __future__ import annotations

import functools
import re

_CONTRACTIONS = (
    (re.compile(r"\b(can)not\b"), r"\1 not"),
    (re.compile(r"\bcan't\b"), "can not"),
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\bshan't\b"), "shall not"),
    (re.compile(r"\bain't\b"), "is not"),
    (re.compile(r"n't\b"), " not"),
    (re.compile(r"\b(what|who|where|how|it|that|there|here|he|she|when|why|which)'s\b"), r"\1 is"),
    (re.compile(r"\blet's\b"), "let us"),
    (re.compile(r"'re\b"), " are"),
    (re.compile(r"'ve\b"), " have"),
    (re.compile(r"'ll\b"), " will"),
    (re.compile(r"\bi'm\b"), "i am"),
    (re.compile(r"'d\b"), " would"),
    (re.compile(r"'s\b"), ""),  # a possessive: "California's" is "California"
)
_TURN = r"\b(?:turn|switch|toggle|power)(?:s|ed|ing)?\s+(?:(?!on\b|off\b)[a-z0-9]+\s+)?"
# Phrases that mean one word of an axis, and symmetric comparisons (argument order is free).
_PHRASES = (
    (re.compile(_TURN + r"on\b"), "enable"),
    (re.compile(_TURN + r"off\b"), "disable"),
    (re.compile(r"\b(zoom|log|sign|check|opt|plug|cash|breathe|clock|scale|scroll|round|"
                r"speed|slow|step|cool|warm|shut|wake)(?:s|ed|ing)?\s+(in|out|up|down)\b"),
     r"\1_\2"),
    (re.compile(r"\b(?:compared|comparable|similar|equal|equivalent|identical|related)"
                r"\s+(?:to|with)\b"), "vs"),
    (re.compile(r"\bversus\b|\bvs\b\.?"), "vs"),
    (re.compile(r"\b(?:whether\s+)?or\s+not\b"), " "),
    (re.compile(r"\bkm\s*/\s*h\b|\bkmh\b|\bkph\b"), "kmh"),
    (re.compile(r"\bmiles\s+per\s+hour\b"), "mph"),
    (re.compile(r"\bthe\s+second\b"), "the 2nd"),
    (re.compile(r"\b(given|provided)\s+that\b"), r"\1_that"),
    # Bare follow-ups set no condition and negate nothing: "If so, why?", "If not, why not?"
    (re.compile(r"\bif\s+(?:so|yes|not|no|any|possible|ever|needed|necessary)\b"), " "),
    (re.compile(r"^\W*no\s*,"), " "),  # an answer's "No, ...": no negation of the question
    (re.compile(r"\bneither\b(.*)\bnor\b"), r"neither\1or"),
    (re.compile(r"\bmost\s+expensive\b"), "priciest"),
    (re.compile(r"\bleast\s+expensive\b"), "cheapest"),
)  # fmt: skip
_SYMBOLS = {"$": " usd ", "€": " eur ", "£": " gbp ", "¥": " jpy ", "₹": " inr ", "%": " percent ",
            "°c": " celsius ", "°f": " fahrenheit ", "°": " degree "}  # fmt: skip
# Negating words, one table for the contrast check and the rewording step. "without" too:
# "with no money" is "without any money"; "bread" / "bread without yeast". "non" is the
# prefix of "non-toxic" (the words are split at the hyphen).
NEGATORS = frozenset("not no never nobody nothing none neither nor noone without non".split())
# The punctuation tokens ``contrast_words`` keeps (clause boundaries for the checks).
PUNCTUATION = frozenset(",;:?!.")
_CONTRAST_TOKEN = re.compile(r"[a-z0-9_]+(?:'[a-z]+)?|\d+(?:[.,]\d+)*|[,;:?!]|\.(?=\s|$)")


# One contrast check reads each text about ten times, and the asked text again for every
# candidate: short texts are remembered. Longer ones are tokenised each time, so the memo
# stays small (at most 1,024 texts of 2,048 characters).
_MEMO_CHARS = 2048


def contrast_words(text: str) -> tuple[str, ...]:
    """Lower-case words with contractions spelled out, axis phrases joined, punctuation kept."""
    return _remembered(text) if len(text) <= _MEMO_CHARS else _words(text)


@functools.lru_cache(maxsize=1024)
def _remembered(text: str) -> tuple[str, ...]:
    return _words(text)


def _words(text: str) -> tuple[str, ...]:
    t = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    for symbol, word in _SYMBOLS.items():
        t = t.replace(symbol, word)
    for pattern, repl in _CONTRACTIONS:
        t = pattern.sub(repl, t)
    t = re.sub(r"(\d),(\d{3})\b", r"\1\2", t)  # 20,000 is 20000
    for pattern, repl in _PHRASES:
        t = pattern.sub(repl, t)
    return tuple(_CONTRAST_TOKEN.findall(t))


# Operators of formulas and code, which the word pattern drops ("2x + 3" / "2x - 3"). A
# hyphen or slash inside a word ("e-mail", "and/or"), a dash between words set off by
# spaces ("Python - sorting a list"), and "!" ending a sentence are prose, not operators.
# "%" is a unit ("percent"), read by the unit check.
_OPERATOR = re.compile(r"[-+*/^=<>!&|~\u2212\u00d7\u00f7\u2260\u2264\u2265\u2013\u2014]+")
_DASHES = frozenset("-\u2013\u2014")


def operators(text: str) -> tuple[str, ...]:
    """The operators a text writes, in order ("x^2 - 1 >= 0": "^", "-", ">=")."""
    found = []
    for m in _OPERATOR.finditer(text):
        op, i, j = m.group(), m.start(), m.end()
        before, after = text[i - 1 : i], text[j : j + 1]
        if op in ("-", "/") and before.isalpha() and after.isalpha():
            continue  # within a word
        if op in _DASHES and before.isspace() and after.isspace():
            word_before = text[:i].rstrip()[-1:]
            word_after = text[j:].lstrip()[:1]
            if word_before.isalpha() and word_after.isalpha() and len(text[:i].split()[-1]) > 1:
                continue  # a dash between words (a one-letter variable before it: "x - y")
        if set(op) == {"!"} and (not after or after.isspace()):
            continue  # an exclamation
        found.append(re.sub("[\u2212\u2013\u2014]", "-", op))
    return tuple(found)
