"""One question with an abbreviation, the other with the words it stands for (pure).

"what does the CPU do" / "what does the central processing unit do", "is an MBA worth it" /
"is a Master of Business Administration worth it", "k8s" / "kubernetes": the bi-encoder
puts many such pairs far apart (cosine 0.62 for the CPU pair), and no word table can list
every abbreviation users type. So none is listed: an abbreviation is read from its letters.

- An **initialism** is a word of 2-6 capitals as written ("CPU", "FAFSA"; not "it" or "us",
  which are words), or of 2-6 lower-case letters none of them a vowel or "y" ("tcp", "vpn",
  "npm": no English word is spelled so; "nyc" is not read). It stands for a run of words in
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

import re

from edge.cache.pair_checks import SMALL_WORDS, spelled_out, word_parts
from shared.lexicon import NUMBER_WORDS, cased_words

# Capitals, or lower case with no vowel (no word is spelled so: "tcp", "vpn", "npm"), and
# a number the words it spells are followed by ("WW2").
_INITIALISM = re.compile(r"(?:[A-Z]{2,6}|[b-df-hj-np-tv-xz]{2,6})(\d{0,2})")
_NUMERONYM = re.compile(r"([a-z])(\d{1,2})([a-z])")


def abbreviated_as(cached: str, asked: str) -> str | None:
    """``asked`` with each abbreviation it shares with ``cached`` (one side short, the other
    spelled out) written as ``cached`` writes it; None when there is none."""
    view = asked
    theirs, ours = _abbreviations(cached), _abbreviations(asked)
    for short in theirs:
        if short not in ours and (run := _spelled(short, view, cached)) is not None:
            view = view[: run[0]] + short + view[run[1] :]
    for short in _abbreviations(view) if ours else ():
        if short not in theirs and (run := _spelled(short, cached, view)) is not None:
            view = re.sub(rf"\b{re.escape(short)}\b", cached[run[0] : run[1]], view, count=1)
    return None if view == asked else view


def _abbreviations(text: str) -> list[str]:
    return [
        w
        for _, w in cased_words(text)
        if _INITIALISM.fullmatch(w) or ((m := _NUMERONYM.fullmatch(w)) and int(m[2]) >= 3)
    ]


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
