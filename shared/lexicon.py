"""The cache's words in one place: one tokenizer and one table of each kind (pure, stdlib only).

The match decision's checks (``edge.cache.contrast``, ``pair_checks``, ``rewording``) read
them, and so does the hard-pair generator that teaches the models (``tools.prepare.hard_pairs``,
run in the preparation environment without edge's dependencies). A word added here changes
both what the rules veto and what the models learn; it enters with a dev-set case that
needs it.

``contrast_words`` is the checks' view of a question: lower-case words, contractions spelled
out, phrases that mean one word of an axis joined ("turn on" is "enable"), punctuation kept.
"""

from __future__ import annotations

import functools
import re

# Shorthand for a word, read as the word by every check ("w/ garlic" is "with garlic").
_SHORTHAND = ((re.compile(r"\bw/o\b", re.IGNORECASE), "without"),
              (re.compile(r"\bw/(?=\s)", re.IGNORECASE), "with"))  # fmt: skip


def written_out(text: str) -> str:
    """``text`` with its shorthand written out: "w/" and "w/o" (the rewording step compares
    the marks of what is left, so "w/" must not count as a slash)."""
    for pattern, word in _SHORTHAND:
        text = pattern.sub(word, text)
    return text


_CONTRACTIONS = (
    (re.compile(r"\b(can)not\b"), r"\1 not"),
    (re.compile(r"\bcan't\b"), "can not"),
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\bshan't\b"), "shall not"),
    (re.compile(r"\bain't\b"), "is not"),
    (re.compile(r"n't\b"), " not"),
    # The same typed without the apostrophe ("dont", "cant", "wont"), as users often do.
    (re.compile(r"\bcant\b"), "can not"),
    (re.compile(r"\bwont\b"), "will not"),
    (re.compile(r"\baint\b"), "is not"),
    (
        re.compile(r"\b(do|does|did|is|are|was|were|has|have|had|should|could|would|must)nt\b"),
        r"\1 not",
    ),
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
    (re.compile(r"\bkm\s*/\s*h\b|\bkmh\b|\bkph\b|\bkilomet(?:er|re)s?\s+(?:per|an)\s+hour\b"),
     "kmh"),
    (re.compile(r"\bmiles\s+(?:per|an)\s+hour\b"), "mph"),
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
# Roles of one relation: a question about one side is not a question about the other
# ("can the sender recall a wire" / "can the recipient recall a wire"). The contrast check
# refuses one put for the other, and the hard-pair generator's ``role`` rule swaps them.
ROLES = (
    ("sender", "recipient"), ("senders", "recipients"), ("buyer", "seller"),
    ("buyers", "sellers"), ("employer", "employee"), ("employers", "employees"),
    ("landlord", "tenant"), ("landlords", "tenants"), ("parent", "child"),
    ("parents", "children"), ("teacher", "student"), ("teachers", "students"),
    ("doctor", "patient"), ("doctors", "patients"), ("lender", "borrower"),
    ("client", "server"), ("host", "guest"), ("author", "reader"), ("driver", "passenger"),
    ("creditor", "debtor"), ("plaintiff", "defendant"), ("manager", "employee"),
    ("interviewer", "candidate"), ("predator", "prey"), ("caller", "callee"),
    ("customer", "supplier"), ("owner", "renter"), ("boss", "employee"), ("coach", "player"),
    ("victim", "attacker"), ("winner", "loser"), ("mother", "daughter"), ("father", "son"),
    ("husband", "wife"), ("user", "admin"), ("subscriber", "publisher"),
    ("insurer", "insured"), ("investor", "founder"), ("judge", "jury"),
)  # fmt: skip
# People (and pets) a question's asker has. With "I" or "me" on the other side of a verb,
# swapping the two changes who does what to whom ("can I sue my landlord" / "can my landlord
# sue me"): the hard-pair generator's ``pronoun`` rule. Blind4-6 served three such swaps.
RELATIONS = frozenset(
    """
friend friends boss landlord landlady tenant tenants wife husband partner girlfriend
boyfriend fiance fiancee spouse ex parents parent mom mother dad father son daughter kids
kid child children brother sister siblings cousin uncle aunt grandparents grandma grandpa
roommate neighbor neighbour neighbors neighbours employer employee employees manager
coworker coworkers colleague colleagues teacher teachers doctor lawyer client clients
customer customers student students dog cat puppy kitten bank insurer
""".split()
)
# Transitive verbs whose passive keeps a question ("How do bees make honey?" / "How is honey
# made by bees?"): the regular ones (past and participle in "-ed"), then the rest with
# their past and participle. No word that is as often a noun ("power", "test", "plan"):
# "How does a nuclear power station work?" has no passive. The hard-pair generator turns
# them into the passive; the contrast check reads who does what in either voice.
REGULAR_VERBS = """
absorb accept affect allow analyze announce approve arrest attack calculate capture cause
change check clean collect complete compute conquer consume convert cook create cure
damage define delete deliver design destroy detect determine develop digest discover
distribute elect encrypt enforce evaluate explain export filter fund generate govern
handle hire hunt identify import improve influence install invent invade kill launch
maintain manage manufacture measure monitor murder own paint perform pollinate predict
prepare prevent produce protect publish raise rate receive recycle regulate remove repair
replace schedule select solve support transport treat use wash deploy employ
""".split()
IRREGULAR_VERBS = {
    "build": ("built", "built"), "make": ("made", "made"), "write": ("wrote", "written"),
    "eat": ("ate", "eaten"), "choose": ("chose", "chosen"), "pay": ("paid", "paid"),
    "win": ("won", "won"), "take": ("took", "taken"), "give": ("gave", "given"),
    "draw": ("drew", "drawn"), "sell": ("sold", "sold"), "buy": ("bought", "bought"),
    "hold": ("held", "held"), "lead": ("led", "led"), "teach": ("taught", "taught"),
    "find": ("found", "found"), "break": ("broke", "broken"), "steal": ("stole", "stolen"),
    "speak": ("spoke", "spoken"), "sing": ("sang", "sung"), "bite": ("bit", "bitten"),
    "catch": ("caught", "caught"), "feed": ("fed", "fed"), "send": ("sent", "sent"),
    "spend": ("spent", "spent"), "throw": ("threw", "thrown"), "grow": ("grew", "grown"),
    "hide": ("hid", "hidden"), "freeze": ("froze", "frozen"), "wear": ("wore", "worn"),
    "drive": ("drove", "driven"), "shoot": ("shot", "shot"), "sink": ("sank", "sunk"),
    "stop": ("stopped", "stopped"), "plan": ("planned", "planned"), "ban": ("banned", "banned"),
    "ship": ("shipped", "shipped"), "drop": ("dropped", "dropped"), "scan": ("scanned", "scanned"),
    "admit": ("admitted", "admitted"), "transmit": ("transmitted", "transmitted"),
    "submit": ("submitted", "submitted"), "rob": ("robbed", "robbed"),
    "control": ("controlled", "controlled"), "carry": ("carried", "carried"),
    "apply": ("applied", "applied"), "classify": ("classified", "classified"),
    "deny": ("denied", "denied"), "copy": ("copied", "copied"), "bury": ("buried", "buried"),
    "lose": ("lost", "lost"), "beat": ("beat", "beaten"),
}  # fmt: skip
# Verbs whose participle is the verb itself ("read", "cut"): a closed class of English, so
# that any other word before "by" must look like a participle to be read as one.
SAME_PARTICIPLE = frozenset(
    "bet bid broadcast burst cast cost cut fit hit hurt let put quit read rid set shed shut "
    "slit split spread thrust upset".split()
)
# Negating words, one table for the contrast check and the rewording step. "without" too:
# "with no money" is "without any money"; "bread" / "bread without yeast". "non" is the
# prefix of "non-toxic" (the words are split at the hyphen).
NEGATORS = frozenset("not no never nobody nothing none neither nor noone without non".split())
# Verbs after which "if" means whether ("know if", "find out if"), not a condition.
WHETHER = frozenset("know tell find out check see wonder ask sure determine decide test".split())
# Words that open or carry a question ("what", "can", "should").
QUESTION_WORDS = frozenset(
    "what why how when where who whom whose which is are was were can could do does did "
    "should would will shall may might".split()
)
# Auxiliaries: a question's opening ("can my landlord ..."), where a contraction's "not"
# stands ("does my printer not ...").
AUXILIARIES = frozenset(
    "am is are was were do does did have has had can could shall should will would may might "
    "must need".split()
)
# Negating words as written, contracted forms too ("don't"); ``NEGATORS`` is the same set
# after ``contrast_words`` has spelled contractions out.
NEGATIONS = frozenset(
    "not no never none nobody nothing neither nor without cannot can't don't doesn't didn't "
    "isn't aren't wasn't weren't won't wouldn't shouldn't couldn't hasn't haven't".split()
)
# Function words: what is left is a question's content.
STOPWORDS = frozenset(
    "a an the of to in on at for from by with and or but if then than as is are was were be "
    "been being do does did can could should would will shall may might must i you he she it "
    "we they me my your his her its our their this that these those there here what why how "
    "when where who whom whose which some any all more most much many very so just about into "
    "over after before out up down get got have has had one s".split()
)
# The punctuation tokens ``contrast_words`` keeps (clause boundaries for the checks).
PUNCTUATION = frozenset(",;:?!.")
# Numbers a question may write as words, to their digits ("world war two" is "world war 2").
NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split()
    )
}
_CONTRAST_TOKEN = re.compile(r"[a-z0-9_]+(?:'[a-z]+)?|\d+(?:[.,]\d+)*|[,;:?!]|\.(?=\s|$)")


