"""Contrast in formulas and code: another operator, grouping, order of numbers, or
comparison (pure). Part of ``contrast.contrast_by``."""

from __future__ import annotations

import difflib
import re

from edge.cache.rewording import mark_spacings
from shared.lexicon import comparisons, contrast_words, grouped, operator_spans, operators

LEADING_NUMBER = re.compile(r"\d+(?:\.\d+)?")  # "3x" is 3, "2.5kg" is 2.5
_FORMULA_MARKS = re.compile(r"[()<>=`\[\]]")
# A ratio (or a time), numbers joined by colons: "1:2:3 cement:sand:gravel", "9:30".
_RATIO = re.compile(r"(?<![\w:])\d+(?:\.\d+)?(?::\d+(?:\.\d+)?)+(?![\w:])")


def numbers_in_order(text: str) -> list[str]:
    """The numbers as they come, a coefficient as its number: "y = 3x + 2" is 3, 2."""
    return [m.group() for w in contrast_words(text) if (m := LEADING_NUMBER.match(w))]


_LAST_WORD = re.compile(r"(\w+)\s*$")
_FIRST_WORD = re.compile(r"\s*(\w+)")


def operands(text: str, spans: list[tuple[int, int, str]]) -> list[str]:
    """The words and numbers on either side of each operator (``spans``: ``text``'s
    ``operator_spans``), in order and in lower case: "price / sqft" is price, sqft."""
    out = []
    for i, j, _ in spans:
        for m in (_LAST_WORD.search(text, 0, i), _FIRST_WORD.match(text, j)):
            if m is not None:
                out.append(m[1].lower())
    return out


def logic_flipped(cached: str, asked: str) -> bool:
    """In a formula or code, "and" for "or", the one word that differs: "P(A and B)" /
    "P(A or B)", "`a and b`" / "`a or b`". In prose "like and dislike" / "like or dislike"
    may ask the same."""
    if not (_FORMULA_MARKS.search(cached) or _FORMULA_MARKS.search(asked)):
        return False
    a, b = contrast_words(cached), contrast_words(asked)
    differ = {(x, y) for x, y in zip(a, b, strict=False) if x != y}
    return len(a) == len(b) and differ in ({("and", "or")}, {("or", "and")})


_TOKENS = re.compile(r"\w+|[^\w\s]+")
# The words an operator is read as: "&" for "and" or "+" for "plus" is the same formula.
_READ_AS = {
    "&": {"and"}, "&&": {"and"}, "||": {"or"}, "+": {"plus", "and"}, "-": {"minus", "to"},
    "*": {"times"}, "/": {"over", "divided", "per", "or"}, "=": {"equals", "equal"},
    "==": {"equals", "equal"}, "!=": {"not"},
}  # fmt: skip


def operator_for_word(cached: str, asked: str) -> bool:
    """One operator written where the other has a word that is not its reading, the rest
    the same: "NULL = NULL" / "NULL IS NULL" in SQL, "`x == None`" / "`x is None`", "10 / 3" /
    "10 mod 3". "2x = 10" / "2x is 10" is refused too, the safe side. Asked only where the
    two write different numbers of operators (``formula_changed``)."""
    a, b = _TOKENS.findall(cached.lower()), _TOKENS.findall(asked.lower())
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    if len(changes) != 1 or changes[0][0] != "replace":
        return False
    _, i1, i2, j1, j2 = changes[0]
    if i2 - i1 != 1 or j2 - j1 != 1:
        return False
    sign, word = (a[i1], b[j1]) if operators(a[i1]) else (b[j1], a[i1])
    return bool(operators(sign)) and word.isalpha() and word not in _READ_AS.get(sign, ())


# A mark whose spacing between two words can change what is written: not a hyphen ("e-mail" /
# "e -mail" is a typo), a quote or a bracket ("f(x)" / "f (x)"). Prose punctuation glued to
# the word before it only ("yes, no") is left out too.
_SPACING_MATTERS = re.compile(r"[^\w\s'\"\u2018\u2019\u201c\u201d()\[\]{}-]")


def _marks_between_words(text: str) -> list[tuple[tuple[str, ...], str]]:
    """Such marks between two words, each with the words and how it is spaced
    (``rewording.mark_spacings``)."""
    return [
        (around, spacing)
        for around, spacing in mark_spacings(text.lower())
        if len(around) == 3 and around[0][0].isalnum() and around[2][0].isalnum()
        and _SPACING_MATTERS.fullmatch(around[1]) and spacing != "left"
    ]  # fmt: skip


def spaced_otherwise(cached: str, asked: str) -> bool:
    """The same marks between the same words, one spaced before it on one side only:
    ".card.active" / ".card .active" in CSS (a class, or a descendant). MiniLM's tokenizer
    drops the space, so no model can see it."""
    a, b = _marks_between_words(cached), _marks_between_words(asked)
    return a != b and [m for m, _ in a] == [m for m, _ in b]


def _ratio_numbers(ratios: list[str]) -> list[str]:
    return [n for r in ratios for n in r.split(":")]


def formula_changed(cached: str, asked: str) -> str | None:
    """ "operator" or "order" where the two write another formula, else None."""
    sa, sb = operator_spans(cached), operator_spans(asked)
    oa, ob = tuple(op for *_, op in sa), tuple(op for *_, op in sb)
    # Both sides write a formula (one "&" or "w/" for a word is a rewording, not a formula).
    if oa and ob:
        if oa != ob or grouped(cached) != grouped(asked):  # "(*p)++" / "*p++"
            return "operator"
        # The same signs and numbers, the numbers in another order: "2>&1" / "1>&2", "y = 3x
        # + 2" / "y = 2x + 3" (dev-set pairs the models served; "2 + 3" / "3 + 2" is refused
        # too, the safe side).
        na, nb = numbers_in_order(cached), numbers_in_order(asked)
        if na != nb and sorted(na) == sorted(nb):
            return "order"
        # Words as operands too: "is it price / sqft" / "is it sqft / price" (blind24).
        wa, wb = operands(cached, sa), operands(asked, sb)
        if wa != wb and sorted(wa) == sorted(wb):
            return "order"
    # A ratio's numbers in another order, with no operator around it: "is 1:2:3
    # cement:sand:gravel a good mix" / "is 3:2:1 ..." (blind20).
    ra, rb = _RATIO.findall(cached), _RATIO.findall(asked)
    if ra and rb and ra != rb and sorted(_ratio_numbers(ra)) == sorted(_ratio_numbers(rb)):
        return "order"
    # In words too: "greater than 7" / "greater than or equal to 7".
    if (ca := comparisons(cached)) and (cb := comparisons(asked)) and ca != cb:
        return "operator"
    if logic_flipped(cached, asked) or spaced_otherwise(cached, asked):
        return "operator"
    if len(oa) != len(ob) and operator_for_word(cached, asked):
        return "operator"
    return None
