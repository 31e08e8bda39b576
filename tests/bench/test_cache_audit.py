"""The cache audit's arithmetic (bench/cache_audit.py): intervals, agreement, the draw."""

from __future__ import annotations

import numpy as np
import pytest

from bench.cache_audit import (
    audit_stats,
    config_name,
    draw,
    kappa,
    parse_config,
    serves,
    stratified,
    table,
    wilson,
)


def test_wilson_interval_brackets_the_rate_and_narrows_with_n() -> None:
    lo, hi = wilson(95, 100)
    assert lo < 0.95 < hi
    assert (0.888, 0.978) == (round(lo, 3), round(hi, 3))
    lo2, hi2 = wilson(950, 1000)
    assert hi2 - lo2 < hi - lo
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(10, 10)[1] == 1.0


def test_kappa_is_one_for_agreement_and_zero_for_chance() -> None:
    a = [True, False, True, True, False, False]
    assert kappa(a, a) == 1.0
    assert kappa([True, True, False, False], [True, False, True, False]) == 0.0
    assert kappa([True, False], [False, True]) < 0
    with pytest.raises(ValueError):
        kappa([True], [True, False])


def test_draw_takes_served_pairs_and_rejected_candidates_only() -> None:
    served = np.array([1, 1, 0, 0, 1, 0, 0, 1], dtype=bool)
    candidate = np.array([1, 1, 1, 0, 1, 1, 0, 1], dtype=bool)
    picked = draw(served, candidate, n_served=3, n_controls=5)
    kinds = dict(picked)
    assert sum(k == "served" for k in kinds.values()) == 3
    assert {i for i, k in picked if k == "control"} == {2, 5}  # all there are
    assert all(served[i] for i, k in picked if k == "served")
    assert picked == draw(served, candidate, n_served=3, n_controls=5)  # seeded


def test_audit_stats_joins_readers_with_the_key() -> None:
    key = [
        {"id": 0, "kind": "served", "qqp_label": 1},
        {"id": 1, "kind": "served", "qqp_label": 0},
        {"id": 2, "kind": "served", "qqp_label": 0},
        {"id": 3, "kind": "control", "qqp_label": 0},
    ]
    readers = {
        "r1": {0: True, 1: True, 2: False, 3: False},
        "r2": {0: True, 1: True, 2: True, 3: True},
    }
    stats = audit_stats(key, readers)
    assert stats["readers"]["r1"]["served_right"]["rate"] == round(2 / 3, 4)
    assert stats["readers"]["r2"]["controls_called_same"]["rate"] == 1.0
    # A served answer counts right for "all readers" only when every reader says so.
    assert stats["readers"]["all readers"]["served_right"]["rate"] == round(2 / 3, 4)
    assert stats["readers"]["r1"]["qqp_false_hits_called_right"]["rate"] == 0.5
    assert stats["qqp_precision"]["rate"] == round(1 / 3, 4)
    assert "kappa" in stats and "served right" in table(stats)
    with pytest.raises(ValueError, match="missing"):
        audit_stats(key, {"r3": {0: True}})


def test_stratified_precision_weights_each_score_band_by_what_is_served() -> None:
    # Two bands of 4 served pairs; the sample judged 3 of the high band (all right) and
    # 1 of the low band (wrong): a plain mean says 0.75, the served set is half each.
    scores = np.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9])
    verdicts = [None, None, 0.0, None, 1.0, 1.0, None, 1.0]
    rate, rows = stratified(scores, verdicts, bins=2)
    assert rate == 0.5
    assert [(r["served"], r["judged"], r["readers"]) for r in rows] == [(4, 1, 0.0), (4, 3, 1.0)]


def test_a_config_serves_what_is_confident_and_close_enough() -> None:
    arrays = {
        "conf": np.array([0.99, 0.96, 0.91, 0.99, 0.5]),
        "cosine": np.array([0.97, 0.85, 0.95, 0.81, 0.99]),
    }
    assert serves(arrays, (0.05, 0.80)).tolist() == [True, True, False, True, False]
    assert serves(arrays, (0.1, 0.90)).tolist() == [True, False, True, False, False]
    assert parse_config("0.1:0.92") == (0.1, 0.92)
    assert parse_config("0.2")[0] == 0.2  # the configured floor
    assert config_name((0.1, 0.9)) == "0.1:0.90"
