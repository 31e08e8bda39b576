"""Contrast pairs: does the cache serve the answer to the opposite question?

    .venv/bin/python -m bench.contrast_eval [--limit N] [--data DIR]

Runs the shipped decision (``edge.cache.loading.load_matcher`` with the default settings:
the verifier stacked with the cross-encoder, ``CACHE__FALSE_HIT_BUDGET``,
``CACHE__CANDIDATE_FLOOR``) as if ``text_a`` were cached and ``text_b`` asked, with the
contrast veto (``edge.cache.contrast.contrast_by``) and without it, on the sets below.
Since stop 61 the cross-encoder trains on the sets up to blind9
(``tools.prepare.written_pairs``): on those, figures are training figures. The hold-out set
and blind10 onwards are never trained on.

* ``tests/data/contrast_dev.jsonl``, the public contrast dev set (written for edgecore):
  opposite-meaning pairs by kind (swapped direction or order, antonyms,
  negation, numbers, units, names, added conditions) and true paraphrases (contractions,
  synonyms, rewordings, reordered clauses). Targets: 0 opposites served, paraphrase recall
  at least 0.50. The contrast rules were written alongside this set, so it shows what they
  catch, not how they generalise;
* ``tests/data/contrast_holdout.jsonl``, a second set written after the rules were, in the
  same kinds: its first run (before any rule was changed) is the generalisation figure;
* ``tests/data/contrast_blind.jsonl``, a third set written blind (by someone who saw
  neither the other sets nor the rules), before it was first run: 130 opposites and 89
  paraphrases in the same kinds. Its first run (2 opposites served, paraphrase recall
  0.26 on the `make test` build) is the blind figure; a few rules came from reading its
  misses after that ("non-" negates, "one" is "1", a moved purpose clause or adverb,
  delete/remove), so later runs on it are optimistic too;
* ``tests/data/contrast_blind2.jsonl``, a fourth set written blind for issue 32 (by a
  helper who saw no code, rule or earlier set): 351 different questions in new kinds (role
  swaps, sibling entities, added scope, antonyms, intent flips, formulas, numbers,
  negations, directions) and 189 true rewordings (typos, preambles, voice, abbreviations,
  symmetric comparisons, few shared words, synonyms, reordering, contractions and filler).
  Its first run is in ``docs/cache.md``; from then on it is a dev set;
* ``tests/data/contrast_blind3.jsonl``, a fifth set written blind at stop 51 the same way
  (at least 320 different questions and 160 rewordings in the same kinds), after the rules
  it measures; its first run is in ``docs/cache.md``, and from then on it is a dev set too;
* ``tests/data/contrast_blind4.jsonl``, a sixth set written blind at stop 53 the same way
  (306 different questions, 163 rewordings, after 38 pairs already in earlier sets were
  left out); its first runs, on the landed models and on the retrained ones, are in
  ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind5.jsonl``, a seventh set written blind at stop 54 the same way
  (341 different questions, 176 rewordings, after 43 pairs already in earlier sets were
  left out), run first on stop 53's models and code as landed; its first run is in
  ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind6.jsonl``, an eighth set written blind at stop 55 the same way
  (323 different questions, 166 rewordings, after 48 pairs already in earlier sets were
  left out), run first on stop 54's code as landed and on this stop's abbreviation view;
  its first runs are in ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind7.jsonl``, a ninth set written blind at stop 56 the same way
  (337 different questions, 186 rewordings, after 20 pairs already in earlier sets were
  left out), run first on stop 55's models and code as landed and on this stop's retrained
  models; its first runs are in ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind8.jsonl``, a tenth set written blind at stop 57 the same way
  (328 different questions, 189 rewordings, after 61 pairs already in earlier sets were
  left out), run first on stop 56's models with stop 56's code as landed and with this
  stop's rules; its first runs are in ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind9.jsonl``, an eleventh set written blind at stop 58 the same way
  (358 different questions, 215 rewordings, after 42 pairs already in earlier sets were
  left out), run first on stop 57's models and code as landed; its first runs are in
  ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind10.jsonl``, a twelfth set written blind at stop 59 the same way
  (369 different questions, 224 rewordings, after 48 pairs already in earlier sets were
  left out), run first on stop 58's models and code as landed; its first run is in
  ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind11.jsonl``, a thirteenth set written blind at stop 60 the same
  way (314 different questions, 194 rewordings, after 133 pairs already in earlier sets were
  left out), run first on stop 59's models and code as landed; its first run is in
  ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind12.jsonl``, a fourteenth set written blind at stop 60 the same
  way (388 different questions, 261 rewordings, after 79 pairs already in earlier sets were
  left out), run first on stop 60's code after blind11's mends (stop 59's models); its first
  run is in ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind13.jsonl``, a fifteenth set written blind at stop 60 the same
  way (365 different questions, 243 rewordings, after 88 pairs already in earlier sets were
  left out), run first on stop 60's code after blind12's mends (stop 59's models); its first
  run is in ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind14.jsonl``, a sixteenth set written blind at stop 61 the same
  way (371 different questions, 247 rewordings, after 109 pairs already in earlier sets were
  left out), run first on stop 60's models and code as landed; its first run is in
  ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind15.jsonl``, a seventeenth set written blind at stop 62 the same
  way (369 different questions, 238 rewordings, after 150 pairs already in earlier sets were
  left out), run first on stop 61's models and code as landed; its first run is in
  ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind16.jsonl``, an eighteenth set written blind at stop 63 the same
  way (371 different questions, 252 rewordings, after 125 pairs already in earlier sets were
  left out), run first on stop 62's models and code as landed; its first run is in
  ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind17.jsonl``, a nineteenth set written blind at stop 63 the same
  way (349 different questions, 243 rewordings, after 150 pairs already in earlier sets
  were left out), run first on this stop's code with stop 62's models and with this stop's
  retrained ones; its first runs are in ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind18.jsonl``, a twentieth set written blind at stop 64 the same
  way (324 different questions, 317 rewordings, after 119 pairs already in earlier sets
  were left out), run first on stop 63's code and models as landed; its first run is in
  ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind19.jsonl``, a twenty-first set written blind at stop 65 the
  same way, by two helpers (425 different questions, 346 rewordings, after 195 pairs
  already in earlier sets were left out), run first on stop 65's code with stop 62's
  models; its first run is in ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind20.jsonl``, a twenty-second set written blind at stop 66 the
  same way, by two helpers, one on everyday and one on technical topics (354 different
  questions, 230 rewordings, after 66 pairs already in earlier sets were left out), run
  first on stop 66's code as it stood with stop 62's models; its first run is in
  ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind21.jsonl``, a twenty-third set written blind at stop 66 the
  same way, one helper on people and society, one on nature, making and machines (391
  different questions, 232 rewordings, after 27 pairs already in earlier sets were left
  out), run first on stop 66's code after blind20's mends, with stop 62's models; its first
  run is in ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind22.jsonl``, a twenty-fourth set written blind at stop 67 the
  same way, one helper on sports, the arts, history, schooling, pets, travel and cooking,
  one on science homework, programming, devices, money, health and the home (420
  different questions, 318 rewordings, after 125 pairs already in earlier sets were left
  out), run first on stop 67's code with stop 66's models; its first run is in
  ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind23.jsonl``, a twenty-fifth set written blind at stop 67 the
  same way, one helper on law, work, etiquette, cars and the outdoors, one on electronics,
  data, security, space, weather, nutrition and photography (449 different questions, 345
  rewordings, after 36 pairs already in earlier sets were left out), run first on stop
  67's code after blind22's mend, with stop 66's models; its first run is in
  ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_blind24.jsonl``, a twenty-sixth set written blind at stop 68 the
  same way, one helper on gardening, music, parenting, renting, clothes, games, languages,
  religion, weddings and fitness, one on medicine, chemistry, networks, databases,
  statistics, aviation, home energy, biology, bookkeeping and shells (443 different
  questions, 356 rewordings, after 46 pairs already in earlier sets were left out), run
  first on stop 67's code and the same recipes rebuilt; its first run is in
  ``docs/cache.md``, and from then on it is a dev set;
* ``tests/data/contrast_context.jsonl``, a set written blind at stop 64 for one case: a
  plain question, and the same question wrapped in what the asker said around it (a
  greeting, a story, a sign-off, details), where that does not change the answer (200,
  ``context_irrelevant``) and where it does (200, ``context_scope``: "I'm 7 months
  pregnant. is it safe to eat sushi?"). Its first runs are in ``docs/cache.md``, and from
  then on it is a dev set;
* the QQP test split of ``../shared/data/cache`` (skipped when absent): precision and recall
  of the default decision before and after the veto;
* the GPTCache paraphrase mock (all paraphrases): recall before and after.

Prints a table and writes ``bench/results/contrast_eval.json``.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.cache_quality import DATA, scored
from bench.common import Results, progress, run_bench
from edge.cache.eval import decide_pair, load_pairs, operating_points, rates
from edge.cache.loading import load_matcher
from edge.cache.match import Matcher
from edge.embedder import Embedder
from edge.settings import EdgeSettings
from tools.prepare.pair_split import split
from tools.prepare.written_pairs import read_set

DEV = Path(__file__).resolve().parents[1] / "tests" / "data" / "contrast_dev.jsonl"
HOLDOUT = DEV.with_name("contrast_holdout.jsonl")
BLIND = DEV.with_name("contrast_blind.jsonl")
BLIND2 = DEV.with_name("contrast_blind2.jsonl")
BLIND3 = DEV.with_name("contrast_blind3.jsonl")
BLIND4 = DEV.with_name("contrast_blind4.jsonl")
BLIND5 = DEV.with_name("contrast_blind5.jsonl")
BLIND6 = DEV.with_name("contrast_blind6.jsonl")
BLIND7 = DEV.with_name("contrast_blind7.jsonl")
BLIND8 = DEV.with_name("contrast_blind8.jsonl")
BLIND9 = DEV.with_name("contrast_blind9.jsonl")
BLIND10 = DEV.with_name("contrast_blind10.jsonl")
BLIND11 = DEV.with_name("contrast_blind11.jsonl")
BLIND12 = DEV.with_name("contrast_blind12.jsonl")
BLIND13 = DEV.with_name("contrast_blind13.jsonl")
BLIND14 = DEV.with_name("contrast_blind14.jsonl")
BLIND15 = DEV.with_name("contrast_blind15.jsonl")
BLIND16 = DEV.with_name("contrast_blind16.jsonl")
BLIND17 = DEV.with_name("contrast_blind17.jsonl")
BLIND18 = DEV.with_name("contrast_blind18.jsonl")
BLIND19 = DEV.with_name("contrast_blind19.jsonl")
BLIND20 = DEV.with_name("contrast_blind20.jsonl")
BLIND21 = DEV.with_name("contrast_blind21.jsonl")
BLIND22 = DEV.with_name("contrast_blind22.jsonl")
BLIND23 = DEV.with_name("contrast_blind23.jsonl")
BLIND24 = DEV.with_name("contrast_blind24.jsonl")
CONTEXT = DEV.with_name("contrast_context.jsonl")
SETS = {
    "dev": DEV, "holdout": HOLDOUT, "blind": BLIND, "blind2": BLIND2, "blind3": BLIND3,
    "blind4": BLIND4, "blind5": BLIND5, "blind6": BLIND6, "blind7": BLIND7,
    "blind8": BLIND8, "blind9": BLIND9, "blind10": BLIND10, "blind11": BLIND11,
    "blind12": BLIND12, "blind13": BLIND13, "blind14": BLIND14, "blind15": BLIND15,
    "blind16": BLIND16, "blind17": BLIND17, "blind18": BLIND18, "blind19": BLIND19,
    "blind20": BLIND20, "blind21": BLIND21, "blind22": BLIND22, "blind23": BLIND23,
    "blind24": BLIND24,
    "context": CONTEXT,
}  # fmt: skip


def decide_all(
    pairs: list[tuple[str, str, int]],
    va: np.ndarray,
    vb: np.ndarray,
    matcher: Matcher,
    embedder: Embedder,
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Served per pair, the decision's reason (with the contrast kind), and its score (0
    where a veto or the floor refused it)."""
    served = np.zeros(len(pairs), dtype=bool)
    scores = np.zeros(len(pairs))
    reasons = []
    for i, (a, b, _) in enumerate(pairs):
        m = decide_pair(matcher, lambda t: embedder.embed([t])[0], (a, va[i]), (b, vb[i]))
        served[i] = m.serve
        scores[i] = m.score
        reasons.append(f"contrast:{m.contrast}" if m.contrast else m.reason)
    return served, reasons, scores


