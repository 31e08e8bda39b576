"""Typos in the asked question, fixed for a second look at the cache (pure but for loading).

MiniLM reads a misspelt word as other word pieces: "how do i restrat my router" sits at
cosine 0.68 from "how do I restart my router", under the candidate floor, so no model is
ever asked about the pair. On a miss, the cache looks again with the question respelled
(``Matcher.decide_respelled``), against the English frequency dictionary symspellpy (MIT)
ships.

A fix is a guess, so it is narrow and checked:
- only lower-case words of at least four letters (or capitalised where a sentence starts),
  standing alone, that the dictionary does not know: names, acronyms, numbers, identifiers
  ("datasets.utils"), "k8s" and short words ("ur") are left as written;
- nor a word the embedder reads whole (one WordPiece token): "math", "cyber", "sulfate" and
  "centered" are missing from the dictionary but are words, and no typo of the contrast
  sets is one;
- only a slip of a typing hand: a letter left out, two neighbours swapped or a letter
  doubled ("restrat", "cofee", "grappes"), never another letter put in or in place of one,
  which is how real words the dictionary lacks differ from ones it has ("sharding" is not
  "sharing", "struct" not "struck");
- the fix keeps the first letter, where typos are rare ("async" is not "sync");
- of the words a typo could be a slip of, the most common in the dictionary's counts
  ("aply": apply, not aptly or amply; "stor": store, not story), as spellers rank them. A
  wrong guess finds no cached question with its word ("strng" read as "strong" beside "split
  a string"), so it costs a miss, never a wrong answer.

The second look reads both questions through the same fixes (``Respelling.read``), and
only from a cached question that has every fixed word or the same typo, so the decision
compares what was meant, with every check and model as for any question. An entry whose
question has typos is stored under its respelled vector, so a question asked without them
finds it in the first look.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tokenizers import Tokenizer

MIN_LETTERS = 4
DICTIONARY = "frequency_dictionary_en_82_765.txt"  # ships in the symspellpy wheel
# A word standing alone: only quotes and brackets before it, sentence punctuation after, so
# identifiers ("torch.utils.data", "iter_files", "`bool`") are never read as words.
_TOKEN = re.compile(r"\S+")
_ALONE = re.compile(r"([(\"'\u2018\u201c]*)([A-Za-z]+)([.,?!;:)\"'\u2019\u201d]*)")


def _alone_words(text: str) -> set[str]:
    """The words of ``text`` standing alone, in lower case."""
    return {a[2].lower() for t in _TOKEN.findall(text) if (a := _ALONE.fullmatch(t))}


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
        words = _alone_words(cached)
        return all(fixed in words or typo in words for typo, fixed in self.fixes)

    def read(self, cached: str, own: Respelling | None) -> str:
        """``cached`` read through the same fixes, so both questions are compared alike: a
        typo the two share is fixed in both ("json" read as "jason" on one side only would
        hide "convert json to yaml" / "convert yaml to json")."""
        return read_alike(cached, own, self.text, self.fixes)


def read_alike(
    cached: str, own: Respelling | None, asked: str, fixes: tuple[tuple[str, str], ...] = ()
) -> str:
    """``cached`` with ``fixes`` (the asked question's) and its own fixes (``own``) where
    ``asked`` has the fixed word: "how lnog to boil an egg" is read "how long ..." beside
    "how long to boil an egg", and as written beside anything else."""
    words = _alone_words(asked)
    mapping = dict(fixes)
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
        if not written[1:].islower() or (
            opens and text[: m.start()].rstrip()[-1:] not in ("", ".", "!", "?", ":")
        ):
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


def embedder_words(tokenizer_file: Path) -> list[str]:
    """The whole lower-case words of a WordPiece tokenizer's vocabulary (no "##" pieces, no
    "[CLS]"): words its training text used often enough to keep whole."""
    if not tokenizer_file.is_file():
        raise OSError(f"no embedder tokenizer at {tokenizer_file}")
    vocab = Tokenizer.from_file(str(tokenizer_file)).get_vocab()
    return [w for w in vocab if w.isascii() and w.isalpha() and w.islower()]


def _replaced(text: str, mapping: dict[str, str]) -> str:
    """``text`` with each word standing alone that ``mapping`` names (in lower case) replaced,
    a capital kept."""

    def swap(m: re.Match[str]) -> str:
        alone = _ALONE.fullmatch(m.group())
        if alone is None or (fixed := mapping.get(alone[2].lower())) is None:
            return m.group()
        written = alone[2]
        if written.isupper() and len(written) > 1:  # "JSON" read as "JASON"
            fixed = fixed.upper()
        elif written[0].isupper():
            fixed = fixed.capitalize()
        return alone[1] + fixed + alone[3]

    return _TOKEN.sub(swap, text) if mapping else text


class Speller:
    """The English frequency dictionary symspellpy ships, as a plain word -> count mapping:
    loaded once in the lifespan (tens of milliseconds); ``respell`` is tens of microseconds
    a misspelt word.

    Not symspellpy's ``SymSpell`` index: its precomputed deletes are about 400,000 Python
    objects the garbage collector walks, and each full collection then took 110 ms instead
    of 1.5 ms, a pause of the whole event loop. The slips ``typo_of`` allows are few enough
    to generate for each unknown word instead.
    """

    def __init__(self, also_known: Iterable[str] = ()) -> None:
        """``also_known``: more words that are never typos (``embedder_words``)."""
        source = resources.files("symspellpy") / DICTIONARY
        try:
            lines = source.read_text(encoding="utf-8").splitlines()
        except (FileNotFoundError, ModuleNotFoundError) as exc:
            raise OSError(f"symspellpy's dictionary is missing: {exc}") from exc
        # A dict of str to int is not tracked by the garbage collector.
        self._counts = {w: int(c) for w, _, c in (line.partition(" ") for line in lines if line)}
        self._also_known = frozenset(also_known)

    def known(self, word: str) -> bool:
        return word in self._counts or word in self._also_known

    def nearest(self, word: str) -> str | None:
        """The most common dictionary word ``word`` is a slip of (``typo_of``), with its first
        letter ("aply": apply, over aptly and amply); None when there is none."""
        n = len(word)
        letters = "abcdefghijklmnopqrstuvwxyz'"  # "dont" is "don't" with one left out
        left_out = {word[:i] + c + word[i:] for i in range(1, n + 1) for c in letters}
        swapped = {word[:i] + word[i + 1] + word[i] + word[i + 2 :] for i in range(1, n - 1)}
        doubled = {word[:i] + word[i + 1 :] for i in range(1, n) if word[i] == word[i - 1]}
        counts = self._counts
        slips = [w for w in left_out | swapped | doubled if w != word and w in counts]
        return max(slips, key=lambda w: (counts[w], w), default=None)

    @functools.lru_cache(maxsize=4096)  # noqa: B019  # one Speller per edge, for its life
    def respell(self, text: str) -> Respelling | None:
        """Memoised: the first look reads each candidate's question through its fixes."""
        return respell(text, self.known, self.nearest)
