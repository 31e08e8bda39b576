"""The question inside a message: what the asker wrapped around it cut off (pure).

"my son asked me at dinner and I had no clue - what year did the titanic sink?", "hi!
quick question: can you freeze milk?", "how do I boil an egg? I'm at 9000 ft btw": the
question is one sentence of the message, and the rest (a greeting, a story, a sign-off)
moves its embedding far from the same question asked plainly (cosine 0.69-0.84 on the
blind sets' preambles, under the candidate floor). ``question_of`` finds that sentence, so
the cache can look for the plain question too. It only finds where the question is; it
does not judge whether the rest matters ("I'm pregnant. is it safe to eat sushi?"): the
matcher's cross-encoder reads the whole message for that (``Matcher.decide_in_context``).
"""

from __future__ import annotations

import re

from shared.lexicon import QUESTION_WORDS

# Where a message breaks into sentences or asides: after ! or ?, after a full stop that
# ends a word of two letters or more ("U.S." and "e.g." do not end a sentence), at "...",
# a colon, or a dash set off by spaces. A comma breaks only in the last resort
# (``_after_comma``).
_BREAK = re.compile(r"(?<=[!?])\s+|(?<=[^\W_]{2}\.)\s+|\.{3}\s*|:\s+|\s+[-\u2013\u2014]{1,2}\s+")
# A sign-off after the question: thanks, an apology for asking, a laugh.
_SIGN_OFF = re.compile(
    r"(?:thanks?|thank\s+you|thx|ty|cheers|appreciate\s+(?:it|any\s+help|the\s+help)|"
    r"any\s+help\s+(?:is\s+)?appreciated|lol|haha|please(?:\s+help)?)"
    r"(?:\s+(?:so\s+much|in\s+advance|a\s+lot|all|guys|everyone))*[\s.!]*",
    re.IGNORECASE,
)
# Words that open a question or a request for one ("tips for ...", "best way to ...").
_OPENERS = QUESTION_WORDS | frozenset("any tips ways best good ideas".split())
_SHORTEST = 3  # words: "why?" or "any tips?" alone asks nothing to look up
_FIRST_WORD = re.compile(r"[a-z]+")  # "what's": "what"


def question_of(text: str) -> str | None:
    """The one sentence of ``text`` that asks, with whatever surrounds it cut off; None
    when nothing surrounds it or no single sentence can be told to be the question."""
    parts = [p.strip() for p in _BREAK.split(text.strip()) if p and p.strip()]
    while len(parts) > 1 and _SIGN_OFF.fullmatch(parts[-1]):
        parts.pop()
    asking = [p for p in parts if p.endswith("?")]
    if len(parts) == 1:
        found = _after_comma(parts[0]) or parts[0]
    elif len(asking) == 1:
        found = asking[0]
    elif not asking:  # no question mark: the last sentence that opens as a question
        found = next((p for p in reversed(parts) if _opens(p)), "")
    else:
        return None  # several questions: which one is cached is not ours to pick
    found = _after_comma(found) or found
    asks = found.endswith("?") or _opens(found)
    if found == text.strip() or not asks or len(found.split()) < _SHORTEST:
        return None
    return found


def _after_comma(text: str) -> str | None:
    """In one sentence, the clause after its last comma when that clause opens a question
    and what comes before it does not ("baking with the kids and the cup broke, how many
    tablespoons are in a cup")."""
    head, comma, tail = text.rpartition(",")
    tail = tail.strip()
    if not comma or not _opens(tail) or _opens(head.strip()):
        return None
    return tail


def _opens(sentence: str) -> bool:
    first = _FIRST_WORD.match(sentence.lower())
    return first is not None and first.group() in _OPENERS
