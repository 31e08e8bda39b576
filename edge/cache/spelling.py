"""Typos in the asked question, fixed for a second look at the cache (pure but for loading).

MiniLM reads a misspelt word as other word pieces: "how do i restrat my router" sits at
cosine 0.68 from "how do I restart my router", under the candidate floor, so no model is
ever asked about the pair. On a miss, the cache looks again with the question respelled
(``Matcher.decide_respelled``): SymSpell (symspellpy, MIT) with the English frequency
dictionary it ships, one edit away (a transposition is one edit).

A fix is a guess, so it is narrow and checked:
- only lower-case words of at least four letters that the dictionary does not know: names,
  acronyms, numbers, "k8s" and short words ("ur") are left as written;
- the fix keeps the first letter, where typos are rare: "async" is not "sync", "numpy" is
  not "bumpy";
- the most frequent word one edit away; none, no fix.

The fixed question only finds neighbours and stands in for the asked one's vector: the
decision still reads the question as asked (the cross-encoder sees "restrat"), and only
from a cached question that has every fixed word.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

MIN_LETTERS = 4
DICTIONARY = "frequency_dictionary_en_82_765.txt"  # ships in the symspellpy wheel
_WORD = re.compile(r"[A-Za-z0-9'\u2019]+")


@dataclass(frozen=True)
class Respelling:
    """The asked question with its typos fixed, and which words were put in."""

    text: str
    fixes: tuple[tuple[str, str], ...]  # (as written, as fixed)

    def confirmed_by(self, cached: str) -> bool:
        """Whether the cached question has every fixed word: the guess, seen in its text."""
        words = {w.lower() for w in _WORD.findall(cached)}
        return all(fixed in words for _, fixed in self.fixes)


def respell(
    text: str, known: Callable[[str], bool], nearest: Callable[[str], str | None]
) -> Respelling | None:
    """``text`` with each unknown lower-case word of ``MIN_LETTERS`` or more replaced by
    ``nearest(word)`` when that keeps its first letter; None when nothing was fixed."""
    fixes: list[tuple[str, str]] = []

    def fix(m: re.Match[str]) -> str:
        word = m.group()
        if len(word) < MIN_LETTERS or not (word.isascii() and word.isalpha() and word.islower()):
            return word
        if known(word):
            return word
        fixed = nearest(word)
        if not fixed or fixed == word or fixed[0] != word[0]:
            return word
        fixes.append((word, fixed))
        return fixed

    respelled = _WORD.sub(fix, text)
    return Respelling(respelled, tuple(fixes)) if fixes else None


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
        """The most frequent dictionary word one edit from ``word``."""
        from symspellpy import Verbosity

        found = self._sym.lookup(word, Verbosity.TOP, max_edit_distance=1)
        return str(found[0].term) if found else None

    def respell(self, text: str) -> Respelling | None:
        return respell(text, self.known, self.nearest)
