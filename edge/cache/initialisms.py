"""One question with an abbreviation, the other with the words it stands for (pure).

"what does the CPU do" / "what does the central processing unit do", "is an MBA worth it" /
"is a Master of Business Administration worth it", "k8s" / "kubernetes": the bi-encoder
puts many such pairs far apart (cosine 0.62 for the CPU pair), and no word table can list
every abbreviation users type. So none is listed: an abbreviation is read from its letters.

- An **initialism** is a word of 2-6 capitals as written ("CPU", "FAFSA"; not "it" or "us",
  which are words), of 2-6 lower-case letters none of them a vowel or "y" ("tcp", "vpn",
  "npm": no English word is spelled so), or any lower-case word of 3-5 letters ("gpa", "fbi",
  "asap") where the other question has a run of words that spells it; the rest of the
  question must then still be the same, word for word. It stands for a run of words in
  the other question whose first letters spell it (``pair_checks.spelled_out``, which the
  names check reads too: small words counted or skipped, a hyphen or a compound's capitals
  splitting a word: "post-traumatic stress disorder", "JavaScript" for "JS"). The run may
  not use a word of the abbreviating question itself: "What is the best laptop for an IT
  student?" has its own "is" and "the", so "... laptop for a student" spells no "IT".
- An initialism may end in a **number**, which then follows the words it spells ("WW2" /
  "World War 2" or "world war two", "PS5" / "PlayStation 5"); another number is another
  thing ("WW1").
- A **numeronym** is a first letter, the number of letters left out (3 or more) and a last
  letter ("k8s" for "kubernetes", "i18n" for "internationalization").

``abbreviated_as`` writes the asked question with the cached question's form of each such
abbreviation; the matcher then asks whether that is the cached question reworded, so every
other word, number, mark and negation must still agree.
"""

from __future__ import annotations

import functools
import re

from edge.cache.pair_checks import SMALL_WORDS, spelled_out, word_parts
from shared.lexicon import NUMBER_WORDS, cased_words

# Capitals, or lower case with no vowel (no word is spelled so: "tcp", "vpn", "npm"), and
# a number the words it spells are followed by ("WW2").
_INITIALISM = re.compile(r"(?:[A-Z]{2,6}|[b-df-hj-np-tv-xz]{2,6})(\d{0,2})")
_NUMERONYM = re.compile(r"([a-z])(\d{1,2})([a-z])")
# Any lower-case word of 3-5 letters may be an initialism ("gpa", "fbi", "roi"): read as one
# only where the other question spells it out, the rest of the question the same.
_LOWER = re.compile(r"[a-z]{3,5}")


def abbreviated_as(cached: str, asked: str) -> str | None:
    """``asked`` with each abbreviation it shares with ``cached`` (one side short, the other
    spelled out) written as ``cached`` writes it; None when there is none."""
    view = asked
    theirs, ours = _abbreviations(cached, asked), _abbreviations(asked, cached)
    for short in theirs:
        if short not in ours and (run := _spelled(short, view, cached)) is not None:
            view = view[: run[0]] + short + view[run[1] :]
    for short in _abbreviations(view, cached) if ours else ():
        if short not in theirs and (run := _spelled(short, cached, view)) is not None:
            view = re.sub(rf"\b{re.escape(short)}\b", cached[run[0] : run[1]], view, count=1)
    return None if view == asked else view


def _abbreviations(text: str, other: str) -> list[str]:
    """``text``'s abbreviations; a lower-case word only where ``other`` has a run of words
    whose first letters spell it (most words have none: skipped cheaply)."""
    initials: tuple[str, str] | None = None
    out = []
    for _, w in cased_words(text):
        if _INITIALISM.fullmatch(w) or ((m := _NUMERONYM.fullmatch(w)) and int(m[2]) >= 3):
            out.append(w)
        elif _LOWER.fullmatch(w):
            initials = initials or _initials(other)
            if w in initials[0] or w in initials[1]:
                out.append(w)
    return out


@functools.lru_cache(maxsize=4096)  # a lookup's question beside each of its neighbours
def _initials(text: str) -> tuple[str, str]:
    """The first letters of ``text``'s words, with and without its small words: a run that
    spells an initialism (``spelled_out``) is a stretch of one of them."""
    parts = [part for _, _, part in word_parts(text)]
    return "".join(p[0] for p in parts), "".join(p[0] for p in parts if p not in SMALL_WORDS)


def _spelled(short: str, text: str, own_text: str) -> tuple[int, int] | None:
    """The span of ``text`` that spells ``short`` out (``own_text``: where ``short`` is
    written; the run may not use its words), or None."""
    own = {w.lower() for _, w in cased_words(own_text)}
    parts = word_parts(text)
    if (m := _NUMERONYM.fullmatch(short)) is not None:
        first, gap, last = m[1], int(m[2]), m[3]
        for start, end, w in parts:
            if len(w) == gap + 2 and w[0] == first and w[-1] == last and w not in own:
                return start, end
        return None
    letters = short.rstrip("0123456789")
    number = short[len(letters) :]
    run = sorted(spelled_out(letters.lower(), [w for _, _, w in parts]))
    if not run or any(parts[i][2] in own for i in run if parts[i][2] not in SMALL_WORDS):
        return None
    end = run[-1]
    if number:
        after = parts[end + 1][2] if end + 1 < len(parts) else ""
        if number not in (after, NUMBER_WORDS.get(after)):
            return None
        end += 1
    return parts[run[0]][0], parts[end][1]