# One contrast check reads each text about ten times, and the asked text again for every
# candidate: short texts are remembered. Longer ones are tokenised each time, so the memo
# stays small (at most 1,024 texts of 2,048 characters).
_MEMO_CHARS = 2048


def contrast_words(text: str) -> tuple[str, ...]:
    """Lower-case words with contractions spelled out, axis phrases joined, punctuation kept."""
    return _remembered(text) if len(text) <= _MEMO_CHARS else _words(text)


@functools.lru_cache(maxsize=1024)
def _remembered(text: str) -> tuple[str, ...]:
    return _words(text)


def _words(text: str) -> tuple[str, ...]:
    t = written_out(text).lower().replace("\u2019", "'").replace("\u2018", "'")
    for symbol, word in _SYMBOLS.items():
        t = t.replace(symbol, word)
    for pattern, repl in _CONTRACTIONS:
        t = pattern.sub(repl, t)
    t = re.sub(r"(\d),(\d{3})\b", r"\1\2", t)  # 20,000 is 20000
    for pattern, repl in _PHRASES:
        t = pattern.sub(repl, t)
    return tuple(_CONTRAST_TOKEN.findall(t))


# Words as written, case kept: what the name checks read ("Java" after "Python"), where
# ``contrast_words`` would lower the case. \u2019 is a typographic apostrophe.
_CASED_WORD = re.compile("[A-Za-z0-9][A-Za-z0-9'\u2019]*")