def veto_ledger(
    served_before: np.ndarray, reasons_after: list[str], labels: np.ndarray
) -> dict[str, dict[str, int]]:
    """Per contrast veto, the pairs it refused that the rest of the decision (without the
    veto) would have served: different questions caught, rewordings lost. A veto that
    catches nothing the models would serve is one to retire (docs/cache.md, stop 62)."""
    out: dict[str, dict[str, int]] = {}
    for before, why, label in zip(served_before, reasons_after, labels, strict=True):
        if before and why.startswith("contrast:"):
            kind = out.setdefault(why.removeprefix("contrast:"), {"caught": 0, "lost": 0})
            kind["lost" if label else "caught"] += 1
    return dict(sorted(out.items()))


def variants(matcher: Matcher) -> dict[str, Matcher]:
    return {
        "before": matcher.with_policy(contrast=False),
        "after": matcher,
    }


def dev_set(rows: list[dict[str, Any]], embedder: Embedder, matcher: Matcher) -> dict[str, Any]:
    pairs = [(str(r["text_a"]), str(r["text_b"]), int(r["label"])) for r in rows]
    progress(f"contrast dev: {len(pairs)} pairs ...")
    va, vb, labels = scored(pairs, embedder)
    cosine = np.einsum("ij,ij->i", va, vb)
    out: dict[str, Any] = {"rows": len(pairs), "positives": int(labels.sum())}
    decided = {}
    for name, m in variants(matcher).items():
        served, reasons, _ = decide_all(pairs, va, vb, m, embedder)
        decided[name] = served, reasons
        kinds: dict[str, dict[str, Any]] = defaultdict(lambda: {"pairs": 0, "served": 0})
        for r, s in zip(rows, served, strict=True):
            k = kinds[f"{'paraphrase' if r['label'] else 'opposite'}/{r['kind']}"]
            k["pairs"] += 1
            k["served"] += int(s)
        opposite = labels == 0
        listed = [
            ({"kind": r["kind"], "cached": r["text_a"], "asked": r["text_b"],
              "cosine": round(float(c), 4), "reason": why}, s, r)
            for r, s, c, why in zip(rows, served, cosine, reasons, strict=True)
        ]  # fmt: skip
        out[name] = {
            "opposites_served": int((served & opposite).sum()),
            "paraphrase_recall": round(float(served[~opposite].mean()), 4),
            "by_kind": dict(sorted(kinds.items())),
            "served_opposites": [p for p, s, r in listed if s and not r["label"]],
            "missed_paraphrases": [p for p, s, r in listed if not s and r["label"]],
        }
    out["vetoes"] = veto_ledger(decided["before"][0], decided["after"][1], labels)
    out["cosine"] = {
        "opposites_median": round(float(np.median(cosine[labels == 0])), 4),
        "opposites_at_least_0.95": int(((cosine >= 0.95) & (labels == 0)).sum()),
        "paraphrases_median": round(float(np.median(cosine[labels == 1])), 4),
    }
    return out


