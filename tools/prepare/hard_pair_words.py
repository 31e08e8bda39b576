"""The word tables of the hard-pair generator (``hard_pairs``): which rewrite of a
training question changes what it asks, and which keeps it. Data only, no logic.

These tables make *training* pairs only. The words the decision's checks read too
(opposites, synonyms) are ``shared.lexicon``'s, and the generator reads them from there, so
what the rules veto and what the models learn cannot drift apart.
"""

from __future__ import annotations

# Rewrites that keep a question though the words are no synonyms everywhere (the
# conservative synonyms are ``shared.lexicon.SYNONYMS``, which the generator uses too).
PHRASINGS = (
    ("how do i", "how can i"), ("how do you", "how can you"), ("what are some", "what are"),
    ("is it possible to", "can i"), ("a lot of", "many"), ("get rid of", "remove"),
    ("movies", "films"), ("kids", "children"), ("photos", "pictures"), ("choose", "pick"),
    ("ways", "methods"), ("tips", "advice"), ("job", "occupation"), ("smart", "intelligent"),
    ("idea", "notion"), ("simple", "easy"), ("rapidly", "quickly"), ("mistakes", "errors"),
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
CONDITIONS = (
    " without a computer", " if I have diabetes", " in winter", " for free", " on Linux",
    " on a Mac", " without losing data", " if I am under 18", " while pregnant",
    " after surgery", " in less than a week", " with no experience", " as a foreigner",
    " on a budget", " without a degree", " if I am over 60", " at night", " in India",
    " without internet", " using only a phone",
)  # fmt: skip

# Roles of one relation: a question about one side is not a question about the other
# ("can the sender recall a wire" / "can the recipient recall a wire").
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
# Goals that pull apart with no antonym word between them: "how do I apply for a patent"
# is not "how do I oppose a patent".
INTENTS = (
    ("apply for", "oppose"), ("support", "oppose"), ("prevent", "cause"), ("avoid", "find"),
    ("join", "leave"), ("learn", "teach"), ("attract", "repel"), ("save", "spend"),
    ("accept", "refuse"), ("approve", "deny"), ("build", "destroy"), ("create", "delete"),
    ("promote", "demote"), ("praise", "criticize"), ("trust", "doubt"),
    ("remember", "forget"), ("pass", "fail"), ("admit", "deny"), ("confirm", "cancel"),
    ("invest in", "sell"), ("ask for", "turn down"), ("cure", "cause"),
    ("charge", "drain"), ("wake up", "fall asleep"), ("make friends", "lose friends"),
    ("gain weight", "lose weight"), ("quit", "start"), ("celebrate", "mourn"),
    ("protect", "attack"), ("fix", "break"), ("obey", "break"), ("raise", "lower"),
    ("memorize", "forget"), ("tighten", "loosen"), ("freeze", "thaw"), ("include", "exclude"),
)  # fmt: skip
# Operators of formulas and code, each with one that changes what is computed.
OPERATORS = {
    "+": "-", "-": "+", "*": "/", "/": "*", "^": "*", "<": ">", ">": "<", "<=": ">=",
    ">=": "<=", "==": "!=", "!=": "==", "=": "<", "&&": "||", "||": "&&", "++": "--",
    "--": "++", "+=": "-=", "-=": "+=",
}  # fmt: skip
# Openers people type before the question; they ask nothing.
PREAMBLES = (
    "Hi, quick question: ", "Hey, ", "Hello! ", "Quick question: ", "I was wondering, ",
    "Can someone tell me: ", "Sorry if this is a dumb question, but ", "Just curious: ",
    "I have a question. ", "Hi all, ", "Help me out here: ", "Question: ", "So, ",
    "Hey guys, ", "Serious question: ", "Asking for a friend: ",
)  # fmt: skip
# A long form and its short one, either way round.
ABBREVIATIONS = (
    ("kubernetes", "k8s"), ("New York City", "NYC"), ("New York", "NY"),
    ("United States", "US"), ("United States", "USA"), ("United Kingdom", "UK"),
    ("machine learning", "ML"), ("artificial intelligence", "AI"), ("JavaScript", "JS"),
    ("database", "DB"), ("operating system", "OS"), ("application", "app"),
    ("information", "info"), ("documentation", "docs"), ("internationalization", "i18n"),
    ("for example", "e.g."), ("versus", "vs"), ("San Francisco", "SF"), ("Los Angeles", "LA"),
    ("television", "TV"), ("personal computer", "PC"), ("as soon as possible", "ASAP"),
    ("frequently asked questions", "FAQ"), ("graphics card", "GPU"),
    ("by the way", "btw"), ("in my opinion", "IMO"), ("mobile phone", "cell phone"),
    ("laboratory", "lab"), ("mathematics", "math"), ("examination", "exam"),
    ("advertisement", "ad"), ("photograph", "photo"), ("refrigerator", "fridge"),
    ("regular expression", "regex"), ("repository", "repo"), ("configuration", "config"),
    ("environment", "env"), ("approximately", "approx."), ("European Union", "EU"),
    ("United Nations", "UN"), ("Master of Business Administration", "MBA"),
)  # fmt: skip
