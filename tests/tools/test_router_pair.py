"""The router for the deployed pair (issue 34): ``edgecore models prepare --router-small NAME
--router-large NAME`` trains it on those two columns of the router data, prints its held-out
APGR and PGR at a 50 % core share, and the edge's /metrics shows them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from edge.metrics import EdgeMetrics
from tools.cli import parser
from tools.prepare import ROUTER, _router_pair
from tools.prepare.router_train import columns, train


def write_data(path: Path) -> Path:
    """Maths needs the large model; small talk does not; a third column is noise."""
    with path.open("w") as f:
        for i in range(200):
            maths = i % 2 == 0
            question = (
                f"Solve the equation {i}x + 3 = {2 * i} and show each step"
                if maths
                else f"Say hello to my friend number {i}"
            )
            scores = {"edge-s": 0 if maths else 1, "core-l": 1, "other": i % 3 % 2}
            f.write(json.dumps({"question": question, "scores": scores}) + "\n")
    return path


@pytest.fixture
def minilm_home(tmp_path: Path, models_dir: Path) -> Path:
    (tmp_path / "all-minilm-l6-v2-onnx").symlink_to(models_dir / "all-minilm-l6-v2-onnx")
    return tmp_path


def test_the_router_is_trained_for_the_named_pair(
    minilm_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    meta = train(write_data(minilm_home / "d.jsonl"), minilm_home, "edge-s", "core-l")
    printed = capsys.readouterr().out
    assert meta["small"] == "edge-s" and meta["large"] == "core-l"
    saved = json.loads((minilm_home / ROUTER / "router.json").read_text())
    assert (saved["small"], saved["large"]) == ("edge-s", "core-l")
    assert _router_pair(minilm_home / ROUTER) == ("edge-s", "core-l")
    # The maths prompts are easy to tell apart: far better than random (APGR 0.5).
    assert isinstance(meta["heldout_apgr"], float) and meta["heldout_apgr"] > 0.7
    pgr_at = meta["heldout_pgr_at"]
    assert isinstance(pgr_at, dict)
    assert f"held-out APGR {meta['heldout_apgr']}, PGR at 50% core {pgr_at['0.5']}" in printed
    assert "WARNING" not in printed


def test_a_core_model_no_better_than_the_edges_is_warned_about(
    minilm_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "other" scores below "core-l": as the core's model it would make answers worse.
    train(write_data(minilm_home / "d.jsonl"), minilm_home, "core-l", "other")
    assert "WARNING: other scores no better than core-l" in capsys.readouterr().out


def test_a_model_the_data_lacks_is_refused_naming_those_it_has(minilm_home: Path) -> None:
    data = write_data(minilm_home / "d.jsonl")
    with pytest.raises(SystemExit, match=r"no such model; it has \['core-l', 'edge-s', 'other'\]"):
        train(data, minilm_home, "edge-s", "gpt-9")
    with pytest.raises(SystemExit, match="picks between two models"):
        train(data, minilm_home, "edge-s", "edge-s")


def test_columns_are_the_models_the_data_scores() -> None:
    rows = [{"scores": {"a": 1, "b": 0}}, {"scores": {"b": 1}}]
    assert columns(rows) == ["b", "a"]


def test_no_router_yet_has_no_pair(tmp_path: Path) -> None:
    assert _router_pair(tmp_path / ROUTER) is None


def test_the_pair_is_named_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = parser().parse_args(
        ["--home", str(tmp_path), "models", "prepare", "--router-small", "llama-3.1-8b-instruct"]
    )
    assert args.func(args) == 2
    assert "go together" in capsys.readouterr().err


def test_metrics_show_the_routers_held_out_quality() -> None:
    metrics = EdgeMetrics.create()
    metrics.observe_router(
        {"small": "s", "large": "l", "heldout_apgr": 0.75,
         "heldout_pgr_at": {"0.25": 0.5, "0.5": 0.93, "0.75": 1.02}}
    )  # fmt: skip
    text = generate_latest(metrics.registry).decode()
    assert 'edgecore_router_heldout_apgr{large="l",small="s"} 0.75' in text
    assert 'edgecore_router_heldout_pgr{core_share="0.5",large="l",small="s"} 0.93' in text