def pair_set(
    name: str, pairs: list[tuple[str, str, int]], embedder: Embedder, matcher: Matcher
) -> dict[str, Any]:
    progress(f"{name}: {len(pairs)} pairs ...")
    va, vb, labels = scored(pairs, embedder)
    out: dict[str, Any] = {"rows": len(pairs), "positives": int(labels.sum())}
    decided = {}
    for variant, m in variants(matcher).items():
        served, reasons, scores = decide_all(pairs, va, vb, m, embedder)
        decided[variant] = served, reasons
        vetoed: dict[str, int] = defaultdict(int)
        for why, label in zip(reasons, labels, strict=True):
            if why.startswith("contrast:"):
                vetoed[f"{why} label={label}"] += 1
        out[variant] = {
            **rates(served, labels),
            **operating_points(scores, labels),
            "contrast_vetoes": dict(sorted(vetoed.items())),
        }
    out["vetoes"] = veto_ledger(decided["before"][0], decided["after"][1], labels)
    return out


def table(results: dict[str, Any]) -> str:
    lines = []
    for name in SETS:
        if results.get(name):
            lines.extend(contrast_table(name, results[name]))
    return "\n".join(lines + pair_table(results) + veto_table(results))


def veto_table(results: dict[str, Any]) -> list[str]:
    """Each veto's ledger, summed over the contrast sets, and on QQP and GPTCache."""
    columns = {"contrast sets": [n for n in SETS if results.get(n)]} | {
        n: [n] for n in ("qqp-test", "gptcache-paraphrases") if results.get(n)
    }
    totals: dict[str, dict[str, list[int]]] = {}
    for i, names in enumerate(columns.values()):
        for name in names:
            for kind, k in results[name].get("vetoes", {}).items():
                row = totals.setdefault(
                    kind, {"caught": [0] * len(columns), "lost": [0] * len(columns)}
                )
                row["caught"][i] += k["caught"]
                row["lost"][i] += k["lost"]
    head = "".join(f"{c:>22}" for c in columns)
    lines = [
        "contrast vetoes: what each refused that the decision without it would serve,",
        f"  caught (different) / lost (same)  {head}",
    ]
    for kind, row in sorted(totals.items()):
        cells = "".join(
            f"{f'{c} / {x}':>22}" for c, x in zip(row["caught"], row["lost"], strict=True)
        )
        lines.append(f"  {kind:<33}{cells}")
    return lines