def cased_words(text: str) -> list[tuple[int, str]]:
    """Each word as written and where it starts in ``text``."""
    return [(m.start(), m.group()) for m in _CASED_WORD.finditer(text)]


def plain_words(text: str) -> tuple[str, ...]:
    """``contrast_words`` without its punctuation tokens: lower case, contractions spelled
    out, axis phrases joined."""
    return tuple(w for w in contrast_words(text) if w not in PUNCTUATION)


# Operators of formulas and code, which the word pattern drops ("2x + 3" / "2x - 3"). A
# hyphen or slash inside a word ("e-mail", "and/or"), a dash between words set off by
# spaces ("Python - sorting a list"), and "!" ending a sentence are prose, not operators.
# "%" is a unit ("percent"), read by the unit check.
# A run of dots between two words is a range or a revision range ("1..10", "main...feature"),
# not an ellipsis.
_OPERATOR = re.compile(
    r"[-+*/^=<>!&|~\u2212\u00d7\u00f7\u2260\u2264\u2265\u2013\u2014]+|(?<=\w)\.{2,}(?=\w)"
)
_DASHES = frozenset("-\u2013\u2014")


def operators(text: str) -> tuple[str, ...]:
    """The operators a text writes, in order ("x^2 - 1 >= 0": "^", "-", ">=")."""
    return tuple(op for _, _, op in operator_spans(text))


def operator_spans(text: str) -> list[tuple[int, int, str]]:
    """Each operator ``operators`` reads, with where it stands in ``text``."""
    found = []
    for m in _OPERATOR.finditer(text):
        op, i, j = m.group(), m.start(), m.end()
        before, after = text[i - 1 : i], text[j : j + 1]
        if op in ("-", "/") and before.isalpha() and after.isalpha():
            continue  # within a word
        if op in _DASHES and before.isspace() and after.isspace():
            word_before = text[:i].rstrip()[-1:]
            word_after = text[j:].lstrip()[:1]
            if word_before.isalpha() and word_after.isalpha() and len(text[:i].split()[-1]) > 1:
                continue  # a dash between words (a one-letter variable before it: "x - y")
        if set(op) == {"!"} and (not after or after.isspace()):
            continue  # an exclamation
        found.append((i, j, re.sub("[\u2212\u2013\u2014]", "-", op)))
    return found


_GROUP = re.compile(r"\(([^()]*)\)")


