"""Cheap text checks on a (cached, asked) question pair: pure, no models.

Two kinds. ``lexical_features`` are symmetric inputs to the verifier's MLP (question word,
negation, numbers, names, content-word overlap): a bi-encoder is known to miss them, and the
MLP learns from QQP how much each matters. ``told_apart_by`` is a directional veto applied after
the MLP, for what QQP's symmetric labels taught it to ignore: a new question that names
something the cached one does not, asks more questions than it, asks for the opposite, or
negates it.
A cached answer may cover more than is asked, never something else or less
(``bench.cache_audit``: blind readers call such answers wrong, QQP calls most of the first
two kinds duplicates).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

LEXICAL = (
    "cosine",
    "exact",
    "qword_differs",
    "negation_differs",
    "numbers_differ",
    "names_differ",
    "content_jaccard",
    "content_only_a",
    "content_only_b",
    "length_ratio",
)

_TOKEN = re.compile(r"[A-Za-z0-9']+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_QWORDS = frozenset(
    "what why how when where who whom whose which is are was were can could do does did "
    "should would will shall may might".split()
)
_NEGATIONS = frozenset(
    "not no never none nobody nothing neither nor without cannot can't don't doesn't didn't "
    "isn't aren't wasn't weren't won't wouldn't shouldn't couldn't hasn't haven't".split()
)
_STOP = frozenset(
    "a an the of to in on at for from by with and or but if then than as is are was were be "
    "been being do does did can could should would will shall may might must i you he she it "
    "we they me my your his her its our their this that these those there here what why how "
    "when where who whom whose which some any all more most much many very so just about into "
    "over after before out up down get got have has had one s".split()
)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _names(tokens: list[str]) -> set[str]:
    # Capitalised words after the first: a cheap stand-in for named entities.
    return {t.lower() for t in tokens[1:] if t[:1].isupper() and t != "I"}


def lexical_features(a: str, b: str, cosine: float) -> np.ndarray:
    """Pure, cheap checks a bi-encoder is known to miss (unscaled)."""
    ta, tb = _tokens(a), _tokens(b)
    la, lb = [t.lower() for t in ta], [t.lower() for t in tb]
    qa = next((t for t in la if t in _QWORDS), "")
    qb = next((t for t in lb if t in _QWORDS), "")
    neg_a = sum(t in _NEGATIONS or t.endswith("n't") for t in la)
    neg_b = sum(t in _NEGATIONS or t.endswith("n't") for t in lb)
    ca = {t for t in la if t not in _STOP}
    cb = {t for t in lb if t not in _STOP}
    union = ca | cb
    return np.array(
        [
            cosine,
            1.0 if la == lb else 0.0,
            1.0 if qa != qb else 0.0,
            1.0 if (neg_a % 2) != (neg_b % 2) else 0.0,
            1.0 if set(_NUMBER.findall(a)) != set(_NUMBER.findall(b)) else 0.0,
            1.0 if _names(ta) != _names(tb) else 0.0,
            len(ca & cb) / len(union) if union else 1.0,
            len(ca - cb) / max(1, len(ca)),
            len(cb - ca) / max(1, len(cb)),
            min(len(la), len(lb)) / max(1, len(la), len(lb)),
        ],
        dtype=np.float32,
    )


_WORD = re.compile("[A-Za-z0-9][A-Za-z0-9'\u2019]*")  # \u2019: a typographic apostrophe
_FUNCTION_WORDS = _STOP | _QWORDS | _NEGATIONS


def _stem(word: str) -> str:
    """Lower case, no possessive, no plural s: "Kings", "King's" and "king" are one."""
    w = word.lower().replace("\u2019", "'").removesuffix("'s").rstrip("'")
    return w[:-1] if len(w) > 3 and w.endswith("s") else w


def _names_in(text: str) -> set[str]:
    """Stems of capitalised words that do not start a sentence (a stand-in for names)."""
    names = set()
    for m in _WORD.finditer(text):
        word, before = m.group(), text[: m.start()].rstrip()
        if not before or before[-1] in '.?!:;"(' or not word[0].isupper() or word == "I":
            continue
        if (stem := _stem(word)) not in _FUNCTION_WORDS:
            names.add(stem)
    return names


def new_names(cached: str, asked: str) -> set[str]:
    """Names the asked question has and the cached one does not mention in any form.

    QQP labels templated questions that differ only in the place or thing ("... proposed
    by the NRA in Florida?" / "... in Kentucky?") as duplicates, so a verifier trained on it
    learns to serve them; blind readers call such answers wrong (``bench.cache_audit``).
    Directional on purpose: a cached answer may cover less than the new question asks,
    never something else. A name counts as mentioned when a word of the cached question
    shares its stem, or a prefix of at least four letters ("Pakistani" after "Pakistan").
    """
    have = {_stem(w) for w in _WORD.findall(cached)}
    return {
        n
        for n in _names_in(asked)
        if not any(
            n == h or (min(len(n), len(h)) >= 4 and (n.startswith(h) or h.startswith(n)))
            for h in have
        )
    }


_FOLLOW_UP = frozenset(
    "why how if so yes no not then and or when what where which who is it that".split()
)
_JOINED = re.compile(
    r",\s*and\s+(?:how|what|why|when|where|which|who)\b(?:\W+[A-Za-z0-9']+){2,}", re.IGNORECASE
)


def questions(text: str) -> list[str]:
    """The questions a text asks: its sentences ending in "?", and wh-clauses joined to one.

    "How close are we to World War Three, and how bad would it be?" asks two. Bare
    follow-ups ("Why?", "If so, how?") and parentheses ("(See details)?") ask nothing new;
    statements ("I forgot my password.") ask nothing.
    """
    found = []
    segments = re.split(r"[?\uff1f]+", re.sub(r"\([^)]*\)", " ", text))
    for segment in segments[:-1]:  # each of these ended in a question mark
        sentence = re.split(r"[.!:;](?:\s|$)", segment)[-1].strip()
        words = [w.lower() for w in _TOKEN.findall(sentence)]
        if not words or (len(words) <= 4 and all(w in _FOLLOW_UP for w in words)):
            continue
        found.append(sentence)
        found.extend(m.group() for m in _JOINED.finditer(sentence))
    return found


def extra_questions(cached: str, asked: str) -> int:
    """How many more questions the asked text asks than the cached one (0 if not more).

    "What is GST bill? What are its advantages and disadvantages?" after "What are the
    advantages and disadvantages of GST bill?": the cached answer covers one of the two.
    A text with no question mark asks one question.
    """
    return max(0, max(1, len(questions(asked))) - max(1, len(questions(cached))))


# Two sides of one axis ("positive effects" / "negative effects" embed at cosine 0.97).
# Words on a side are one another's synonyms here. Only axes where the two sides ask for
# different answers: not yes/no attributes ("Is coffee good?" / "Is coffee bad?", "safe",
# "legal", "possible") nor comparatives ("Is tea more harmful?" / "less harmful").
_SIDES = (
    ("positive advantage advantages benefit benefits pro pros upside upsides merit merits "
     "strength strengths", "negative disadvantage disadvantages drawback drawbacks con cons "
     "downside downsides demerit demerits weakness weaknesses"),
    ("best", "worst"),
    ("easiest", "hardest"),
    ("increase increasing raise boost", "decrease decreasing reduce reducing lower"),
    ("gain gaining", "lose losing loss"),
    ("win winning", "lose losing"),
    ("buy buying", "sell selling"),
    ("import imports importing", "export exports exporting"),
    ("before", "after"),
    ("start starting begin beginning", "end ending stop stopping quit quitting"),
    ("male men man boy boys", "female women woman girl girls"),
    ("husband boyfriend", "wife girlfriend"),
    ("rich", "poor"),
    ("love", "hate"),
    ("minimum min", "maximum max"),
    ("introvert introverts", "extrovert extroverts"),
    ("upload", "download"),
    ("similar similarity similarities", "different difference differences"),
    ("fastest", "slowest"),
)  # fmt: skip
_AXES = tuple((frozenset(a.split()), frozenset(b.split())) for a, b in _SIDES)


def opposite_words(cached: str, asked: str) -> set[str]:
    """Words of the asked question on a side of an axis the cached one does not cover.

    "What are the negative effects of caffeine?" after "... the positive effects ...";
    "Advantages and drawbacks of democracy?" after "What is the drawback of democracy?"
    (it asks for both sides, the cached answer gives one). Only where the cached question
    takes a side: "Pros and cons of Go?" answers "What are the cons of Go?".
    """
    have = {w.lower() for w in _TOKEN.findall(cached)}
    want = {w.lower() for w in _TOKEN.findall(asked)}
    found: set[str] = set()
    for side_a, side_b in _AXES:
        if (have & side_a or have & side_b) and not have & side_a:
            found |= want & side_a
        if (have & side_a or have & side_b) and not have & side_b:
            found |= want & side_b
    return found


_HEAD_NEGATIONS = frozenset(("not", "no", "never", "cannot"))
_OR_NOT = re.compile(r"\bor not\b", re.IGNORECASE)


def negated_head(text: str) -> bool:
    """A question negated at its head: a sentence opening with a question word or an
    auxiliary that has "not", "no", "never" or "n't" within its first five words.

    "Is coffee not bad for you?", "Why shouldn't I vote for him?", "Why is the sky not
    blue?". A terse answer to the plain question ("No.") is wrong for the negated one, and
    the two embed at cosine 0.97. Negations further in ("... that I can't control?",
    "... without dieting?") and "or not" are left to the MLP: blind readers call most
    such pairs the same question.
    """
    for sentence in re.split(r"[?.!;]", _OR_NOT.sub(" ", text)):
        words = [w.lower() for w in _TOKEN.findall(sentence)]
        if words and words[0] in _QWORDS:
            if any(w in _HEAD_NEGATIONS or w.endswith("n't") for w in words[:5]):
                return True
    return False


def told_apart_by(cached: str, asked: str) -> str | None:
    """Why the cached answer cannot answer the asked question, or None.

    "names": the asked question names something new; "questions": it asks more questions;
    "opposite": it asks for the opposite; "negation": one of the two is negated at its head.
    """
    if new_names(cached, asked):
        return "names"
    if extra_questions(cached, asked):
        return "questions"
    if opposite_words(cached, asked):
        return "opposite"
    if negated_head(cached) != negated_head(asked):
        return "negation"
    return None


def told_apart(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """Per (cached, asked) pair: ``told_apart_by`` found a reason; the verifier scores it 0."""
    return np.array([told_apart_by(a, b) is not None for a, b in pairs], dtype=bool)


# --- Contrast: pairs that embed at cosine 0.95-0.99 and ask the opposite (issue 24) ---
#
# ``contrast_by`` is a decision-time veto applied by ``Matcher.decide`` to every candidate,
# on top of the verifier (whose training and calibration it leaves alone). It is symmetric
# and strict on purpose: one wrong answer costs a user more than a hundred misses, so a
# rewording it cannot tell from a contrast is a miss, never a hit.

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
_CONTRAST_TOKEN = re.compile(r"[a-z0-9_]+(?:'[a-z]+)?|\d+(?:[.,]\d+)*|[,;:?!]|\.(?=\s|$)")


def contrast_words(text: str) -> list[str]:
    """Lower-case words with contractions spelled out, axis phrases joined, punctuation kept."""
    t = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    for symbol, word in _SYMBOLS.items():
        t = t.replace(symbol, word)
    for pattern, repl in _CONTRACTIONS:
        t = pattern.sub(repl, t)
    t = re.sub(r"(\d),(\d{3})\b", r"\1\2", t)  # 20,000 is 20000
    for pattern, repl in _PHRASES:
        t = pattern.sub(repl, t)
    return _CONTRAST_TOKEN.findall(t)


_PUNCT = frozenset(",;:?!.")
_DETERMINERS = frozenset(
    "a an the my your our their his her its this that these those some".split()
)
# Words that relate two arguments in order: "A to B", "A than B", "A causes B".
_RELATIONS = {
    **dict.fromkeys(("to", "into", "onto", "towards", "from", "per"), "direction"),
    **dict.fromkeys(("than", "over", "cause", "causes", "caused", "causing", "affect",
                     "affects", "outrun", "outruns", "beat", "beats"), "order"),
}  # fmt: skip
# Between two swapped arguments, these keep the meaning ("A or B?", "A and B").
_SYMMETRIC = frozenset(("and", "or", "vs", "with", "between", "&", "nor"))
_CONTENT_STOP = _STOP | _QWORDS | _NEGATIONS | _DETERMINERS | frozenset(_RELATIONS) | _SYMMETRIC


def _content(word: str) -> bool:
    return word not in _CONTENT_STOP and word not in _PUNCT


def _relations(words: list[str]) -> set[tuple[str, str, str]]:
    """(left argument, relation, right argument) for content words near a relation word."""
    found = set()
    for p, w in enumerate(words):
        if w not in _RELATIONS:
            continue
        left: list[str] = []
        for x in reversed(words[max(0, p - 3) : p]):
            if x in _PUNCT:
                break
            left.append(x)
        right: list[str] = []
        for x in words[p + 1 : p + 4]:
            if x in _PUNCT:
                break
            right.append(x)
        rel = "to" if w in ("into", "onto", "towards") else w
        found |= {(a, rel, b) for a in left if _content(a) for b in right if _content(b) and a != b}
    return found


_TOWARDS = frozenset(("to", "into", "onto", "towards"))
_FROM = frozenset(("from", "out"))


def _headed(words: list[str], prepositions: frozenset[str]) -> set[str]:
    """The first content word after each of these prepositions ("to a new drive": drive)."""
    found = set()
    for p, w in enumerate(words):
        if w in prepositions:
            for x in words[p + 1 : p + 4]:
                if x in _PUNCT:
                    break
                if _content(x):
                    found.add(x)
                    break
    return found


def swapped(cached: str, asked: str) -> str | None:
    """The kind ("direction" or "order") when the two questions relate the same two things the other
    way round: "convert A to B" / "convert B to A", "is A faster than B" / "is B faster
    than A", "can a cat outrun a dog" / "... a dog outrun a cat". Arguments of a symmetric
    word ("A or B", "A and B", "A vs B", "A compared to B") may come in any order.
    """
    wa, wb = contrast_words(cached), contrast_words(asked)
    ra, rb = _relations(wa), _relations(wb)
    for x, rel, y in ra:
        if (y, rel, x) in rb and (x, rel, y) not in rb and (y, rel, x) not in ra:
            return _RELATIONS.get(rel, "direction")
    # "transfer my games to a new drive" / "... from a new drive": the same place, the other way.
    ta, fa, tb, fb = (
        _headed(wa, _TOWARDS),
        _headed(wa, _FROM),
        _headed(wb, _TOWARDS),
        _headed(wb, _FROM),
    )
    if (ta - tb) & (fb - fa) or (tb - ta) & (fa - fb):
        return "direction"
    # The same words, two phrases trading places across something that is not symmetric:
    # "can a Tesla charge a Nissan Leaf" / "can a Nissan Leaf charge a Tesla".
    if len(wa) == len(wb) and wa != wb:
        start = next(i for i, (x, y) in enumerate(zip(wa, wb, strict=True)) if x != y)
        back = zip(wa[::-1], wb[::-1], strict=True)
        end = len(wa) - next(i for i, (x, y) in enumerate(back) if x != y)
        ma, mb = wa[start:end], wb[start:end]
        for nx in range(1, min(4, len(ma))):
            for ny in range(1, min(4, len(ma) - nx)):
                one, mid, two = ma[:nx], ma[nx : len(ma) - ny], ma[len(ma) - ny :]
                if mb != two + mid + one or not mid:
                    continue
                between = [w for w in mid if w not in _DETERMINERS]
                if (
                    any(_content(w) for w in one)
                    and any(_content(w) for w in two)
                    and between
                    and not set(between) & (_SYMMETRIC | _PUNCT)
                ):
                    return "order"
    return None


# Two sides of a polarity axis: a word on one side in one question and on the other side in
# the other is a different question, whatever the embedding says. Words on a side are one
# another's synonyms here (so "enable" / "turn on" is no contrast).
_POLARITY = (
    ("safe safer safest", "unsafe dangerous risky riskier"),
    ("good healthy beneficial", "bad harmful unhealthy"),
    ("better", "worse"),
    ("best", "worst"),
    ("enable enabled enabling activate allow allowed unblock show display unhide",
     "disable disabled disabling deactivate block blocked deny forbid ban hide"),
    ("increase increasing raise boost more grow higher maximize",
     "decrease decreasing reduce reducing lower cut less fewer shrink minimize"),
    ("high highest", "low lowest"),
    ("import importing", "export exporting"),
    ("upload uploading", "download downloading"),
    ("encrypt encrypted encrypting encryption", "decrypt decrypted decrypting decryption"),
    ("encode encoded encoding", "decode decoded decoding"),
    ("before", "after"),
    ("minimum min", "maximum max"),
    ("buy buying purchase", "sell selling"),
    ("ascending", "descending"),
    ("hot hotter warm warmer", "cold colder cool cooler"),
    ("open opening", "close closing shut"),
    ("add adding append insert", "remove removing delete deleting"),
    ("true", "false"),
    ("fast faster fastest quick quicker quickest", "slow slower slowest"),
    ("early earlier earliest", "late later latest"),
    ("cheap cheaper cheapest", "expensive priciest pricey"),
    ("push pushing", "pull pulling"),
    ("start starting begin beginning", "stop stopping end ending finish"),
    ("win winning gain gaining", "lose losing loss"),
    ("include including", "exclude excluding"),
    ("input", "output"),
    ("send sending", "receive receiving"),
    ("deposit", "withdraw"),
    ("lend lending", "borrow borrowing"),
    ("credit", "debit"),
    ("arrival arrive arriving", "departure depart departing"),
    ("inbound", "outbound"),
    ("big bigger biggest large larger largest", "small smaller smallest"),
    ("heavy heavier heaviest", "light lighter lightest"),
    ("long longer longest", "short shorter shortest"),
    ("strong stronger strongest", "weak weaker weakest"),
    ("rich", "poor"),
    ("wet", "dry"),
    ("positive", "negative"),
    ("advantage advantages pro pros benefit benefits upside", "disadvantage disadvantages con "
     "cons drawback drawbacks downside"),
    ("male men man", "female women woman"),
    ("husband boyfriend", "wife girlfriend"),
    ("love", "hate"),
    ("north", "south"),
    ("east", "west"),
    ("above", "below"),
    ("inside indoors", "outside outdoors"),
    ("uppercase upper", "lowercase"),
    ("zip zipping", "unzip unzipping"),
    ("follow", "unfollow"),
    ("accept", "decline reject"),
    ("legal", "illegal"),
    ("agree", "disagree"),
    ("overestimate", "underestimate"),
    ("hire hiring", "fire firing"),
    ("expand expanding", "collapse collapsing"),
    ("pause pausing", "resume resuming"),
    ("speed_up", "slow_down"),
)  # fmt: skip
_SIDE_OF: dict[str, set[tuple[int, int]]] = {}
for _axis, _pair in enumerate(_POLARITY):
    for _side, _words in enumerate(_pair):
        for _w in _words.split():
            _SIDE_OF.setdefault(_w, set()).add((_axis, _side))
_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "de", "non")
_PAIRED_PREFIXES = (("over", "under"), ("in", "ex"), ("up", "down"), ("en", "de"))


def _sides(word: str) -> set[tuple[int, int]]:
    return _SIDE_OF.get(word, set())


def _opposed(x: str, y: str) -> bool:
    if any((axis, 1 - side) in _sides(y) for axis, side in _sides(x)):
        return True
    for a, b in ((x, y), (y, x)):
        # "safe" / "unsafe", "install" / "uninstall", "connect" / "disconnect"
        if any(b == p + a for p in _PREFIXES) and len(a) >= 4:
            return True
        # "overinflate" / "underinflate", "inhale" / "exhale", "upvote" / "downvote"
        for p, q in _PAIRED_PREFIXES:
            if (
                a.startswith(p)
                and b.startswith(q)
                and a[len(p) :] == b[len(q) :]
                and len(a) > len(p) + 3
            ):
                return True
        # the "zoom_in" / "zoom_out" phrases
        if "_" in a and "_" in b and a.split("_")[0] == b.split("_")[0]:
            return {a.split("_")[1], b.split("_")[1]} in ({"in", "out"}, {"up", "down"})
    return False


def opposed_words(cached: str, asked: str) -> tuple[str, str] | None:
    """A word one question has and the other lacks, opposed to one the other has and the
    first lacks: ("safe", "unsafe"), ("enable", "disable"), ("import", "export")."""
    ca, cb = Counter(contrast_words(cached)), Counter(contrast_words(asked))
    only_a, only_b = ca - cb, cb - ca
    # A question that names both sides ("Is Mars bigger or smaller than Earth?") covers
    # either ("Is Mars larger than Earth?").
    sides_a = set().union(*(_sides(w) for w in ca))
    sides_b = set().union(*(_sides(w) for w in cb))
    for x in only_a:
        for y in only_b:
            if _opposed(x, y) and not (_sides(y) & sides_a or _sides(x) & sides_b):
                return x, y
    return None


# "without" too: "with no money" is "without any money"; "bread" / "bread without yeast".
_NEGATORS = frozenset("not no never nobody nothing none neither nor noone without".split())


def negations(text: str) -> int:
    """How many negating words ("not", "n't", "never", "no", ...), "or not" aside."""
    return sum(w in _NEGATORS for w in contrast_words(text))


_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split()
    )
}
del _NUMBER_WORDS["one"]  # "How can one ...?" is a pronoun
_NUMBER_WORDS |= {"twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "hundred": "100",
                  "thousand": "1000", "million": "1000000", "billion": "1000000000",
                  "dozen": "12", "half": "0.5", "twice": "x2", "double": "x2", "triple": "x3",
                  "third": "3rd", "fourth": "4th", "fifth": "5th",
                  "2nd": "2nd", "1st": "1st", "3rd": "3rd"}  # fmt: skip


def numbers(text: str) -> Counter[str]:
    """Numbers and number words, normalised ("five" is "5", "1,000" is "1000", "3.0" is "3")."""
    found: Counter[str] = Counter()
    for w in contrast_words(text):
        if w in _NUMBER_WORDS:
            found[_NUMBER_WORDS[w]] += 1
        elif w[:1].isdigit():
            m = re.match(r"\d+(?:\.\d+)?", w)
            if m:
                n = m.group()
                found[n.rstrip("0").rstrip(".") if "." in n else n.lstrip("0") or "0"] += 1
    return found


_UNITS = {
    "celsius": "celsius centigrade", "fahrenheit": "fahrenheit", "kelvin": "kelvin",
    "km": "km kilometer kilometers kilometre kilometres", "mile": "mile miles mi",
    "kmh": "kmh", "mph": "mph", "knot": "knot knots", "meter": "meter meters metre metres",
    "cm": "cm centimeter centimeters centimetre centimetres",
    "mm": "mm millimeter millimeters millimetre millimetres", "inch": "inch inches",
    "foot": "foot feet ft", "yard": "yard yards", "kg": "kg kgs kilogram kilograms kilo kilos",
    "gram": "gram grams grammes", "mg": "mg milligram milligrams",
    "mcg": "mcg microgram micrograms", "pound": "pound pounds lb lbs",
    "ounce": "ounce ounces oz", "cup": "cup cups", "tbsp": "tbsp tablespoon tablespoons",
    "tsp": "tsp teaspoon teaspoons", "liter": "liter liters litre litres",
    "ml": "ml milliliter milliliters millilitre millilitres", "gallon": "gallon gallons",
    "quart": "quart quarts", "pint": "pint pints", "second": "seconds secs",
    "minute": "minute minutes mins", "hour": "hour hours hrs", "day": "day days",
    "week": "week weeks", "month": "month months", "year": "year years yrs",
    "usd": "usd dollar dollars bucks", "eur": "eur euro euros", "gbp": "gbp",
    "jpy": "jpy yen", "inr": "inr rupee rupees", "percent": "percent percentage",
    "byte": "byte bytes", "bit": "bit bits", "kb": "kb kilobyte kilobytes",
    "mb": "mb megabyte megabytes", "gb": "gb gigabyte gigabytes", "tb": "tb terabyte terabytes",
    "mbps": "mbps", "ghz": "ghz", "mhz": "mhz", "watt": "watt watts w", "kwh": "kwh",
    "volt": "volt volts", "amp": "amp amps ampere amperes", "calorie": "kcal",
}  # fmt: skip
_UNIT_OF = {w: unit for unit, words in _UNITS.items() for w in words.split()}


def units(text: str) -> set[str]:
    return {_UNIT_OF[w] for w in contrast_words(text) if w in _UNIT_OF}


# Lower-case names users write without capitals: swapping one for another is a new question
# ("install python on ubuntu" / "... on windows"). Capitalised names are ``new_names``'.
_ENTITIES = frozenset(
    """
python java javascript typescript kotlin rust ruby php perl scala haskell golang swift
c++ c# csharp matlab julia elixir erlang lua bash powershell sql mysql postgres postgresql
sqlite mongodb redis oracle excel word powerpoint
windows linux ubuntu debian fedora centos macos mac osx ios android ipad iphone chromebook
chrome firefox safari opera brave
react vue angular svelte django flask rails spring node nodejs deno docker kubernetes
aws azure gcp netflix spotify hulu youtube instagram facebook tiktok twitter whatsapp
telegram gmail outlook yahoo amazon ebay paypal venmo zelle visa mastercard amex
samsung pixel huawei xiaomi sony nintendo xbox playstation ps5 airpods
usa us uk canada mexico brazil argentina france germany italy spain portugal greece
ireland netherlands belgium switzerland austria sweden norway denmark finland poland
russia ukraine india pakistan china japan korea vietnam thailand indonesia malaysia
singapore philippines australia zealand egypt morocco kenya nigeria israel dubai
london paris rome berlin madrid lisbon amsterdam tokyo seoul beijing shanghai bangkok
sydney toronto vancouver chicago boston seattle miami california texas florida
""".split()
)


def swapped_entities(cached: str, asked: str) -> set[str]:
    """Lower-case names on both sides of a substitution ("ubuntu" -> "windows")."""
    ca, cb = set(contrast_words(cached)), set(contrast_words(asked))
    a, b = (ca - cb) & _ENTITIES, (cb - ca) & _ENTITIES
    return a | b if a and b else set()


_CONDITIONS = frozenset(
    "if unless whenever while during assuming except given_that provided_that".split()
)


_WHETHER = frozenset("know tell find out check see wonder ask sure determine decide test".split())


def conditional(text: str) -> bool:
    """Whether a question carries a condition ("... if I am pregnant", "... without yeast",
    "When cooking steak, ..."); "when" opening a question ("When should I ...?") asks."""
    words = contrast_words(text)
    for i, w in enumerate(words):
        if w == "if" and i and words[i - 1] in _WHETHER:
            continue  # "tell if", "find out if": whether
        if w in _CONDITIONS and not (w == "given" and i == 0):
            return True
        if w == "when":  # "When cooking steak, how ...?" sets a condition; "When is ...?" asks
            opens = i == 0 or words[i - 1] in _PUNCT
            rest = words[i + 1 :]
            end = next((j for j, x in enumerate(rest) if x in ("?", "!", ".")), len(rest))
            if not opens or "," in rest[:end]:
                return True
    return False


CONTRASTS = ("direction", "order", "antonym", "negation", "number", "unit", "entity", "condition")


def contrast_by(cached: str, asked: str) -> str | None:
    """Why two close questions ask different things, one of ``CONTRASTS``, or None.

    "direction"/"order": the same two things the other way round ("convert A to B" /
    "convert B to A", "is A faster than B" / "is B faster than A"); "antonym": opposite words
    ("safe"/"unsafe", "enable"/"turn off", "import"/"export", "before"/"after"); "negation":
    one is negated more than the other ("Can I ...?" / "Can I not ...?"); "number": other
    numbers ("iPhone 14" / "iPhone 15"); "unit": a unit swapped for another ("grams" /
    "ounces"); "entity": another name ("in Japan" / "in China", "on ubuntu" / "on windows");
    "condition": one carries a condition the other lacks ("... if I am pregnant?").
    Contractions ("what's", "don't"), "turn on" for "enable", clause order, and the order of
    "A or B" are no contrast.
    """
    if (how := swapped(cached, asked)) is not None:
        return how
    if opposed_words(cached, asked) is not None:
        return "antonym"
    if negations(cached) != negations(asked):
        return "negation"
    if set(numbers(cached)) != set(numbers(asked)):
        return "number"
    ua, ub = units(cached), units(asked)
    if ua - ub and ub - ua:
        return "unit"
    names = {n for n in new_names(cached, asked) if not n.startswith("i'")}  # "I'm", "I've"
    if names or swapped_entities(cached, asked):
        return "entity"
    if conditional(cached) != conditional(asked):
        return "condition"
    return None
