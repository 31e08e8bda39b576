"""bench.edge_model_runtime on the real edge model, small: every mode generates, and the
engine's events name the requests it was given (the first-token figures rely on it)."""

from __future__ import annotations

import argparse
import asyncio
import threading
from pathlib import Path

import pytest

from bench.edge_model_runtime import MODES, _lags, measure, table

pytestmark = pytest.mark.slow


def test_each_mode_generates_and_the_table_says_so(models_dir: Path) -> None:
    args = argparse.Namespace(
        prompts=2, tokens=4, threads=1, slots=2,
        model_dir=models_dir / "smollm2-135m-instruct-onnx-int8",
    )  # fmt: skip
    results = measure(args)
    for mode in MODES:
        run = results["runs"][mode]
        assert run["tokens"] == 2 * 4, mode  # greedy, no stop: every token asked for
        assert run["first_token_max_ms"] >= run["first_token_p50_ms"] > 0
    assert results["engine_batch"] >= 1
    text = table(results)
    assert all(mode in text for mode in MODES) and "engine / slots" in text


def test_the_loop_lag_has_a_sample_even_when_the_work_ended_first() -> None:
    done = threading.Event()
    done.set()  # a short run can end before the sampling loop starts
    assert len(asyncio.run(_lags(done))) == 1
