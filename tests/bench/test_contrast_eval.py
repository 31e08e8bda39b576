"""bench.contrast_eval's veto ledger: what each contrast veto refused that the decision
without it would have served, on made-up decisions."""

from __future__ import annotations

import numpy as np

from bench.contrast_eval import veto_ledger, veto_table


def test_a_veto_is_charged_only_for_what_the_rest_would_serve() -> None:
    served_before = np.array([True, True, True, False, True])
    after = ["contrast:order", "contrast:order", "contrast:condition", "contrast:order", "verified"]
    labels = np.array([0, 1, 1, 0, 1])
    ledger = veto_ledger(served_before, after, labels)
    # The fourth pair was refused anyway: the veto caught nothing there.
    assert ledger == {"condition": {"caught": 0, "lost": 1}, "order": {"caught": 1, "lost": 1}}


def test_the_table_sums_the_contrast_sets_apart_from_qqp() -> None:
    results = {
        "dev": {"vetoes": {"order": {"caught": 3, "lost": 0}}},
        "blind15": {"vetoes": {"order": {"caught": 2, "lost": 1}}},
        "qqp-test": {"vetoes": {"condition": {"caught": 4, "lost": 25}}},
    }
    lines = veto_table(results)
    assert "contrast sets" in lines[1] and "qqp-test" in lines[1]
    order = next(line for line in lines if line.strip().startswith("order"))
    assert order.split()[1:] == ["5", "/", "1", "0", "/", "0"]
    condition = next(line for line in lines if line.strip().startswith("condition"))
    assert condition.split()[1:] == ["0", "/", "0", "4", "/", "25"]