def contrast_table(name: str, dev: dict[str, Any]) -> list[str]:
    lines = []
    if dev:
        lines.append(f"contrast {name} set: {dev['rows']} pairs, {dev['positives']} paraphrases")
        lines.append(f"  {'kind':<26}{'pairs':>6}{'served before':>15}{'served after':>14}")
        for kind, k in dev["after"]["by_kind"].items():
            before = dev["before"]["by_kind"][kind]["served"]
            lines.append(f"  {kind:<26}{k['pairs']:>6}{before:>15}{k['served']:>14}")
        for v in ("before", "after"):
            d = dev[v]
            lines.append(
                f"  {v}: opposites served {d['opposites_served']} (target 0), "
                f"paraphrase recall {d['paraphrase_recall']:.3f} (target >= 0.50)"
            )
    return lines


def pair_table(results: dict[str, Any]) -> list[str]:
    lines = []
    for name in ("qqp-test", "gptcache-paraphrases"):
        r = results.get(name)
        if not r:
            continue
        lines.append(f"{name}: {r['rows']} pairs, {r['positives']} same-question")
        for v in ("before", "after"):
            d = r[v]
            lines.append(
                f"  {v:<8} precision {d['precision']:.3f} recall {d['recall']:.3f} "
                f"hits {d['hits']} false hits {d['false_hits']}; by score: precision "
                f"{d['precision_at_recall_0.40']:.3f} at recall 0.40, recall "
                f"{d['recall_at_precision_0.95']:.3f} at precision 0.95"
            )
    return lines


