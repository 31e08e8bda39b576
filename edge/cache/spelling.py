"""Typos in the asked question, fixed for a second look at the cache (pure but for loading).

MiniLM reads a misspelt word as other word pieces: "how do i restrat my router" sits at
cosine 0.68 from "how do I restart my router", under the candidate floor, so no model is
ever asked about the pair. On a miss, the cache looks again with the question respelled
(``Matcher.decide_respelled``): SymSpell (symspellpy, MIT) with the English frequency
dictionary it ships, one edit away (a transposition is one edit).

A fix is a guess, so it is narrow and checked:
- only lower-case words of at least four letters (or capitalised where a sentence starts),
  standing alone, that the dictionary does not know: names, acronyms, numbers, identifiers
  ("datasets.utils"), "k8s" and short words ("ur") are left as written;
- only a slip of a typing hand: a letter left out, two neighbours swapped or a letter
  doubled ("restrat", "cofee", "grappes"), never another letter put in or in place of one,
  which is how real words the dictionary lacks differ from ones it has ("sharding" is not
  "sharing", "struct" not "struck");
- the fix keeps the first letter, where typos are rare ("async" is not "sync");
- exactly one such word; two ("strng": string or strong), no fix.

The second look reads both questions through the same fixes (``Respelling.read``), and
only from a cached question that has every fixed word or the same typo, so the decision
compares what was meant, with every check and model as for any question. An entry whose
question has typos is stored under its respelled vector, so a question asked without them
finds it in the first look.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

MIN_LETTERS = 4
DICTIONARY = "frequency_dictionary_en_82_765.txt"  # ships in the symspellpy wheel
_WORD = re.compile(r"[A-Za-z0-9'\u2019]+")
# A word standing alone: only quotes and brackets before it, sentence punctuation after, so
# identifiers ("torch.utils.data", "iter_files", "`bool`") are never read as words.
_TOKEN = re.compile(r"\S+")
_ALONE = re.compile(r"([(\"'\u2018\u201c]*)([A-Za-z][a-z]+)([.,?!;:)\"'\u2019\u201d]*)")


def typo_of(typo: str, word: str) -> bool:
    """Whether ``typo`` is ``word`` with a letter left out, two neighbours swapped, or a
    letter doubled: the slips of a typing hand. Another letter put in or in place of one is
    not: those are how real words differ ("sharding" / "sharing", "struct" / "struck",
    "args" / "arts"), and the dictionary does not know every real word."""
    if len(word) == len(typo) + 1:
        return any(word[:i] + word[i + 1 :] == typo for i in range(len(word)))
    if len(typo) == len(word) + 1:
        return any(typo[i] == typo[i - 1] and typo[:i] + typo[i + 1 :] == word
                   for i in range(1, len(typo)))  # fmt: skip
    if len(typo) == len(word):
        d = [i for i in range(len(word)) if word[i] != typo[i]]
        return (
            len(d) == 2
            and d[1] == d[0] + 1
            and (typo[d[0]], typo[d[1]]) == (word[d[1]], word[d[0]])
        )
    return False


@dataclass(frozen=True)
class Respelling:
    """The asked question with its typos fixed, and which words were put in."""

    text: str
    fixes: tuple[tuple[str, str], ...]  # (as written, as fixed)

    def confirmed_by(self, cached: str) -> bool:
        """Whether the cached question has every fixed word (the guess, seen in its text),
        or the same typo (both were stored and asked under their respelled vectors)."""
        words = {w.lower() for w in _WORD.findall(cached)}
        return all(fixed in words or typo in words for typo, fixed in self.fixes)

    def read(self, cached: str, own: Respelling | None) -> str:
        """``cached`` read through the same fixes, so both questions are compared alike: a
        typo the two share is fixed in both ("json" read as "jason" on one side only would
        hide "convert json to yaml" / "convert yaml to json"), and the cached question's
        own fixes (``own``) where this question has the fixed word."""
        words = {w.lower() for w in _WORD.findall(self.text)}
        mapping = dict(self.fixes)
        mapping.update((typo, word) for typo, word in (own.fixes if own else ()) if word in words)
        return _replaced(cached, mapping)


def respell(
    text: str, known: Callable[[str], bool], nearest: Callable[[str], str | None]
) -> Respelling | None:
    """``text`` with each unknown lower-case word of ``MIN_LETTERS`` or more that stands
    alone (capitalised only where a sentence starts) replaced by ``nearest(word)``, when
    that keeps its first letter and the word is a slip of it (``typo_of``); None when
    nothing was fixed."""
    fixes: list[tuple[str, str]] = []

    def fix(m: re.Match[str]) -> str:
        alone = _ALONE.fullmatch(m.group())
        if alone is None:
            return m.group()
        before, written, after = alone.groups()
        # A capital only where a sentence starts ("Waht is ...?"); elsewhere it is a name.
        opens = written[0].isupper()
        if opens and text[: m.start()].rstrip()[-1:] not in ("", ".", "!", "?", ":"):
            return m.group()
        word = written.lower()
        if len(word) < MIN_LETTERS or known(word):
            return m.group()
        fixed = nearest(word)
        if not fixed or fixed[0] != word[0] or not typo_of(word, fixed):
            return m.group()
        fixes.append((word, fixed))
        return before + (fixed.capitalize() if opens else fixed) + after

    respelled = _TOKEN.sub(fix, text)
    return Respelling(respelled, tuple(fixes)) if fixes else None


def _replaced(text: str, mapping: dict[str, str]) -> str:
    """``text`` with each word standing alone that ``mapping`` names (in lower case) replaced,
    a capital kept."""

    def swap(m: re.Match[str]) -> str:
        alone = _ALONE.fullmatch(m.group())
        if alone is None or (fixed := mapping.get(alone[2].lower())) is None:
            return m.group()
        return alone[1] + (fixed.capitalize() if alone[2][0].isupper() else fixed) + alone[3]

    return _TOKEN.sub(swap, text) if mapping else text


class Speller:
    """SymSpell over its bundled English dictionary: loaded once (about a second), in the
    lifespan; ``respell`` is microseconds a word."""

    def __init__(self) -> None:
        from symspellpy import SymSpell  # type: ignore[import-untyped]

        self._sym = SymSpell(max_dictionary_edit_distance=1, prefix_length=7)
        source = resources.files("symspellpy") / DICTIONARY
        with resources.as_file(source) as path:
            if not self._sym.load_dictionary(str(path), term_index=0, count_index=1):
                raise OSError(f"symspellpy's dictionary is missing: {path}")
        self._words: dict[str, int] = self._sym.words

    def known(self, word: str) -> bool:
        return word in self._words

    def nearest(self, word: str) -> str | None:
        """The one dictionary word ``word`` is a slip of (``typo_of``), with its first letter;
        None when there is none, or more than one ("strng": string or strong)."""
        from symspellpy import Verbosity

        found = self._sym.lookup(word, Verbosity.ALL, max_edit_distance=1)
        slips = {str(s.term) for s in found if s.term[:1] == word[:1] and typo_of(word, s.term)}
        return slips.pop() if len(slips) == 1 else None

    def respell(self, text: str) -> Respelling | None:
        return respell(text, self.known, self.nearest)
