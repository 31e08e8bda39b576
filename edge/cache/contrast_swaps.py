"""Contrast by argument order: the same things related the other way round (pure).

"convert A to B" / "convert B to A", "is A faster than B" / "is B faster than A", "transfer
my games to a new drive" / "... from a new drive", "can I sue my landlord" / "can my
landlord sue me". Part of ``contrast.contrast_by``; the same roles read through the form of
the question (the passive, asking for the doer) are ``contrast_roles``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence

from shared.lexicon import (
    NEGATIONS,
    PUNCTUATION,
    QUESTION_WORDS,
    STOPWORDS,
    UNIT_OF,
    contrast_words,
    stem,
)

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
# Predicates that take their two arguments in either order: "A different from B", "tell A
# from B", "how far is A from B", "what separates A from B", "is A the same as B". A
# "from", "to" or "as" after one of them, in its clause, orders nothing.
_EITHER_WAY = frozenset(
    "different differ differs distinguish distinguishes tell apart distinct far distance "
    "separate separates same".split()
)
_EITHER_WAY_REACH = 5  # words back from the "from" / "to" / "as" to its predicate
_EITHER_WAY_STEMS = frozenset(stem(w) for w in _EITHER_WAY)  # as the views read them
_CONTENT_STOP = (
    STOPWORDS | QUESTION_WORDS | NEGATIONS | _DETERMINERS | frozenset(_RELATIONS) | _SYMMETRIC
)


def content_word(word: str) -> bool:
    return word not in _CONTENT_STOP and word not in PUNCTUATION


def _relations(words: Sequence[str]) -> set[tuple[str, str, str]]:
    """(left argument, relation, right argument) for content words near a relation word."""
    found = set()
    for p, w in enumerate(words):
        if w not in _RELATIONS or either_way(words, p):
            continue
        left: list[str] = []
        for x in reversed(words[max(0, p - 3) : p]):
            if x in PUNCTUATION:
                break
            left.append(x)
        right: list[str] = []
        for x in words[p + 1 : p + 4]:
            if x in PUNCTUATION:
                break
            right.append(x)
        rel = "to" if w in ("into", "onto", "towards") else w
        found |= {
            (a, rel, b)
            for a in left
            if content_word(a)
            for b in right
            if content_word(b) and a != b
        }
    return found


def either_way(words: Sequence[str], p: int) -> bool:
    """Whether the "from", "to" or "as" at ``p`` follows, in its clause, a predicate whose
    arguments come in either order (``_EITHER_WAY``)."""
    if words[p] not in ("from", "to", "as"):
        return False
    for w in reversed(words[max(0, p - _EITHER_WAY_REACH) : p]):
        if w in PUNCTUATION:
            return False
        if stem(w) in _EITHER_WAY_STEMS:
            return True
    return False


_TOWARDS = frozenset(("to", "into", "onto", "towards"))
# Who does what to whom, whatever the case: "I sue" / "sue me".
_OBJECT_PRONOUNS = {"me": "i", "him": "he", "her": "she", "us": "we", "them": "they"}
PRONOUNS = frozenset(_OBJECT_PRONOUNS.values()) | {"you"}
# An owner read as the one who owns: "my dog bit someone" / "someone's dog bit me" trade
# "i" and "someone" across "dog bit" ("'s" is already gone from ``contrast_words``).
_OWNERS = {"my": "i", "our": "we", "your": "you", "his": "he", "their": "they"}
# A phrase led by one of these is a circumstance, which may move without changing the
# question: "education during the occupation like in Singapore" / "education in Singapore
# like during the occupation".
ADJUNCT_HEADS = frozenset(
    "in on at during for after before while since until by from of with without about "
    "under over near within across through".split()
)
_FROM = frozenset(("from", "out"))


def _headed(words: Sequence[str], prepositions: frozenset[str]) -> set[str]:
    """The first content word after each of these prepositions ("to a new drive": drive)."""
    found = set()
    for p, w in enumerate(words):
        if w in prepositions:
            for x in words[p + 1 : p + 4]:
                if x in PUNCTUATION:
                    break
                if content_word(x):
                    found.add(x)
                    break
    return found


def _sides_of(words: Sequence[str], relation: str) -> list[tuple[set[str], set[str]]]:
    """For each ``relation`` word of a text: the content words only before it, and only
    after it, within its clause."""
    sides = []
    for at in (i for i, w in enumerate(words) if w == relation and not either_way(words, i)):
        start = end = at
        while start > 0 and words[start - 1] not in PUNCTUATION:
            start -= 1
        while end + 1 < len(words) and words[end + 1] not in PUNCTUATION:
            end += 1
        left = {w for w in words[start:at] if content_word(w)}
        right = {w for w in words[at + 1 : end + 1] if content_word(w)}
        sides.append((left - right, right - left))
    return sides


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
    # Longer arguments: "forward my local port to port 80 on the remote machine" / "forward
    # port 80 on the remote machine to my local port": words cross "to" both ways.
    sides_a, sides_b = _sides_of(wa, "to"), _sides_of(wb, "to")
    if len(sides_a) == len(sides_b):
        for (left_a, right_a), (left_b, right_b) in zip(sides_a, sides_b, strict=True):
            if left_a & right_b and right_a & left_b:
                return "direction"
    # The same words, two phrases trading places across something that is not symmetric:
    # "can a Tesla charge a Nissan Leaf" / "can a Nissan Leaf charge a Tesla", "can I sue my
    # landlord" / "can my landlord sue me".
    aa, ab = argument_words(cached), argument_words(asked)
    if _traded(aa, ab):
        return "order"
    # The same, read through plurals (a unit's too: "how many feet in a meter" / "how many
    # meters in a foot") and possessives: "can cats eat dog food" / "can dogs eat cat food";
    # "my roommate's boyfriend" / "my boyfriend's roommate" (owner and owned trade places,
    # with nothing between them).
    sa, sb = [_singular(w) for w in aa], [_singular(w) for w in ab]
    if _traded(sa, sb) or _owner_traded(_possessives(cached), _possessives(asked)):
        return "order"
    # Subject and predicate of a quantified claim, the other way round: "are all mammals
    # animals" / "are all animals mammals", "is every square a rectangle" / "... every
    # rectangle a square". Only after a quantifier: elsewhere two neighbours trade places in
    # true rewordings ("earn money fast online" / "... online fast").
    if _quantified_traded(aa, ab):
        return "order"
    # Whose it is, traded with who does it: "someone's dog bit me" / "my dog bit someone",
    # "cover me driving my friend's car" / "cover my friend driving my car"; also with a
    # word derived from the other's ("Congress override a presidential veto" / "the
    # president override a congressional veto").
    # Each view only where it reads the words otherwise (the same words were tried above).
    oa, ob = _owners(wa), _owners(wb)
    if (oa, ob) != (list(aa), list(ab)) and _traded(oa, ob):
        return "order"
    # The same with the verb agreeing with its new subject: "if I damage my roommate's TV"
    # / "if my roommate damages my TV".
    so, sob = [stem(w) for w in oa], [stem(w) for w in ob]
    if (so, sob) != (oa, ob) and (so, sob) != (sa, sb) and _traded(so, sob):
        return "order"
    if len(oa) == len(ob) and (rooted := _rooted(oa, ob)) != ob and _traded(oa, rooted):
        return "order"
    # The doer and whose thing it is traded, each side going on in its own words: "can a
    # pharmacist override a doctor's prescription dosage" / "can a doctor override a
    # pharmacist's dosage change".
    if _traded_before_tail(aa, ab) or _traded_before_tail(oa, ob):
        return "order"
    return None


def _singular(word: str) -> str:
    return UNIT_OF.get(word) or stem(word)


_QUANTIFIERS = frozenset("all every each any some most no".split())


def _neighbours_differ(a: Sequence[str], b: Sequence[str]) -> int | None:
    """``i`` where ``a`` and ``b`` differ in words ``i`` and ``i + 1`` only, else None."""
    if len(a) != len(b):
        return None
    differ = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    return differ[0] if len(differ) == 2 and differ[1] == differ[0] + 1 else None


def _quantified_traded(a: Sequence[str], b: Sequence[str]) -> bool:
    i = _neighbours_differ(a, b)
    return (
        i is not None
        and i > 0
        and a[i - 1] in _QUANTIFIERS
        and a[i] == b[i + 1]
        and a[i + 1] == b[i]
        and content_word(a[i])
        and content_word(a[i + 1])
    )


def _possessives(text: str) -> list[str]:
    """Lower-case words, a possessive "'s" kept (``contrast_words`` drops it)."""
    return re.findall(r"[a-z0-9]+(?:'s)?", text.lower().replace("\u2019", "'"))


def _owner_traded(a: Sequence[str], b: Sequence[str]) -> bool:
    """``b`` is ``a`` with "X's Y" written "Y's X", nothing else changed."""
    if (i := _neighbours_differ(a, b)) is None:
        return False
    owner_a, owned_a, owner_b, owned_b = a[i], a[i + 1], b[i], b[i + 1]
    return (
        owner_a.endswith("'s")
        and owner_b.endswith("'s")
        and owner_a.removesuffix("'s") == owned_b
        and owner_b.removesuffix("'s") == owned_a
    )


def arguments(words: Sequence[str]) -> list[str]:
    """The words that say who or what: determiners dropped ("a lower court" / "the lower
    court"), object pronouns read as subjects ("me" / "I")."""
    folded = (_OBJECT_PRONOUNS.get(w, w) for w in words)
    return [w for w in folded if w not in _DETERMINERS]


# A capital letter alone names something ("class A", "B's members", "S corp"), where
# lower-cased "A" would read as the article and be dropped; "A" opening a sentence is the
# article, and "I" the asker.
_LETTER_NAME = re.compile(r"(?<![\w'])([B-HJ-Z])\b|(?<=[^\s.?!] )(A)\b")


@functools.lru_cache(maxsize=4096)
def argument_words(text: str) -> tuple[str, ...]:
    """``arguments`` of a question's ``contrast_words``, read once per text: the order
    checks here and in ``contrast_roles`` all start from them."""
    return tuple(arguments(contrast_words(_LETTER_NAME.sub(lambda m: m.group() + "_", text))))


def _owners(words: Sequence[str]) -> list[str]:
    """``arguments`` with each possessive read as its owner ("my friend": "i friend")."""
    return arguments([_OWNERS.get(w, w) for w in words])


# Endings that make a word of another word's root: "presidential" / "president",
# "congressional" / "congress", "senator" / "senate".
_DERIVED = ("", "e", "al", "ial", "ional", "or", "ian", "ic", "ical")
_ROOT = 5  # letters two derived words share at least


def _derived(x: str, y: str) -> bool:
    if x[:_ROOT] != y[:_ROOT]:
        return False
    n = 0
    while n < min(len(x), len(y)) and x[n] == y[n]:
        n += 1
    return n >= _ROOT and x[n:] in _DERIVED and y[n:] in _DERIVED


def _rooted(a: Sequence[str], b: Sequence[str]) -> list[str]:
    """``b`` with each word only it has written as a word only ``a`` has, if derived alike."""
    only_a = [w for w in a if w not in b]
    return [w if w in a else next((x for x in only_a if _derived(x, w)), w) for w in b]


def _argument(phrase: Sequence[str]) -> bool:
    return (
        phrase[0] not in ADJUNCT_HEADS
        and any(content_word(w) or w in PRONOUNS for w in phrase)
        and not set(phrase) & PUNCTUATION
    )


def _traded(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether ``b`` is ``a`` with two phrases, of any lengths, trading places across a
    middle that is not symmetric ("A and B", "A vs B", "A compared with B"): "the vice
    president overrule the president" / "the president overrule the vice president". A
    symmetric word deep in a longer middle joins something else: "as a customer, how do I
    deal with a rude cashier" / "as a cashier, ... a rude customer" is who does what."""
    return any(
        _argument(one)
        and _argument(two)
        and (not set(mid) & PUNCTUATION or _across_clauses(mid))
        and not (len(mid) <= _SHORT_MIDDLE and (_symmetric(mid) or _either_way_at(a, at, mid)))
        for one, mid, two, at in _trades(a, b)
    )


def _across_clauses(middle: Sequence[str]) -> bool:
    """A middle that ends one clause and asks in the next: "I can read bass clef, how do I
    learn treble clef" / "... treble clef, ... bass clef". A list ("A, B") is no trade."""
    return len(middle) >= 4 and any(w in QUESTION_WORDS for w in middle)


_PHRASE = 3  # words a traded phrase, or the verb between two, may have


def _traded_before_tail(a: Sequence[str], b: Sequence[str]) -> bool:
    """After the same start, ``a`` goes on "ONE VERB TWO ..." and ``b`` "TWO VERB ONE ...",
    whatever follows: two phrases of at most three words trade places (``_trades`` over the
    two heads) across the same verb, which holds a content word and is not symmetric
    ("and", "vs", "with")."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    # Each side's next word must come a little later in the other (most pairs stop here).
    reach = p + 2 * _PHRASE + 1
    if p >= min(len(a), len(b)) or a[p] not in b[p + 1 : reach] or b[p] not in a[p + 1 : reach]:
        return False
    return any(
        len(one) <= _PHRASE
        and len(two) <= _PHRASE
        and _argument(one)
        and _argument(two)
        and not set(mid) & PUNCTUATION
        and not _symmetric(mid)
        and any(content_word(w) for w in mid)
        for end in range(p + 3, p + 3 * _PHRASE + 1)
        for one, mid, two, _ in _trades(a[:end], b[:end])
    )


_SHORT_MIDDLE = 3  # words: "with", "compared with", "is compatible with"


def _either_way_at(a: Sequence[str], at: int, mid: Sequence[str]) -> bool:
    """Whether a word of ``mid``, which starts at ``at`` in ``a``, relates the two sides of
    a predicate that takes them in either order ("how far is A from B")."""
    return any(either_way(a, at + i) for i in range(len(mid)))


def _symmetric(middle: Sequence[str]) -> bool:
    words = set(middle)
    if "with" in words and len(middle) > 1 and not words & _WITH_EACH_OTHER:
        words.discard("with")  # "A interferes with B" is who does what
    return bool(words & _SYMMETRIC or any(either_way(middle, i) for i in range(len(middle))))


# What "with" leaves symmetric: "A compared with B", "is A compatible with B", "A's
# relationship with B", "A talks with B".
_WITH_EACH_OTHER = frozenset(
    "compared compare compatible combined combine mixed mix paired matched match along "
    "together same equal identical interchangeable versus relationship "
    "relationships relations ties talk talks talking meet meets meeting argue argues "
    "arguing fight fights fighting agree agrees disagree disagrees interact interacts "
    "communicate communicates chat chats".split()
)


# Joining two sides whose order is free: "A or B", "A and B", "between A and B", "A vs B".
# Not "with" ("replace A with B") nor "between" alone.
_COORDINATORS = frozenset(("and", "or", "vs", "&"))


def coordinated_swap(cached: str, asked: str) -> bool:
    """Whether ``asked`` is ``cached`` with the two sides of one "and" / "or" / "vs" in the
    other order and nothing else changed but determiners: "is a crocodile or an alligator
    more dangerous" / "is an alligator or a crocodile ...", "how do lions and tigers
    differ" / "how do tigers and lions differ" (a closing mark may come or go); or the two
    sides of a predicate that takes them in either order (``either_way``: "how far is Paris
    from London" / "... London from Paris"). The decision's models then read the asked
    question as the cached one (``match.Matcher``).
    A side is whatever swaps: "a talent manager and an agent" / "a talent agent and a
    manager" reads as "manager" and "agent" swapped (QQP calls them the same question)."""
    a, b = unstopped(list(argument_words(cached))), unstopped(list(argument_words(asked)))
    return any(
        _argument(one)
        and _argument(two)
        and (
            (len(mid) == 1 and mid[0] in _COORDINATORS)
            or (len(mid) <= _SHORT_MIDDLE and _either_way_at(a, at, mid))
        )
        for one, mid, two, at in _trades(a, b)
    )


def unstopped(words: list[str]) -> list[str]:
    while words and words[-1] in PUNCTUATION:  # "...?" / "..."
        words.pop()
    return words


def _trades(
    a: Sequence[str], b: Sequence[str], longest: int = 32
) -> Iterator[tuple[Sequence[str], Sequence[str], Sequence[str], int]]:
    """Each way ``b`` is ``a`` with two phrases ``one`` and ``two`` trading places around
    ``mid`` (``one mid two`` / ``two mid one``), the rest the same, and where ``mid`` starts
    in ``a``. Texts over ``longest`` words are not tried (the search is quartic in the words
    at worst)."""
    if len(a) != len(b) or a == b or len(a) > longest or sorted(a) != sorted(b):
        return
    differ = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    for start in range(differ[0], -1, -1):  # the phrases may share words with what is around
        for end in range(differ[-1] + 1, len(a) + 1):
            sa, sb, n = a[start:end], b[start:end], end - start
            for y in (y for y in range(1, n - 1) if sb[:y] == sa[n - y :]):
                for x in (x for x in range(1, n - y) if sb[n - x :] == sa[:x]):
                    if sb[y : n - x] == sa[x : n - y]:
                        yield sa[:x], sa[x : n - y], sa[n - y :], start + x