def arguments(parser: argparse.ArgumentParser) -> None:
    for name, path in SETS.items():
        parser.add_argument(f"--{name}", type=Path, default=path)
    parser.add_argument("--data", type=Path, default=DATA, help="../shared/data/cache")
    parser.add_argument(
        "--limit", type=int, default=None, help="pairs per QQP/GPTCache set (0: dev set only)"
    )


def scoring_matcher(settings: EdgeSettings) -> Matcher:
    """The shipped decision with every candidate read by the cross-encoder: the same
    decisions as the shipped band (test_decision checks it), and the "by score" figures get
    the stack's own score. With the band, a pair settled without the cross-encoder reports
    the bound that settled it, which moved QQP's recall at precision 0.95 when a change
    only settled pairs sooner."""
    return load_matcher(settings.with_cache(cross_encoder_band=False))


def run_all(args: argparse.Namespace) -> Results:
    settings = EdgeSettings()
    embedder = Embedder(settings.embed_model_dir(), threads=2)
    matcher = scoring_matcher(settings)
    if matcher.verifier is None:
        progress("no verifier prepared: the decision serves exact repeats only")
    results: dict[str, Any] = {
        "verifier": matcher.verifier.meta if matcher.verifier else None,
        "policy": {
            "false_hit_budget": matcher.policy.delta,
            "candidate_floor": matcher.policy.floor,
            "cross_encoder": matcher.blocking,
        },
        **{name: dev_set(read_set(getattr(args, name)), embedder, matcher) for name in SETS},
    }
    qqp = args.data / "qqp_pairs.jsonl"
    if args.limit == 0:
        progress("--limit 0: the dev set only")
    elif qqp.exists():
        test = [p for p in load_pairs(qqp) if split(p[0], p[1]) == "test"][: args.limit]
        results["qqp-test"] = pair_set("qqp-test", test, embedder, matcher)
    else:
        progress(f"no QQP pairs at {qqp}: skipped")
    mock = args.data / "paraphrases_gptcache_mock.jsonl"
    if args.limit == 0:
        pass
    elif mock.exists():
        results["gptcache-paraphrases"] = pair_set(
            "gptcache-paraphrases", load_pairs(mock, args.limit), embedder, matcher
        )
    else:
        progress(f"no GPTCache paraphrases at {mock}: skipped")
    return results


def main() -> None:
    run_bench("contrast_eval", __doc__, run_all, arguments=arguments, table=table)


if __name__ == "__main__":
    main()