def grouped(text: str) -> tuple[tuple[str, ...], ...]:
    """The operators inside each bracketed group of a formula, in order ("(*p)++": ("*",);
    "a && (b || c)": ("||",)). A group counts when an operator is in it or next to it; one
    of words only ("2+2 (in binary)") is prose."""
    found = []
    for m in _GROUP.finditer(text):
        inside = operators(m.group(1))
        before, after = text[: m.start()].rstrip()[-1:], text[m.end() :].lstrip()[:1]
        if inside or _OPERATOR.match(before) or _OPERATOR.match(after):
            found.append(inside)
    return tuple(found)


# Comparisons in words or signs, each as its sign: "greater than or equal to 7" is ">= 7".
_COMPARISONS = {
    "greater than or equal to": ">=", "more than or equal to": ">=",
    "less than or equal to": "<=", "at least": ">=", "at most": "<=", "no more than": "<=",
    "no less than": ">=", "greater than": ">", "more than": ">", "less than": "<",
    "fewer than": "<", "<=": "<=", ">=": ">=", "\u2264": "<=", "\u2265": ">=", "<": "<", ">": ">",
    # A shell's test (``[ $a -lt $b ]``).
    "-lt": "<", "-le": "<=", "-gt": ">", "-ge": ">=", "-eq": "==", "-ne": "!=",
}  # fmt: skip
_COMPARISON = re.compile(
    "|".join(
        rf"\b{re.escape(p)}\b"
        if p[0].isalpha()
        else rf"(?<![\w-]){re.escape(p)}\b"
        if p[0] == "-"
        else re.escape(p)
        for p in sorted(_COMPARISONS, key=len, reverse=True)
    )
)


def comparisons(text: str) -> list[str]:
    """The comparisons a text makes, in order, as signs ("at least 3, less than 9": ">=",
    "<")."""
    return [_COMPARISONS[m.group()] for m in _COMPARISON.finditer(text.lower())]


