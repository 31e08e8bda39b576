"""bench.cache_hit_path's ratios and plot, on made-up figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.cache_hit_path import CLIENTS, PANELS, plot, ratios


def made_up(*, before: bool) -> dict[str, Any]:
    names = {name for _, _, bars in PANELS for _, name in bars}
    runs = {
        f"{name}@{c}": {
            "p50_ms": 1.0 + c,
            "per_s": 100.0 * (2 if "redisvl" in name else 1),
            "clients": c,
        }
        for name in names
        for c in CLIENTS
        if before or "-before" not in name
    }
    return {"runs": runs, "baseline": "0123456789abcdef" if before else None}


def test_ratios_compare_within_the_run() -> None:
    out = ratios(made_up(before=True)["runs"])
    assert out["lookup p50 edgecore/redisvl @16"] == 1.0
    assert out["http per s edge/bare server @64"] == 1.0
    assert out["http-verified per s after/before @1"] == 1.0
    assert not any("after/before" in k for k in ratios(made_up(before=False)["runs"]))


@pytest.mark.parametrize("before", [True, False])
def test_the_plot_has_a_panel_per_path(tmp_path: Path, before: bool) -> None:
    plot(made_up(before=before), tmp_path / "hits.png")
    assert (tmp_path / "hits.png").stat().st_size > 10_000
