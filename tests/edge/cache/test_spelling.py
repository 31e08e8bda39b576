"""The cache's second look at a question with typos (edge.cache.spelling): which words are
fixed, that the second look reads both questions through the same fixes (from a cached
question that has the fixed word), and the cache step's second lookup. The dictionary
is the real one (symspellpy's); the store and the embedder are fakes, the verifier a
stand-in that reads the cosine."""

from __future__ import annotations

import asyncio
import gc
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.datastructures import Headers

from edge.cache.decision import Candidate, MatchPolicy
from edge.cache.match import Matcher
from edge.cache.spelling import Respelling, Speller, embedder_words, respell, typo_of
from edge.cache.step import CacheStep
from edge.cache.store import CachedAnswer, CacheUnavailable
from edge.context import Answer
from edge.embedder import BatchingEmbedder
from edge.settings import CacheSettings
from edge.tenancy.keys import Tenant
from shared.lexicon import NEGATIONS
from tests.edge.cache.test_decision import cosine_verifier, unit
from tests.edge.cache.test_step import METRICS, Store, context, request
from tests.edge.fakes import Embedder


@pytest.fixture(scope="module")
def speller() -> Speller:
    return Speller()


def test_the_dictionary_gives_the_garbage_collector_nothing_to_walk() -> None:
    """symspellpy's own index was about 400,000 tracked objects: each full collection then
    paused the event loop for 110 ms instead of 1.5 ms."""
    Speller()  # the imports, once
    gc.collect()
    before = len(gc.get_objects())
    speller = Speller()
    assert len(gc.get_objects()) - before < 100
    assert speller.known("restart") and not speller.known("restrat")


def test_unknown_words_are_fixed_to_the_nearest_known_one(speller: Speller) -> None:
    fixed = speller.respell("how do i restrat my router")
    assert fixed is not None and fixed.text == "how do i restart my router"
    assert fixed.fixes == (("restrat", "restart"),)
    both = speller.respell("whats the diffrence between a tablspoon and a cup?")
    assert both is not None
    assert both.text == "whats the difference between a tablespoon and a cup?"
    # Where a sentence starts, a capitalised word is read in lower case, and keeps its capital.
    opening = speller.respell("Waht is photosyntesis? Whree does it happen?")
    assert opening is not None
    assert opening.text == "What is photosynthesis? Where does it happen?"
    assert opening.fixes[0] == ("waht", "what")


@pytest.mark.parametrize(
    "text",
    [
        "how do I restart my router",  # nothing misspelt
        "what is async in python",  # "sync" changes the first letter
        "how to restart a pod in k8s",  # digits: as written
        "is coffee bad for ur heart",  # under four letters
        "What does Kubernets do",  # capitalised past a sentence start: a name
        "how do I restart my SERVRE",  # all capitals: an acronym
        "what is sharding in databases",  # real words the dictionary lacks: a letter put in
        "how do I use a struct in c",  # or another in place of one
        "call torch.utils.data or iter_files on `bool`",  # identifiers
    ],
)
def test_what_is_left_as_written(speller: Speller, text: str) -> None:
    assert speller.respell(text) is None


@pytest.mark.parametrize(
    ("typo", "word", "slip"),
    [
        ("restrat", "restart", True),  # two neighbours swapped
        ("cofee", "coffee", True),  # a letter left out
        ("grappes", "grapes", True),  # a letter doubled
        ("sharding", "sharing", False),  # another letter put in
        ("struct", "struck", False),  # one in place of another
        ("rtsetar", "restart", False),  # swapped, but not neighbours
        ("restart", "restart", False),
    ],
)
def test_a_slip_of_the_hand(typo: str, word: str, slip: bool) -> None:
    assert typo_of(typo, word) is slip


def test_a_fix_keeps_the_first_letter_and_needs_a_slip() -> None:
    def known(word: str) -> bool:
        return word in {"house", "mouse", "shore"}

    nearest = {"huose": "house", "muose": "house", "qwrtz": None, "shorre": "shore"}.get
    fixed = respell("a (huose), a muose, a qwrtz, a shorre.", known, nearest)
    assert fixed is not None and fixed.text == "a (house), a muose, a qwrtz, a shore."
    assert fixed.fixes == (("huose", "house"), ("shorre", "shore"))
    assert respell("a house", known, nearest) is None


@pytest.mark.parametrize(
    ("text", "fixed"),
    [
        ("how to aply for financial aid", "how to apply for financial aid"),  # aptly, amply
        ("best way to stor fresh basil", "best way to store fresh basil"),  # story, storm
        ("why is my interent slow at night", "why is my internet slow at night"),  # interment
    ],
)
def test_of_several_slips_the_most_common_word_is_the_fix(
    speller: Speller, text: str, fixed: str
) -> None:
    respelled = speller.respell(text)
    assert respelled is not None and respelled.text == fixed


