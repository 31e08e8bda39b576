"""Hard-pair rules that draw their substitutes from the training questions themselves (pure).

A fixed list teaches the models the words on the list; what the corpus sets side by side
teaches them the shape. ``Corpus.of`` reads the training questions once for:

- **names**: capitalised words inside questions ("What is the capital of France?");
- **siblings**: words the questions themselves weigh against each other ("Python or
  Ruby?", "MySQL vs PostgreSQL?"): a question about one is not about the other;
- **scopes**: trailing qualifiers many questions end with ("... in India?", "... for
  beginners?"): the same question with one added asks something narrower.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

WORD = re.compile(r"[A-Za-z']+")  # a word, for the generator's rules too
# "MySQL vs PostgreSQL?", "between TCP and UDP", "Which is better, Python or Ruby?"
_THING = r"(?:an? |the )?([A-Za-z][\w+#]*(?:\.\w+)?)"
_SIDE_BY_SIDE = (
    re.compile(rf"\b{_THING} (?:vs\.?|versus) {_THING}\b", re.IGNORECASE),
    re.compile(rf"\bbetween {_THING} and {_THING}\s*[?,]", re.IGNORECASE),
    re.compile(
        rf"\b(?:which|better|best|prefer|choose|should i)\b[^?]*?[ ,]{_THING} or {_THING}\s*\?",
        re.IGNORECASE,
    ),
)
# "... in India?", "... for beginners?", "... without a degree?"
_SCOPE = re.compile(
    r"\s((?:in|on|for|during|after|before|without|with|under|at|while|as|using) "
    r"[\w'+#-]+(?: [\w'+#-]+){0,2})\s*\?$"
)
_NOT_SCOPE = re.compile(r"\b(?:and|or|why|how|what|it|this|that|them|me|you)\b", re.IGNORECASE)
# A name and a version ("iPhone 7", "Windows 10", "PS4", "GTX 1080"): its siblings differ by one.
_VERSIONED = re.compile(r"\b([A-Za-z]*[A-Z][A-Za-z]*)( ?|-)(\d{1,4})\b(?!\.\d)")
_NOT_SIBLINGS = frozenset(
    "not no yes it this that these those them there here what which who why how when where "
    "in on at of for to from with by about into off up down out over under "
    "i you we they he she me my your so and or nor both either neither other others else "
    "more less better worse both same different wrong right true false later now".split()
)


@dataclass(frozen=True)
class Corpus:
    """What the training questions offer as substitutes (sorted, so a seed reproduces)."""

    names: list[str] = field(default_factory=list)
    siblings: dict[str, list[str]] = field(default_factory=dict)
    scopes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, texts: Iterable[str], min_count: int = 5) -> Corpus:
        names: Counter[str] = Counter()
        pairs: Counter[tuple[str, str]] = Counter()
        scopes: Counter[str] = Counter()
        for t in texts:
            words = WORD.findall(t)
            names.update(w for w in words[1:] if w[:1].isupper() and w != "I" and len(w) > 2)
            for pattern in _SIDE_BY_SIDE:
                for m in pattern.finditer(t):
                    a, b = m.group(1), m.group(2)
                    if a.lower() != b.lower() and not {a.lower(), b.lower()} & _NOT_SIBLINGS:
                        pairs[(a, b)] += 1
            if (end := _SCOPE.search(t)) and not _NOT_SCOPE.search(end.group(1)):
                scopes[end.group(1).lower()] += 1
        siblings: dict[str, set[str]] = {}
        for (a, b), n in pairs.items():
            if n >= 2 and len(a) > 1 and len(b) > 1:
                siblings.setdefault(a.lower(), set()).add(b)
                siblings.setdefault(b.lower(), set()).add(a)
        return cls(
            names=sorted(w for w, n in names.items() if n >= min_count),
            siblings={k: sorted(v) for k, v in sorted(siblings.items())},
            scopes=sorted(s for s, n in scopes.items() if n >= min_count),
        )


def case_like(word: str, model: str) -> str:
    """``word`` in the case of the word it replaces ("Sender" -> "Recipient")."""
    if model.isupper() and len(model) > 1:
        return word.upper()
    return word[:1].upper() + word[1:] if model[:1].isupper() else word


def starts_sentence(text: str, i: int) -> bool:
    """Does the word at ``i`` begin a sentence (the text's first, or after . ? ! :)?"""
    return i == 0 or re.search(r"[.?!:]\s*$|^\s*$", text[:i]) is not None


def entity(text: str, rng: random.Random, names: list[str]) -> str | None:
    """A capitalised word inside a sentence (not its first) replaced by another name."""
    spots = [
        m for m in WORD.finditer(text)
        if m.group()[:1].isupper() and m.group() != "I" and not starts_sentence(text, m.start())
    ]  # fmt: skip
    if not spots or not names:
        return None
    m = rng.choice(spots)
    new = rng.choice(names)
    if new.lower() == m.group().lower():
        return None
    return text[: m.start()] + new + text[m.end() :]


def sibling(text: str, rng: random.Random, corpus: Corpus) -> str | None:
    """One of two things the corpus weighs against each other replaced by the other
    ("Galaxy S23 battery life" / "Galaxy S24 battery life"; "inner join" / "outer join")."""
    lower = text.lower()
    spots = [
        m for m in re.finditer(r"[\w+#]+(?:\.\w+)?", text)
        if m.group().lower() in corpus.siblings
    ]  # fmt: skip
    options = [
        (m, s) for m in spots for s in corpus.siblings[m.group().lower()]
        if not re.search(rf"(?<![\w+#]){re.escape(s.lower())}(?![\w+#])", lower)
    ]  # fmt: skip
    if options:
        m, new = rng.choice(options)
        return text[: m.start()] + new + text[m.end() :]
    versions = list(_VERSIONED.finditer(text))
    if not versions:
        return None
    m = rng.choice(versions)
    n = int(m.group(3))
    other = n + 1 if n <= 1 or rng.random() < 0.5 else n - 1
    return text[: m.start(3)] + str(other) + text[m.end(3) :]


def scope(text: str, rng: random.Random, scopes: list[str]) -> str | None:
    """A trailing qualifier from the corpus added to a question that has none."""
    stripped = text.rstrip()
    if not scopes or not stripped.endswith("?") or _SCOPE.search(stripped) or len(stripped) > 120:
        return None
    return f"{stripped[:-1].rstrip()} {rng.choice(scopes)}?"
