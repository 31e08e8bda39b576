"""Hand-written contrast pairs as training data for the cache's cross-encoder (pure).

The contrast sets in ``tests/data`` were written for evaluation (by helpers who read no rule) in
the kinds QQP lacks: role swaps, sibling entities, added scope, antonyms, intent flips,
formulas, direction, negation and numbers, against typos, preambles, the passive voice,
abbreviations, symmetric comparisons and rewordings that share few words. Every one of the
older sets has been read while rules were written, so none of them measures anything any
more (``docs/cache.md``); as training data they teach the cross-encoder the kinds the rules
were catching. The verifier's MLP does not learn them: it has no feature that sees word
order, and with them it grew less sure of every close pair (``docs/cache.md``, stop 61).
The newer sets stay out of training and remain the measure, and every blind set written
from now on is held out in the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

# Read while rules were written: training data now. Everything else in ``tests/data``
# (the hold-out set, blind10 and later) is never trained on.
TRAINED = (
    "contrast_dev", "contrast_blind", "contrast_blind2", "contrast_blind3",
    "contrast_blind4", "contrast_blind5", "contrast_blind6", "contrast_blind7",
    "contrast_blind8", "contrast_blind9",
)  # fmt: skip
DATA = Path(__file__).resolve().parents[2] / "tests" / "data"


def written_pairs(data: Path = DATA) -> list[tuple[str, str, int, str]]:
    """(text_a, text_b, label, kind) of every trained set found under ``data``, each pair
    once, in file order, leaving out any pair a held-out set also has; none where the sets
    are not at hand (an install without tests)."""
    seen = {_key(r) for path in sorted(data.glob("contrast_*.jsonl")) if path.stem not in TRAINED
            for r in read_set(path)}  # fmt: skip
    rows = []
    for name in TRAINED:
        path = data / f"{name}.jsonl"
        for r in read_set(path) if path.is_file() else []:
            if _key(r) not in seen:
                seen.add(_key(r))
                rows.append((r["text_a"], r["text_b"], int(r["label"]), f"written:{r['kind']}"))
    return rows


def read_set(path: Path) -> list[dict[str, str]]:
    """One contrast set's rows (JSON lines). Read by line, not ``str.splitlines()``: that
    would also split a text at U+2028 and its kin."""
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def _key(r: dict[str, str]) -> frozenset[str]:
    return frozenset((r["text_a"], r["text_b"]))