def test_a_word_the_embedder_reads_whole_is_no_typo(models_dir: Path) -> None:
    """The word "math" is missing from the dictionary ("maths" is there): it was fixed to
    "match". The embedder's vocabulary knows it, as it knows no typo of the contrast sets."""
    words = embedder_words(models_dir / "all-minilm-l6-v2-onnx" / "tokenizer.json")
    assert {"math", "cyber", "sulfate"} <= set(words) and not {"##ing", "[CLS]"} & set(words)
    assert Speller().respell("help with math homework") is not None
    guarded = Speller(words)
    assert guarded.respell("help with math homework") is None
    fixed = guarded.respell("help with math homwork")  # a typo still is one
    assert fixed is not None and fixed.fixes == (("homwork", "homework"),)


def test_a_wrong_guess_finds_no_cached_question_to_confirm_it(speller: Speller) -> None:
    """The typo "strng" could be "string" or "strong"; the commoner guess is wrong here, and
    costs a miss: a cached question without the guessed word never confirms it."""
    guess = speller.respell("how do i split a strng")
    assert guess is not None and guess.fixes == (("strng", "strong"),)
    assert not guess.confirmed_by("how do I split a string")
    assert guess.confirmed_by("how do I split a strng")  # the same typo, stored respelled


def test_a_fix_is_confirmed_only_by_a_cached_question_with_the_word(speller: Speller) -> None:
    fixed = speller.respell("how do i restrat my router")
    assert fixed is not None
    assert fixed.confirmed_by("How do I RESTART my router?")
    assert not fixed.confirmed_by("how do I reboot my router")


WORDS = ["restrat", "router", "not", "never", "Berlin", "3x", "+", "-", "=", "2", "10%"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(WORDS) | st.from_regex(r"[a-z]{1,9}", fullmatch=True), max_size=12))
def test_only_misspelt_lowercase_words_change(speller: Speller, words: list[str]) -> None:
    """Operators, digits, negations, capitalised words and punctuation always survive."""
    text = " ".join(words)
    fixed = speller.respell(text)
    if fixed is None:
        return
    before, after = text.split(" "), fixed.text.split(" ")
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        if old != new:
            assert re.fullmatch(r"[a-z]{4,}", old) and not speller.known(old)
            assert new[0] == old[0] and old not in NEGATIONS and typo_of(old, new)


def answer(entry: str) -> CachedAnswer:
    return CachedAnswer("Unplug it for ten seconds.", "stop", None, "m", 0.0, entry)


def test_the_second_look_reads_both_questions_through_the_same_fixes(speller: Speller) -> None:
    matcher = Matcher(cosine_verifier(), MatchPolicy(floor=0.8), speller)
    q = unit(1, 0, 0, 0)
    cached = "how do i restart my router"
    fixed = matcher.respelling("how do i restrat my router")
    assert fixed is not None
    served = matcher.decide_respelled(q, fixed, [Candidate("e1", 0.86, cached, q)])
    assert (served.serve, served.reason, served.decided_by) == (True, "respelled", "exact")
    assert [s.name for s in served.steps][:2] == ["partition", "spelling"]
    # Another question with the same typo: the models decide on the fixed words.
    modem = matcher.respelling("how do i restrat my modem")
    assert modem is not None
    far = Candidate("e1", 0.86, cached, unit(0.86, float(np.sqrt(1 - 0.86**2)), 0, 0))
    refused = matcher.decide_respelled(q, modem, [far])
    assert (refused.serve, refused.reason, refused.decided_by) == (
        False,
        "rejected",
        "picker:delta",
    )
    # A cached question without the fixed word (or the typo) is not a candidate for the guess.
    reboot = Candidate("e2", 0.99, "reboot my router", q)
    other = matcher.decide_respelled(q, fixed, [reboot])
    assert (other.serve, other.reason, other.decided_by) == (False, "unconfirmed", "spelling")


def test_a_typo_both_share_is_read_alike_on_both_sides() -> None:
    # Were "json" read as "jason" on the asked side only, the swapped direction would hide.
    asked = Respelling("convert yaml to jason", (("json", "jason"),))
    assert asked.read("Convert JSON to YAML, json first", None) == (
        "Convert JASON to YAML, jason first"
    )
    matcher = Matcher(cosine_verifier(), MatchPolicy(floor=0.8))
    q = unit(1, 0, 0, 0)
    swapped = matcher.decide_respelled(q, asked, [Candidate("e1", 0.99, "convert json to yaml", q)])
    assert (swapped.serve, swapped.reason, swapped.contrast) == (False, "contrast", "direction")
    # The cached question's own typos are fixed where the asked one has the word.
    own = Respelling("how lnog to boil an egg", (("lnog", "long"),))
    assert Respelling("how long to boil an egg", (("x", "y"),)).read(own.text, own) == (
        "how long to boil an egg"
    )


def test_a_cached_question_is_read_with_its_typos_fixed_beside_the_words(
    speller: Speller,
) -> None:
    matcher = Matcher(cosine_verifier(), MatchPolicy(floor=0.8), speller)
    q = unit(1, 0, 0, 0)
    typo = Candidate("e1", 0.99, "how lnog to boil an egg", q)
    same = matcher.decide(q, "How long to boil an egg", [typo])
    assert (same.serve, same.reason, same.decided_by) == (True, "respelled", "exact")
    assert same.candidate is not None and same.candidate.entry_id == "e1"
    # Beside a question without "long", it is read as written: not the same words.
    other = matcher.decide(q, "how to boil an egg", [typo])
    assert other.decided_by != "exact" and other.reason != "respelled"