# Units, each with the ways it is written: the rewording step folds each spelling to its unit
# ("mg" / "milligrams"), and the swap checks read one unit however it is spelt.
UNITS = {
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
UNIT_OF = {w: unit for unit, words in UNITS.items() for w in words.split()}
# One canonical word for each group of words with one meaning in a question. Conservative:
# only words that mean the same in every sense a question is likely to use. The rewording
# step reads a question through it; the generator swaps each pair both ways.
SYNONYMS = {
    "repair": "fix", "film": "movie", "automobile": "car", "purchase": "buy",
    "large": "big", "begin": "start", "kid": "child", "children": "child",
    "photo": "picture", "photograph": "picture", "pic": "picture", "quickest": "fastest",
    "mistake": "error", "assist": "help", "simplest": "easiest", "method": "way",
    "u": "you", "ur": "your", "whats": "what", "tv": "television", "utilize": "use",
    "utilise": "use", "obtain": "get", "delete": "remove", "okay": "ok",
}  # fmt: skip
# Opposites, one axis per line: "word/opposite" pairs, aligned so that the generator can swap
# one for the other and stay grammatical ("-": no counterpart of that form). For the
# contrast check the words on one side of an axis are one another's synonyms ("enable" /
# "turn on" is no contrast, "enable" / "block" is). "_" joins a phrase ("log_in").
AXES = (
    "safe/unsafe safer/riskier safest/- safe/dangerous safe/risky",
    "good/bad healthy/unhealthy beneficial/harmful",
    "better/worse",
    "best/worst",
    "easy/difficult easy/hard easier/harder",
    "easiest/hardest",
    "enable/disable enabled/disabled enabling/disabling activate/deactivate allow/block "
    "allowed/blocked unblock/block show/hide display/- unhide/- turn_on/turn_off "
    "switch_on/switch_off "
    "-/deny -/forbid -/ban",
    "increase/decrease increasing/decreasing increased/decreased raise/lower boost/reduce "
    "-/reducing grow/shrink maximize/minimize increase/cut",
    "more/less -/fewer higher/lower",
    "high/low highest/lowest",
    "import/export importing/exporting imports/exports",
    "upload/download uploading/downloading",
    "encrypt/decrypt encrypted/decrypted encrypting/decrypting encryption/decryption",
    "encode/decode encoded/decoded encoding/decoding",
    "before/after",
    "minimum/maximum min/max",
    "buy/sell buying/selling purchase/-",
    "ascending/descending",
    "hot/cold hotter/colder warm/cool warmer/cooler",
    "open/close opening/closing -/shut",
    "add/remove adding/removing append/delete insert/deleting",
    "true/false",
    "fast/slow faster/slower quick/- quicker/-",
    "fastest/slowest quickest/-",
    "early/late earlier/later earliest/latest",
    "cheap/expensive cheaper/- cheapest/priciest -/pricey",
    "push/pull pushing/pulling",
    "start/stop starting/stopping begin/end beginning/ending -/finish -/quit -/quitting",
    "win/lose winning/losing gain/lose gaining/losing -/loss",
    "include/exclude including/excluding",
    "input/output",
    "send/receive sending/receiving",
    "deposit/withdraw",
    "lend/borrow lending/borrowing",
    "credit/debit",
    "arrive/depart arrival/departure arriving/departing",
    "inbound/outbound",
    "big/small bigger/smaller biggest/smallest large/- larger/- largest/-",
    "heavy/light heavier/lighter heaviest/lightest",
    "long/short longer/shorter longest/shortest",
    "thick/thin thicker/thinner thickest/thinnest thicken/thin thickening/thinning",
    "wide/narrow wider/narrower widest/narrowest widen/narrow widening/narrowing",
    "lighten/darken lightened/darkened lightening/darkening",
    "bright/dark brighter/darker brightest/darkest brighten/darken brightened/darkened "
    "brightening/darkening bright/dim",
    "left/right",
    "strong/weak stronger/weaker strongest/weakest",
    "rich/poor",
    "wet/dry",
    "positive/negative advantage/disadvantage advantages/disadvantages pro/con pros/cons "
    "benefit/drawback benefits/drawbacks upside/downside upsides/downsides merit/demerit "
    "merits/demerits strength/weakness strengths/weaknesses",
    "male/female men/women man/woman boy/girl boys/girls",
    "husband/wife boyfriend/girlfriend",
    "love/hate",
    "north/south",
    "east/west",
    "above/below",
    "inside/outside indoors/outdoors",
    "uppercase/lowercase upper/-",
    "zip/unzip zipping/unzipping",
    "follow/unfollow",
    "accept/reject -/decline",
    "legal/illegal",
    "agree/disagree",
    "overestimate/underestimate",
    "hire/fire hiring/firing",
    "expand/collapse expanding/collapsing",
    "pause/resume pausing/resuming",
    "speed_up/slow_down",
    "introvert/extrovert introverts/extroverts",
    "similar/different similarity/difference similarities/differences",
    "happy/sad",
    "success/failure",
    "first/last",
    "old/young",
    "public/private",
    "internal/external",
    "lock/unlock",
    "compress/decompress",
    "mount/unmount",
    "subscribe/unsubscribe",
    "possible/impossible",
    "connect/disconnect",
    "install/uninstall",
    "attack/defend",
    "ancient/modern",
    "inhale/exhale",
    "log_in/log_out sign_in/sign_out",
    "synonym/antonym synonyms/antonyms",
    "prevent/cure preventing/curing prevention/cure prevent/treat preventing/treating "
    "prevention/treatment",
)
# Axes whose sides are lists or figures the other side's answer does not give ("What are
# the drawbacks of X?" after "... the benefits of X?"), named by their first word; the
# verifier's directional check (``pair_checks.opposite_words``) reads only these.
# Comparatives ("more harmful" / "less harmful") are not among them: left to the models.
LIST_AXES = frozenset(
    "positive best easiest increase win buy import before start male husband rich love minimum "
    "introvert upload similar fastest".split()
)


def axis_pairs(axis: str) -> list[tuple[str, str]]:
    """An axis's aligned (word, opposite) pairs, "-" and all."""
    return [(a, b) for a, b in (item.split("/") for item in axis.split())]


def axis_sides(axis: str) -> tuple[frozenset[str], frozenset[str]]:
    """An axis's two sides as word sets (the "-" placeholders left out)."""
    pairs = axis_pairs(axis)
    return (
        frozenset(a for a, _ in pairs if a != "-"),
        frozenset(b for _, b in pairs if b != "-"),
    )


def verb_forms() -> dict[str, tuple[str, str]]:
    """Each verb of ``REGULAR_VERBS`` and ``IRREGULAR_VERBS``: its (past, participle)."""
    regular = {v: (regular_past(v),) * 2 for v in REGULAR_VERBS}
    return {**regular, **IRREGULAR_VERBS}


def stem(word: str) -> str:
    """Lower case, no possessive, no plural s: "Kings", "King's" and "king" are one."""
    w = word.lower().replace("\u2019", "'").removesuffix("'s").rstrip("'")
    return w[:-1] if len(w) > 3 and w.endswith("s") else w


def regular_past(verb: str) -> str:
    """The past of a regular verb: "cook" -> "cooked", "use" -> "used"."""
    return verb + "d" if verb.endswith("e") else verb + "ed"


def third_person(verb: str) -> str:
    """The third person of a verb: "make" -> "makes", "carry" -> "carries"."""
    if re.search("[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "es" if re.search("(s|sh|ch|x|z|o)$", verb) else verb + "s"
