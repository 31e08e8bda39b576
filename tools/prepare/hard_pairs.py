"""Hard training pairs for the cache's pair models, generated from training questions (pure).

QQP's negatives are related questions, rarely a question and its opposite, so a model
trained on it alone learns that "convert A to B" and "convert B to A" are the same
question (cosine 0.98, one word apart). These rules rewrite one training question into:

- **hard negatives** (label 0): polarity words swapped for their opposites (enable/disable,
  import/export, ascending/descending, ...), the arguments of a direction ("from A to B")
  or of a comparison ("A faster than B") swapped, a negation added or removed, a number or
  unit changed, a named entity replaced by another from the corpus, a condition added;
- **hard positives** (label 1): contractions spelled out or made, safe synonyms, a trailing
  qualifier moved to the front ("in Python, how do I ..."), surface noise (case, "please").

A rule that does not apply to a question yields nothing, so every pair really differs in
its kind. Only training questions are rewritten (``pair_split``), and the contrast dev set
in ``tests/data`` is hand-written, so neither evaluation sees a generated pair.
Dependency-free: runs in the preparation environment as well as in edgecore's.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Iterable

# Opposites, each word usable either way; inflections listed where they are common.
OPPOSITES = (
    ("enable", "disable"), ("enabled", "disabled"), ("increase", "decrease"),
    ("increased", "decreased"), ("import", "export"), ("upload", "download"),
    ("encrypt", "decrypt"), ("before", "after"), ("min", "max"), ("minimum", "maximum"),
    ("buy", "sell"), ("buying", "selling"), ("safe", "unsafe"), ("good", "bad"),
    ("turn on", "turn off"), ("switch on", "switch off"), ("log in", "log out"),
    ("sign in", "sign out"), ("easy", "difficult"),
    ("best", "worst"), ("ascending", "descending"), ("add", "remove"), ("install", "uninstall"),
    ("connect", "disconnect"), ("open", "close"), ("start", "stop"), ("win", "lose"),
    ("gain", "lose"), ("more", "less"), ("higher", "lower"), ("faster", "slower"),
    ("bigger", "smaller"), ("cheap", "expensive"), ("positive", "negative"),
    ("legal", "illegal"), ("possible", "impossible"), ("true", "false"), ("hot", "cold"),
    ("above", "below"), ("inside", "outside"), ("input", "output"), ("push", "pull"),
    ("send", "receive"), ("lend", "borrow"), ("male", "female"), ("men", "women"),
    ("rich", "poor"), ("love", "hate"), ("first", "last"), ("early", "late"),
    ("long", "short"), ("strong", "weak"), ("advantages", "disadvantages"),
    ("pros", "cons"), ("happy", "sad"), ("success", "failure"), ("agree", "disagree"),
    ("north", "south"), ("east", "west"),
    ("old", "young"), ("increase", "reduce"), ("accept", "reject"),
    ("allow", "block"), ("lock", "unlock"), ("encode", "decode"), ("compress", "decompress"),
    ("mount", "unmount"), ("subscribe", "unsubscribe"), ("follow", "unfollow"),
    ("block", "unblock"), ("hide", "show"), ("hidden", "visible"), ("public", "private"),
    ("success", "failure"), ("healthy", "unhealthy"), ("internal", "external"),
    ("maximize", "minimize"), ("overestimate", "underestimate"), ("hire", "fire"),
    ("expand", "collapse"), ("pause", "resume"), ("attack", "defend"), ("arrive", "depart"),
    ("import", "export"), ("inhale", "exhale"), ("ancient", "modern"), ("wet", "dry"),
)  # fmt: skip

# Words of one meaning in a question; either way round.
SYNONYMS = (
    ("how do i", "how can i"), ("how do you", "how can you"), ("buy", "purchase"),
    ("big", "large"), ("begin", "start"), ("fix", "repair"), ("movie", "film"),
    ("movies", "films"), ("kids", "children"), ("photo", "picture"), ("photos", "pictures"),
    ("choose", "pick"), ("quickly", "fast"), ("help", "assist"), ("car", "automobile"),
    ("what are some", "what are"), ("is it possible to", "can i"), ("ways", "methods"),
    ("tips", "advice"), ("job", "occupation"), ("smart", "intelligent"), ("shut", "close"),
    ("a lot of", "many"), ("idea", "notion"), ("simple", "easy"), ("get rid of", "remove"),
    ("rapidly", "quickly"), ("mistake", "error"), ("mistakes", "errors"),
)  # fmt: skip
CONTRACTIONS = (
    ("do not", "don't"), ("does not", "doesn't"), ("did not", "didn't"), ("is not", "isn't"),
    ("are not", "aren't"), ("can not", "can't"), ("cannot", "can't"), ("will not", "won't"),
    ("should not", "shouldn't"), ("what is", "what's"), ("it is", "it's"), ("i am", "i'm"),
    ("who is", "who's"), ("there is", "there's"), ("that is", "that's"), ("i have", "i've"),
)  # fmt: skip
UNITS = (
    ("km", "miles"), ("kilometers", "miles"), ("kg", "pounds"), ("kilograms", "pounds"),
    ("celsius", "fahrenheit"), ("hours", "minutes"), ("days", "weeks"), ("weeks", "months"),
    ("months", "years"), ("dollars", "euros"), ("meters", "feet"), ("liters", "gallons"),
    ("gb", "mb"), ("inches", "centimeters"), ("rupees", "dollars"),
)  # fmt: skip
_UNIT: dict[str, str] = {}
for _a, _b in UNITS:
    _UNIT.setdefault(_a, _b)
    _UNIT.setdefault(_b, _a)
CONDITIONS = (
    " without a computer", " if I have diabetes", " in winter", " for free", " on Linux",
    " on a Mac", " without losing data", " if I am under 18", " while pregnant",
    " after surgery", " in less than a week", " with no experience", " as a foreigner",
    " on a budget", " without a degree", " if I am over 60", " at night", " in India",
    " without internet", " using only a phone",
)  # fmt: skip
_NEGATED = re.compile(
    r"\b(do|does|did|is|are|was|were|could|should|would|has|have)n't\b|\bcan't\b|\bwon't\b"
    r"|\b(can|do|does|did|is|are|should|would|will)\s+not\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z']+")
_NUMBER = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\w.,]*\d)")
# "from A to B" where B ends the clause and A is no gerund: "from trying to commit suicide"
# is no direction.
_ARG = r"(?:(?:the|a|an|my|your) )?(?!to\b|[a-z]+ing\b)[\w'+#.-]+(?: (?!to\b)[\w'+#.-]+)?"
_DIRECTION = re.compile(
    rf"\bfrom ({_ARG}) (to|into) ({_ARG})(?=\s*(?:[?.,!;]|$|(?:in|on|for|with|without|using|"
    r"by|at|via|and|or|if|when)\b))"
)
_MOVE = re.compile(
    r"\b(convert|converting|translate|translating|transfer|transferring|migrate|migrating|"
    rf"switch|switching|port|porting|change|changing) ({_ARG}) (to|into) ({_ARG})"
    r"(?=\s*(?:[?.,!;]|$|(?:in|on|for|with|without|using|by|at|via|and|or|if|when)\b))",
    re.IGNORECASE,
)
# "Is A faster than B?", "Are cakes better than ice creams?": arguments up to two words.
_COMPARE = re.compile(
    r"\b(is|are|was|were) ((?:an? |the )?[\w+#.-]+(?: [\w+#.-]+)?) (\w+er|more \w+|less \w+|"
    r"better|worse) than ((?:an? |the )?[\w+#.-]+(?: [\w+#.-]+)?)(?=\s*[?.,!]|$)",
    re.IGNORECASE,
)
_TRAILING = re.compile(r"^(.{12,}?) (in|on|using|for) ([A-Z][\w+#.-]*(?: \d+)?)\s*\?$")
# Auxiliaries a yes/no or "why" question starts with: negating them flips what is asked.
_LEADING_AUX = re.compile(
    r"^((?:why|how come)\s+)?(do|does|did|is|are|was|were|can|could|should|would|will|has|have)\b",
    re.IGNORECASE,
)
_NOT_COMPARATIVE = frozenset("other rather whether never ever either neither order under".split())
_STOPWORDS = frozenset("it this that there them they what which who i you we he she".split())


def _case_like(word: str, model: str) -> str:
    if model.isupper() and len(model) > 1:
        return word.upper()
    return word[:1].upper() + word[1:] if model[:1].isupper() else word


def _swap_word(text: str, table: dict[str, str], rng: random.Random) -> str | None:
    spots = [m for m in _WORD.finditer(text) if m.group().lower() in table]
    if not spots:
        return None
    m = rng.choice(spots)
    new = _case_like(table[m.group().lower()], m.group())
    return text[: m.start()] + new + text[m.end() :]


def polarity(text: str, rng: random.Random) -> str | None:
    return _phrase_swap(text, OPPOSITES, rng)


def direction(text: str, rng: random.Random) -> str | None:
    m = _DIRECTION.search(text)
    if m and m.group(1).lower() != m.group(3).lower():
        return text[: m.start()] + f"from {m.group(3)} {m.group(2)} {m.group(1)}" + text[m.end() :]
    m = _MOVE.search(text)
    if m and m.group(2).lower() != m.group(4).lower():
        swapped = f"{m.group(1)} {m.group(4)} {m.group(3)} {m.group(2)}"
        return text[: m.start()] + swapped + text[m.end() :]
    return None


def comparison(text: str, rng: random.Random) -> str | None:
    m = _COMPARE.search(text)
    if not m or m.group(2).lower() == m.group(4).lower():
        return None
    if {m.group(2).lower(), m.group(4).lower()} & _STOPWORDS:
        return None
    if m.group(3).split()[-1].lower() in _NOT_COMPARATIVE:
        return None
    swapped = f"{m.group(1)} {m.group(4)} {m.group(3)} than {m.group(2)}"
    return text[: m.start()] + swapped + text[m.end() :]


def negation(text: str, rng: random.Random) -> str | None:
    """Remove a negation where there is one, else negate a leading auxiliary verb."""
    m = _NEGATED.search(text)
    if m:
        word = m.group()
        plain = {"can't": "can", "won't": "will"}.get(word.lower())
        if plain is None:
            plain = re.sub(r"(n't|\s+not)$", "", word, flags=re.IGNORECASE)
        return text[: m.start()] + _case_like(plain, word) + text[m.end() :]
    m = _LEADING_AUX.match(text.strip())
    if not m:
        return None
    text = text.strip()
    word = m.group(2)
    negated = {"can": "can't", "will": "won't"}.get(word.lower(), word.lower() + "n't")
    return text[: m.start(2)] + _case_like(negated, word) + text[m.end(2) :]


def number(text: str, rng: random.Random) -> str | None:
    spots = list(_NUMBER.finditer(text))
    if spots:
        m = rng.choice(spots)
        value = float(m.group().replace(",", ""))
        if 1900 <= value <= 2100 and value.is_integer():  # a year: another year
            new = value + rng.choice((-3, -2, -1, 1, 2, 3))
        else:
            new = value * rng.choice((2, 3, 10)) if value else rng.randint(1, 9)
        shown = str(int(new)) if float(new).is_integer() else f"{new:g}"
        return text[: m.start()] + shown + text[m.end() :]
    return _swap_word(text, _UNIT, rng)


def entity(text: str, rng: random.Random, names: list[str]) -> str | None:
    """A capitalised word inside a sentence (not its first) replaced by another name."""
    spots = [
        m for m in _WORD.finditer(text)
        if m.group()[:1].isupper() and m.group() != "I" and m.start() > 0
        and not re.search(r"[.?!:]\s*$|^\s*$", text[: m.start()])
    ]  # fmt: skip
    if not spots or not names:
        return None
    m = rng.choice(spots)
    new = rng.choice(names)
    if new.lower() == m.group().lower():
        return None
    return text[: m.start()] + new + text[m.end() :]


def condition(text: str, rng: random.Random) -> str | None:
    stripped = text.rstrip()
    if not stripped.endswith("?") or len(stripped) > 120:
        return None
    return stripped[:-1].rstrip() + rng.choice(CONDITIONS) + "?"


def _phrase_swap(text: str, pairs: Iterable[tuple[str, str]], rng: random.Random) -> str | None:
    lower = text.lower()
    options = []
    for a, b in pairs:
        for x, y in ((a, b), (b, a)):
            for m in re.finditer(rf"(?<![\w']){re.escape(x)}(?![\w'])", lower):
                options.append((m.start(), m.end(), y))
    if not options:
        return None
    start, end, new = rng.choice(options)
    return text[:start] + _case_like(new, text[start:end]) + text[end:]


def contraction(text: str, rng: random.Random) -> str | None:
    return _phrase_swap(text, CONTRACTIONS, rng)


def synonym(text: str, rng: random.Random) -> str | None:
    return _phrase_swap(text, SYNONYMS, rng)


def reorder(text: str, rng: random.Random) -> str | None:
    """'How do I sort a list in Python?' -> 'In Python, how do I sort a list?'"""
    m = _TRAILING.match(text.strip())
    if not m or m.group(1).split()[0].lower() not in ("how", "what", "which", "why", "where"):
        return None
    head = m.group(1)
    return f"{m.group(2).capitalize()} {m.group(3)}, {head[0].lower()}{head[1:]}?"


def surface(text: str, rng: random.Random) -> str | None:
    choice = rng.randrange(3)
    if choice == 0:
        return text.lower().rstrip("?").rstrip() if text != text.lower() else None
    if choice == 1:
        return "Please, " + text[0].lower() + text[1:] if text[:1].isupper() else None
    return text.rstrip("?").rstrip() + " please?" if text.rstrip().endswith("?") else None


Rule = Callable[[str, random.Random], "str | None"]
NEGATIVE_RULES: dict[str, Rule] = {
    "polarity": polarity,
    "direction": direction,
    "comparison": comparison,
    "negation": negation,
    "number": number,
    "condition": condition,
}
POSITIVE_RULES: dict[str, Rule] = {
    "contraction": contraction,
    "synonym": synonym,
    "reorder": reorder,
    "surface": surface,
}


def corpus_names(texts: Iterable[str], min_count: int = 5) -> list[str]:
    """Capitalised words seen inside questions (not first), at least ``min_count`` times."""
    seen: Counter[str] = Counter()
    for t in texts:
        words = _WORD.findall(t)
        seen.update(w for w in words[1:] if w[:1].isupper() and w != "I" and len(w) > 2)
    return sorted(w for w, n in seen.items() if n >= min_count)


def generate(texts: Iterable[str], per_kind: int, seed: int = 0) -> list[tuple[str, str, int, str]]:
    """Up to ``per_kind`` (question, rewrite, label, kind) for each rule, reproducibly."""
    rng = random.Random(seed)
    pool = sorted(set(texts))
    rng.shuffle(pool)
    names = corpus_names(pool)
    rules: list[tuple[str, Rule, int]] = [(k, r, 0) for k, r in NEGATIVE_RULES.items()]
    rules += [(k, r, 1) for k, r in POSITIVE_RULES.items()]
    rules.append(("entity", lambda t, g: entity(t, g, names), 0))
    out: list[tuple[str, str, int, str]] = []
    for kind, rule, label in rules:
        made = 0
        for text in pool:
            if made >= per_kind:
                break
            new = rule(text, rng)
            if new and new.strip() and new != text:
                out.append((text, new, label, kind))
                made += 1
    return out
