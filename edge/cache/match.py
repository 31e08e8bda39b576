"""Should this cached answer be served for this question? (pure; no I/O)

Redis returns the nearest entries inside the request's hard partition (``partition``); this
module decides, in one chain of named steps (``Match.steps`` lists those that ran, the last
one decided; ``eval cache --show-false-hits`` and the debug log print them):

1. ``exact``: the same question, word for word, is served (whatever its cosine).
2. ``view:abbreviation``: a neighbour that is the new question reworded once an
   abbreviation is read as the words it stands for ("CPU" / "central processing unit",
   ``edge.cache.initialisms``: read from its letters, no table) is served, whatever its
   cosine: the bi-encoder puts many such pairs far below the floor.
   ``floor``: below ``floor`` cosine a neighbour is not even a candidate (no verifier run).
3. Without a verifier (none was prepared: its training data was absent) nothing else is
   served, unless the operator opted in to a plain cosine threshold (``min_similarity``).
4. ``veto:contrast``: a candidate whose question asks the opposite of the new one
   (``contrast_by``: a swapped direction or argument order, an antonym, a negation, another
   operator or number, an added condition) is never served, whatever its cosine or score:
   such pairs embed at 0.95-0.99 and QQP, the verifier's training data, rarely shows them.
   Another name or unit is left to ``told_apart`` and the models (stop 62: the veto for
   them refused nothing they would have served).
5. ``reworded``: a candidate that is the new question reworded (contractions, filler,
   plurals, listed synonyms, a moved qualifier; the same words in meaning, every operator,
   number and negation kept) is served: the MLP, trained on QQP's noisy near-identical
   pairs, refuses many of these.
6. Otherwise the pairwise verifier scores each candidate: ``view:order`` (when the asked
   question is a cached one with the two sides of an "and" / "or" / "vs", or of a predicate
   that takes them in either order ("how far is A from B"), the other way round, the
   models read it as that cached question, text and embedding: taught that
   swapped roles make other questions, they refuse "lions and tigers" / "tigers and
   lions"; ``view:voice`` likewise for the other voice with doer and done-to kept, "can my
   employer read my email" / "can my email be read by my employer",
   ``contrast_roles.voice_kept``), ``veto:told_apart`` (the asked
   question names or asks more than the cached one: score 0), ``scorer:mlp``, then
   ``scorer:cross_encoder`` on what the MLP did not settle; ``picker:delta`` serves the best
   one when the entry's estimated precision at that score is at least ``1 - delta``.

Typos (``edge.cache.spelling``): a cached question is read with its own typos fixed where
the asked one has the fixed word. On a miss, the cache step may look again with the asked
question's typos fixed (``decide_respelled``): the fixed question finds the neighbours, a
``spelling`` filter keeps those whose question has every fixed word or the same typo, and
the same chain then reads both questions through the same fixes. What either serves
through a fix has the reason ``respelled``.

The question inside a message (``edge.cache.preamble``): a greeting, a story or a sign-off
around the question puts it under the floor. On a miss, the cache step looks a third time
(``decide_in_context``): the one sentence that asks finds the neighbours and is what the
floor and the MLP read; the vetoes read it and the whole message; the cross-encoder reads
the whole message beside each cached question and must itself be sure, at the budget, that
nothing said around the question changes it ("I'm pregnant. Can I eat blue cheese?"); a
message too long for its window is not looked at this way. What it serves has the reason
``in_context``.

Per-entry adaptation, in the spirit of vCache (Schroeder et al., arXiv 2502.03771;
implemented from the paper): the verifier's held-out calibration is a prior worth
``prior_strength`` observations, and each entry's own history of (score, was the answer
right) updates it. Because correctness can only rise with the score, a right answer at a
lower score supports serving at this one, and a wrong answer at a higher score counts
against it. Entries that turned out wrong stop being served; entries that keep being
confirmed get served at lower scores. Labels come for free whenever a candidate was not
served (the fresh answer is compared with the cached one); to keep learning, a small and
shrinking share of would-be hits is sent to the model anyway ("explore").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from edge.cache.contrast import contrast_by
from edge.cache.contrast_roles import voice_kept
from edge.cache.contrast_trades import coordinated_swap
from edge.cache.decision import (
    NO_MATCH,
    Candidate,
    Match,
    MatchPolicy,
    Step,
    below_floor,
    closest_vetoed,
    confidence,
    vetoed,
)
from edge.cache.initialisms import abbreviated_as
from edge.cache.keys import normalize
from edge.cache.pair_checks import told_apart_by
from edge.cache.preamble import question_of
from edge.cache.rewording import reworded
from edge.cache.spelling import Respelling, Speller, read_alike
from edge.cache.verifier import Verifier, pair_features, stacked

# Characters past which a message cannot fit the cross-encoder's 128 tokens (a word piece
# averages about 4 characters of English).
_LONGEST_MESSAGE = 1000


def _view(cached: str, asked: str) -> str | None:
    """How ``asked`` reads as ``cached`` itself, if it does: "order" (a coordinated swap),
    "voice" (the other voice, doer and done-to kept)."""
    if coordinated_swap(cached, asked):
        return "order"
    return "voice" if voice_kept(cached, asked) else None


class Matcher:
    def __init__(
        self, verifier: Verifier | None, policy: MatchPolicy, speller: Speller | None = None
    ) -> None:
        self.verifier = verifier
        self.policy = policy
        self.speller = speller

    def with_policy(self, **changes: Any) -> Matcher:
        """The same models and speller under another policy (to measure one knob)."""
        return Matcher(self.verifier, replace(self.policy, **changes), self.speller)

    @property
    def blocking(self) -> bool:
        """Whether ``decide`` may take milliseconds (a cross-encoder run): call it off-loop."""
        return self.verifier is not None and self.verifier.cross is not None

    @property
    def semantic(self) -> bool:
        """Whether anything but a word-for-word repeat may be served."""
        return self.verifier is not None or self.policy.min_similarity is not None

    @property
    def threshold(self) -> float:
        """Verifier score above which a fresh entry is served (from ``delta``); over 1 when
        only exact repeats are served."""
        if self.verifier is None:
            return 1.01 if self.policy.min_similarity is None else self.policy.min_similarity
        return self.verifier.calibration.threshold(self.policy.delta)

    def decide(
        self,
        vector: np.ndarray,
        text: str,
        candidates: Sequence[Candidate],
        *,
        draw: float = 1.0,
    ) -> Match:
        """One chain, each step named in ``Match.steps`` (the last one decided):
        filters (``partition``: Redis's neighbours; ``exact``; ``view:abbreviation``;
        ``floor``) -> ``veto:contrast``
        -> ``reworded`` -> scorers (``scorer:cosine`` without a verifier; else
        ``veto:told_apart``, ``scorer:mlp``, ``scorer:cross_encoder``) -> ``picker:delta``.
        ``draw`` is a uniform random number in [0, 1) for exploration (1.0: never)."""
        steps = [Step("partition", f"{len(candidates)} neighbours")]
        read = self._read(candidates, text)
        match = self._chain(vector, text, read, draw, steps)
        if match.serve and not any(match.candidate is c for c in candidates):
            match = replace(match, reason="respelled")  # served as read through its fixes
        return replace(match, steps=tuple(steps))

    def _read(self, candidates: Sequence[Candidate], text: str) -> Sequence[Candidate]:
        """Each cached question with its own typos fixed where the asked one has the fixed
        word (``read_alike``: "how lnog ..." beside "how long ..."), else as written."""
        if self.speller is None or self.verifier is None:
            return candidates
        read = []
        for c in candidates:
            own = self._own(c.prompt)
            prompt = c.prompt if own is None else read_alike(c.prompt, own, text)
            read.append(c if prompt == c.prompt else replace(c, prompt=prompt))
        return read

    def _own(self, prompt: str) -> Respelling | None:
        """A cached question's own typos, fixed (memoised by the speller)."""
        return self.speller.respell(prompt) if self.speller is not None else None

    def respelling(self, text: str) -> Respelling | None:
        """The asked question with its typos fixed, when it has any the speller can fix and
        something besides word-for-word repeats may be served."""
        if self.speller is None or self.verifier is None:
            return None
        return self.speller.respell(text)

    def question_in(self, text: str) -> str | None:
        """The one sentence of ``text`` that asks, when something surrounds it and a
        cross-encoder is there to read the whole message (``decide_in_context``), and the
        message fits its window."""
        verifier = self.verifier
        if verifier is None or verifier.stack is None or verifier.cross is None:
            return None
        # A long paste never fits the window (128 tokens): skip it before any work (a
        # tokenizer pass over a long message took about 1 ms, on the event loop).
        if len(text) > _LONGEST_MESSAGE:
            return None
        question = question_of(text)
        return question if question and verifier.cross.reads_whole(text, "") else None

    def decide_respelled(
        self,
        vector: np.ndarray,
        respelled: Respelling,
        candidates: Sequence[Candidate],
        *,
        draw: float = 1.0,
    ) -> Match:
        """The second look: ``candidates`` are the neighbours of ``respelled`` (the asked
        question with its typos fixed), ``vector`` its embedding. ``spelling`` keeps those
        whose question has every fixed word or the same typo; then the chain as in
        ``decide``, reading both questions through the same fixes (``Respelling.read``). The
        candidate in the match carries its question as read."""
        steps = [Step("partition", f"{len(candidates)} neighbours")]
        fixed = ", ".join(f"{typo} > {word}" for typo, word in respelled.fixes)
        confirmed = [c for c in candidates if respelled.confirmed_by(c.prompt)]
        steps.append(Step("spelling", f"{len(confirmed)} of {len(candidates)} have {fixed}"))
        if not confirmed:
            best = max(candidates, key=lambda c: c.cosine, default=None)
            return Match(best, 0.0, 0.0, False, "unconfirmed", steps=tuple(steps))
        read = [replace(c, prompt=respelled.read(c.prompt, self._own(c.prompt))) for c in confirmed]
        match = self._chain(vector, respelled.text, read, draw, steps)
        if match.serve:
            match = replace(match, reason="respelled")
        return replace(match, steps=tuple(steps))

    def _chain(
        self,
        vector: np.ndarray,
        text: str,
        candidates: Sequence[Candidate],
        draw: float,
        steps: list[Step],
    ) -> Match:
        p = self.policy
        query = normalize(text)
        for c in candidates:  # the same words: whatever the floor
            if normalize(c.prompt) == query:
                steps.append(Step("exact", "the same words"))
                return Match(c, 1.0, 1.0, True, "exact")
        if self.semantic:  # an abbreviation spelled out: whatever the floor
            for c in candidates:
                view = abbreviated_as(c.prompt, text)
                if view is None or not reworded(c.prompt, view):
                    continue
                if p.contrast and contrast_by(c.prompt, view) is not None:
                    continue
                steps.append(Step("view:abbreviation", f"read as {view!r}: reworded"))
                return Match(c, 1.0, 1.0, True, "reworded")
        live = [c for c in candidates if c.cosine >= p.floor]
        steps.append(Step("floor", f"{len(live)} of {len(candidates)} at cosine >= {p.floor:.2f}"))
        if not live:
            return below_floor(candidates)
        if not self.semantic:
            steps.append(Step("exact_only", "no verifier: only the same words are served"))
            best = max(live, key=lambda c: c.cosine)
            return Match(best, 0.0, 0.0, False, "exact_only")
        # Every candidate, whatever its cosine or score.
        told = [contrast_by(c.prompt, text) if p.contrast else None for c in live]
        steps.append(Step("veto:contrast", vetoed(told)))
        if all(told):
            return closest_vetoed(live, told)
        live = [c for c, why in zip(live, told, strict=True) if why is None]
        for c in live:  # the same question in other words: no model needed
            if reworded(c.prompt, text):
                steps.append(Step("reworded", "the same words in meaning"))
                return Match(c, 1.0, 1.0, True, "reworded")
        steps.append(Step("reworded", f"none of {len(live)}"))
        if self.verifier is None:
            assert p.min_similarity is not None  # self.semantic
            best = max(live, key=lambda c: c.cosine)
            ok = best.cosine >= p.min_similarity
            steps.append(Step("scorer:cosine", f"{best.cosine:.3f} vs {p.min_similarity:.2f}"))
            return Match(best, best.cosine, best.cosine, ok, "cosine" if ok else "rejected")
        scored = [c for c in live if c.vector is not None]
        if not scored:
            return Match(live[0], 0.0, 0.0, False, "rejected")
        # The models read a coordinated swap as the cached question itself: only the order
        # of the two sides differs, and it is free there. The MLP alone, given the two
        # texts in one order but each question's own embedding, refused "How do wolves and
        # coyotes differ?" / "How do coyotes and wolves differ?" (0.57 at cosine 0.99):
        # the embeddings carry the order. What still decides is the picker: the entry's
        # own history and exploration. The other voice, doer and done-to kept, is read so
        # too ("can my employer read my email" / "can my email be read by my employer").
        views = [_view(c.prompt, text) for c in scored]
        swaps = [view is not None for view in views]
        pairs = [
            (c.prompt, c.prompt if swap else text) for c, swap in zip(scored, swaps, strict=True)
        ]
        for kind in ("order", "voice"):
            if n := views.count(kind):
                steps.append(Step(f"view:{kind}", f"{n} read as the cached question"))
        apart = [told_apart_by(*pair) for pair in pairs]
        steps.append(Step("veto:told_apart", vetoed(apart)))
        features = np.stack(
            [
                pair_features(c.vector, c.vector if swap else vector, *pair)  # type: ignore[arg-type]
                for c, swap, pair in zip(scored, swaps, pairs, strict=True)
            ]
        )
        scores = self._scores(features, pairs, scored, np.array([bool(w) for w in apart]), steps)
        return self._pick(scored, scores, draw, steps)

    def _pick(
        self, scored: Sequence[Candidate], scores: np.ndarray, draw: float, steps: list[Step]
    ) -> Match:
        """``picker:delta``: the best-scored candidate, served when the entry's estimated
        precision at its score is at least ``1 - delta`` (unless drawn to explore)."""
        p = self.policy
        i = int(np.argmax(scores))
        best, score = scored[i], float(scores[i])
        conf = self._confidence(score, best)
        bar = 1.0 - p.delta
        if conf < bar:
            steps.append(Step("picker:delta", f"confidence {conf:.3f} < {bar:.3f}: refused"))
            return Match(best, score, conf, False, "rejected")
        # Explore less as the entry's history grows: its estimate needs fewer checks.
        rate = p.explore_rate * p.prior_strength / (p.prior_strength + len(best.observations))
        if draw < rate:
            steps.append(Step("picker:delta", f"confidence {conf:.3f} >= {bar:.3f}: explored"))
            return Match(best, score, conf, False, "explore")
        steps.append(Step("picker:delta", f"confidence {conf:.3f} >= {bar:.3f}: served"))
        return Match(best, score, conf, True, "verified")

    def decide_in_context(
        self,
        vector: np.ndarray,
        question: str,
        asked: str,
        candidates: Sequence[Candidate],
        *,
        draw: float = 1.0,
    ) -> Match:
        """The third look: ``candidates`` are the neighbours of ``question``, the one
        sentence of ``asked`` that asks (``preamble.question_of``), and ``vector`` is its
        embedding. The floor, the vetoes and the MLP read the question; the vetoes read the
        whole message too, and the cross-encoder reads it beside each cached question, so
        what was said around the question can still refuse ("I'm pregnant. is it safe to eat
        sushi?"). The cross-encoder always runs: nothing is served here without it."""
        steps = [
            Step("partition", f"{len(candidates)} neighbours"),
            Step("view:question", f"read as {question!r}"),
        ]
        verifier, p = self.verifier, self.policy
        if verifier is None or verifier.stack is None or verifier.cross is None:
            steps.append(Step("scorer:cross_encoder", "none to read the whole message"))
            return replace(NO_MATCH, steps=tuple(steps))
        live = [c for c in candidates if c.cosine >= p.floor and c.vector is not None]
        steps.append(Step("floor", f"{len(live)} of {len(candidates)} at cosine >= {p.floor:.2f}"))
        if not live:
            return replace(below_floor(candidates), steps=tuple(steps))
        # A message longer than the cross-encoder's window would be judged on a part of it.
        whole = [c for c in live if verifier.cross.reads_whole(c.prompt, asked)]
        steps.append(Step("view:whole", f"{len(whole)} of {len(live)} fit the cross-encoder"))
        if not whole:
            return Match(live[0], 0.0, 0.0, False, "rejected", steps=tuple(steps))
        live = whole
        # The whole message's numbers ("my 4 year old asked me", "a 5 lb chihuahua") are
        # the cross-encoder's to weigh: it refused all 89 on the context set where they
        # change the answer, and the veto refused 15 more where they do not.
        told = [
            (contrast_by(c.prompt, question) or contrast_by(c.prompt, asked, numbers=False))
            if p.contrast
            else None
            for c in live
        ]
        steps.append(Step("veto:contrast", vetoed(told)))
        if all(told):
            return replace(closest_vetoed(live, told), steps=tuple(steps))
        live = [c for c, why in zip(live, told, strict=True) if why is None]
        apart = [told_apart_by(c.prompt, question) or told_apart_by(c.prompt, asked) for c in live]
        steps.append(Step("veto:told_apart", vetoed(apart)))
        features = np.stack(
            [pair_features(c.vector, vector, c.prompt, question) for c in live]  # type: ignore[arg-type]
        )
        refused = np.array([bool(w) for w in apart])
        mlp = np.where(refused, 0.0, verifier.score_features(features)).astype(np.float32)
        steps.append(Step("scorer:mlp", f"best {float(mlp.max()):.3f}"))
        # The MLP read the question alone, so it cannot speak for what surrounds it: the
        # cross-encoder, reading the whole message, must itself be sure. Its logit must reach
        # what a calibrated model would need for P >= 1 - delta; this one's logits run low (a
        # question beside itself: 1.5-2.4), so the bar is strict.
        cross = verifier.cross.logits([(c.prompt, asked) for c in live])
        sure = cross >= np.log((1.0 - p.delta) / p.delta)
        scores = np.where(sure, stacked(mlp, cross, verifier.stack), 0.0)
        steps.append(
            Step(
                "scorer:cross_encoder",
                f"{int(sure.sum())} of {len(live)} sure with the whole message",
            )
        )
        match = self._pick(live, scores, draw, steps)
        if match.serve:
            match = replace(match, reason="in_context")
        return replace(match, steps=tuple(steps))

    def _confidence(self, score: float, candidate: Candidate) -> float:
        assert self.verifier is not None
        prior = self.verifier.calibration.precision_at(score)
        return confidence(score, prior, candidate.observations, self.policy.prior_strength)

    def _scores(
        self,
        features: np.ndarray,
        pairs: list[tuple[str, str]],
        scored: list[Candidate],
        apart: np.ndarray,
        steps: list[Step],
    ) -> np.ndarray:
        """Final scores (0 for a pair told apart). The cross-encoder reads only the pairs
        whose decision it can change: where the lowest score it could give is served anyway,
        or the highest is still refused, its run is skipped (the borderline band)."""
        verifier = self.verifier
        assert verifier is not None
        mlp = np.where(apart, 0.0, verifier.score_features(features)).astype(np.float32)
        steps.append(Step("scorer:mlp", f"best {float(mlp.max()):.3f}"))
        if verifier.stack is None or verifier.cross is None:
            return mlp
        if not self.policy.band:
            steps.append(Step("scorer:cross_encoder", f"every pair ({len(pairs)})"))
            return verifier.stacked_scores(mlp, pairs, range(len(pairs)))
        low, high = verifier.bounds(mlp)
        bar = 1.0 - self.policy.delta
        sure = [i for i, c in enumerate(scored) if self._confidence(float(low[i]), c) >= bar]
        if sure:  # served whatever it says: the surest such candidate
            steps.append(Step("scorer:cross_encoder", "not read: served whatever it says"))
            return np.where(np.isin(np.arange(len(scored)), sure), low, -1.0)
        maybe = [i for i, c in enumerate(scored) if self._confidence(float(high[i]), c) >= bar]
        if not maybe:  # refused whatever it says
            steps.append(Step("scorer:cross_encoder", "not read: refused whatever it says"))
            return low
        steps.append(Step("scorer:cross_encoder", f"{len(maybe)} of {len(pairs)} in the band"))
        scores = np.full(len(scored), -1.0, dtype=np.float32)
        scores[maybe] = verifier.stacked_scores(mlp, pairs, maybe)
        return scores