def test_no_second_look_without_a_verifier(speller: Speller) -> None:
    assert Matcher(None, MatchPolicy(min_similarity=0.9), speller).respelling("restrat") is None


class TwoLooks(Store):
    """Each KNN search answers the next list: the asked words, then the respelled ones."""

    def __init__(self, *looks: list[tuple[Candidate, CachedAnswer]] | None) -> None:
        super().__init__()
        self.looks = list(looks)

    async def lookup(self, *_: Any, **__: Any) -> list[tuple[Candidate, CachedAnswer]]:
        self.reads += 1
        near = self.looks.pop(0)
        if near is None:
            raise CacheUnavailable("down")
        return near


class Recording(Embedder):
    """The fake embedder, keeping each text it was asked to embed."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed_counted(self, items: list[Any]) -> tuple[np.ndarray, list[int]]:
        self.texts.extend(str(i) for i in items)
        return super().embed_counted(items)


def ask(
    speller: Speller | None,
    store: TwoLooks,
    text: str,
    *,
    embedder: Recording | None = None,
    headers: Headers | None = None,
    answer: Answer | None = None,
) -> tuple[Any, str]:
    """The cache step's lookup for ``text`` (then ``remember`` of ``answer``, if given):
    what it found, and the request's cache outcome."""
    step = CacheStep(
        store,  # type: ignore[arg-type]
        BatchingEmbedder(embedder or Recording()),  # type: ignore[arg-type]
        Matcher(cosine_verifier(), MatchPolicy(floor=0.8), speller),
        METRICS,
        CacheSettings(),
        redis_timeout_s=1.0,
    )
    ctx = context()

    async def run() -> Any:
        assert step.embedder is not None
        step.embedder.start()
        try:
            found = await step.lookup(request(text), headers or Headers({}), ctx, Tenant())
            if answer is not None:
                step.remember(found, answer)
                await step.drain()
            return found
        finally:
            await step.embedder.close()

    return asyncio.run(run()), ctx.cache


CACHED = "how do i restart my router"
TYPO = "how do i restrat my router"


def looks() -> tuple[list[tuple[Candidate, CachedAnswer]], list[tuple[Candidate, CachedAnswer]]]:
    vector = np.full(4, 0.5, dtype=np.float32)  # what the fake embedder gives every text
    far = [(Candidate("e1", 0.62, CACHED, vector), answer("e1"))]  # the typo: under the floor
    near = [(Candidate("e1", 0.99, CACHED, vector), answer("e1"))]
    return far, near


def test_the_step_looks_again_with_the_typos_fixed(speller: Speller) -> None:
    store = TwoLooks(*looks())
    found, outcome = ask(speller, store, TYPO)
    assert found.hit is not None and found.hit.entry_id == "e1" and outcome == "hit"
    assert store.reads == 3  # exact words, the asked question's neighbours, the respelled


def test_without_typos_or_a_speller_there_is_one_look(speller: Speller) -> None:
    store = TwoLooks(*looks())
    found, outcome = ask(speller, store, CACHED + " now")
    assert found.hit is None and outcome == "miss" and store.reads == 2
    store = TwoLooks(*looks())
    found, outcome = ask(None, store, TYPO)
    assert found.hit is None and outcome == "miss" and store.reads == 2


def test_a_failing_second_lookup_leaves_the_miss(speller: Speller) -> None:
    far, _ = looks()
    found, outcome = ask(speller, TwoLooks(far, None), TYPO)
    assert found is not None and found.hit is None and outcome == "miss"


@pytest.mark.parametrize(
    ("question", "embedded"),
    [(TYPO, [f"user: {TYPO}", f"user: {CACHED}"]), (CACHED, [f"user: {CACHED}"])],
)
def test_an_entry_with_typos_is_stored_under_its_respelled_vector(
    speller: Speller, question: str, embedded: list[str]
) -> None:
    """So that the question asked without the typos finds it (its first look). Each text is
    embedded once: the store reuses the second look's respelled vector."""
    store, embedder = TwoLooks([], []), Recording()
    ask(speller, store, question, embedder=embedder, answer=Answer("Unplug it.", "stop", None, "m"))
    assert [a.prompt for a in store.stored] == [question]  # the text as asked
    assert embedder.texts == embedded


def test_a_refresh_embeds_the_respelled_question_to_store_it(speller: Speller) -> None:
    store, embedder = TwoLooks(), Recording()
    refresh = Headers({"x-edgecore-cache": "refresh"})  # write only: no look at all
    stored = Answer("Unplug it.", "stop", None, "m")
    ask(speller, store, TYPO, embedder=embedder, headers=refresh, answer=stored)
    assert store.reads == 0 and len(store.stored) == 1
    assert embedder.texts == [f"user: {TYPO}", f"user: {CACHED}"]
