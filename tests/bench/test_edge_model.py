"""bench.edge_model: its ratios and table from given runs, and (slow) a small real run of the
tier's four ways (the vLLM reference is skipped: starting vLLM costs minutes)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.edge_model import measure, ratios, table


def run(tokens_per_s: float, p99: int) -> dict[str, float]:
    return {"requests": 2, "tokens": 8, "tokens_per_s": tokens_per_s, "ttft_p50_ms": p99 // 2,
            "ttft_p99_ms": p99}  # fmt: skip


def test_ratios_compare_each_tier_with_vllm_and_with_itself_alone() -> None:
    runs = {
        "tier": {"1": run(50.0, 100), "8": run(60.0, 900)},
        "tier, a slot each": {"1": run(50.0, 100), "8": run(55.0, 400)},
        "tier, steps": {"1": run(45.0, 120), "8": run(180.0, 200)},
        "vllm": {"1": run(40.0, 50), "8": run(200.0, 120)},
    }
    r = ratios(runs)
    assert r["tier"]["8"] == {
        "tokens_per_s_vs_1_stream": 1.2, "ttft_p99_vs_1_stream": 9.0, "tokens_per_s_vs_vllm": 0.3,
    }  # fmt: skip
    assert r["tier"]["1"]["tokens_per_s_vs_vllm"] == 1.25
    # Batching is measured against the one-generation-per-slot tier, in the same run.
    assert r["tier, steps"]["8"]["tokens_per_s_vs_tier"] == 3.0
    assert r["tier, steps"]["8"]["ttft_p99_vs_1_stream"] == round(200 / 120, 2)
    text = table({"tokens": 4, "threads": 2, "slots": 2, "runs": runs, "ratios": r})
    assert "0.30x" in text and "vllm" in text and "3.00x" in text


def test_ratios_without_vllm_are_the_tiers_own() -> None:
    r = ratios({"tier": {"1": run(50.0, 100), "4": run(50.0, 300)}})
    assert r["tier"]["4"] == {"tokens_per_s_vs_1_stream": 1.0, "ttft_p99_vs_1_stream": 3.0}


@pytest.mark.slow
def test_a_small_run_of_the_tier_counts_its_tokens(models_dir: Path) -> None:
    args = argparse.Namespace(
        streams=[1, 2], tokens=4, threads=1, slots=1, batch=2, no_vllm=True,
        model_dir=models_dir / "smollm2-135m-instruct-onnx-int8",
        hf_dir=models_dir / "smollm2-135m-instruct-hf",
    )  # fmt: skip
    results = measure(args)
    for system in ("tier", "tier, a slot each", "tier, engine", "tier, steps"):
        for streams in ("1", "2"):
            r = results["runs"][system][streams]
            assert r["requests"] == 2 * int(streams)
            assert 0 < r["tokens"] <= 4 * r["requests"] and r["tokens_per_s"] > 0
            assert r["ttft_p99_ms"] >= r["ttft_p50_ms"] > 0
    assert "vllm" not in results["runs"]
    assert "tier" in table(results)
