"""Continuous batching on the CPU (edge/tiers/local_batch.py, kv_rows.py, sampling.py): the
pure parts here (the graph's names, the rows' cache, the mask, sampling); the runner on the
real model below (each row answers as alone, a late request joins a running batch, a
failed step or admission fails only its own requests)."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edge.tiers.kv_rows import Graph, Rows
from edge.tiers.local_batch import StepRunner
from edge.tiers.local_model import ProviderUnavailable, batching_mode
from edge.tiers.local_worker import Job
from edge.tiers.sampling import Sampler, nucleus
from tests.edge.fakes import RefusingTokenizer

CONFIG = {
    "model": {
        "eos_token_id": [2, 5],
        "decoder": {
            "filename": "model.onnx", "num_hidden_layers": 2, "num_key_value_heads": 1,
            "head_size": 2,
            "inputs": {"input_ids": "ids", "past_key_names": "past.%d.k",
                       "past_value_names": "past.%d.v"},
            "outputs": {"present_key_names": "now.%d.k", "present_value_names": "now.%d.v"},
        },
    }
}  # fmt: skip


def test_the_graph_names_come_from_the_folders_config() -> None:
    g = Graph.of(CONFIG)
    assert g.past == ("past.0.k", "past.1.k", "past.0.v", "past.1.v")
    assert g.present == ("now.0.k", "now.1.k", "now.0.v", "now.1.v")
    assert (g.input_ids, g.attention_mask, g.logits) == ("ids", "attention_mask", "logits")
    assert g.eos == {2, 5} and (g.layers, g.kv_heads, g.head_size) == (2, 1, 2)
    single = {"model": {**CONFIG["model"], "eos_token_id": 7}}
    assert Graph.of(single).eos == {7}


def cache_of(length: int, fill: float) -> list[np.ndarray]:
    return [np.full((1, 1, length, 2), fill + i, np.float32) for i in range(4)]


def test_rows_hold_each_requests_cache_at_its_own_length() -> None:
    rows = Rows(Graph.of(CONFIG), 3, 4, np.float32)
    assert rows.add(cache_of(3, 10.0)) == 0 and rows.add(cache_of(1, 20.0)) == 1
    # Each row attends to its own length plus the new token; nothing is padded in front.
    assert rows.mask().tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    rows.reserve(9)  # grows (doubling, at least to need), keeping what is there
    assert rows.capacity == 9 and rows.buffers[0][0, 0, :3].tolist() == [[10.0, 10.0]] * 3
    assert rows.add(cache_of(2, 30.0)) == 2
    assert rows.remove(0) == 2  # the last row moved into the freed one
    assert rows.lengths == [2, 1]
    assert rows.buffers[1][0, 0, :2].tolist() == [[31.0, 31.0]] * 2
    assert rows.remove(1) is None and rows.lengths == [2]
    # Never more room than a row can use (the context window), however it doubles.
    capped = Rows(Graph.of(CONFIG), 2, 512, np.float32, most=300)
    assert capped.capacity == 300
    small = Rows(Graph.of(CONFIG), 2, 4, np.float32, most=6)
    small.reserve(5)
    assert small.capacity == 6


def test_greedy_takes_the_best_token_and_the_penalty_discounts_what_was_seen() -> None:
    def logits() -> np.ndarray:  # choose() may change its row in place
        return np.array([0.0, 3.0, 2.9, -1.0], np.float32)

    assert Sampler().choose(logits()) == 1
    # Token 1 is in the prompt: 3.0 / 1.5 = 2.0 < 2.9.
    assert Sampler(repetition_penalty=1.5, history=[1]).choose(logits()) == 2
    s = Sampler(repetition_penalty=1.5)
    assert s.choose(logits()) == 1 and s.choose(logits()) == 2  # what it chose counts too
    # A negative logit is multiplied: -1.0 * 1.5 < 0.0.
    row = np.array([-1.0, -1.2, -3.0], np.float32)
    assert Sampler(repetition_penalty=1.5, history=[0]).choose(row) == 1


def test_a_seeded_sample_repeats_and_top_k_or_top_p_narrow_it() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=50).astype(np.float32)

    def draws(**kw: Any) -> list[int]:
        s = Sampler(temperature=1.0, rng=np.random.default_rng(7), **kw)
        return [s.choose(logits.copy()) for _ in range(20)]

    assert draws() == draws() and len(set(draws())) > 1
    best = int(np.argmax(logits))
    assert set(draws(top_k=1)) == {best} and set(draws(top_p=1e-6)) == {best}
    top3 = set(np.argsort(-logits)[:3].tolist())
    assert set(draws(top_k=3)) <= top3


def test_the_nucleus_is_the_full_sorts_whether_or_not_the_likeliest_few_hold_it() -> None:
    rng = np.random.default_rng(1)

    def full_sort(weights: np.ndarray, top_p: float) -> list[int]:
        order = np.argsort(-weights, kind="stable")
        need = top_p * weights.sum()
        return order[: int(np.searchsorted(np.cumsum(weights[order]), need)) + 1].tolist()

    peaked = np.exp(rng.normal(size=5000) * 2)
    peaked[rng.choice(5000, 10, replace=False)] *= 1e6  # the first 256 hold the nucleus
    flat = np.exp(rng.normal(size=5000) * 0.1)  # they do not: the whole vocabulary is sorted
    for weights in (peaked, flat):
        for top_p in (0.5, 0.9, 0.99):
            assert nucleus(weights, top_p).tolist() == full_sort(weights, top_p)


def test_auto_batching_is_steps_on_the_cpu_and_steps_refuses_another_provider() -> None:
    assert batching_mode("auto", "cpu") == "steps"
    assert batching_mode("auto", "cuda") == "engine"
    assert batching_mode("off", "cpu") == "off"
    with pytest.raises(ProviderUnavailable, match="'cuda'"):
        batching_mode("steps", "cuda")


# The runner on the real edge model.


def job(text: str, max_tokens: int = 8, **kw: Any) -> Job:
    options = dict(temperature=0.0, top_p=1.0, top_k=None, seed=None, repetition_penalty=1.1)
    options.update(kw)
    return Job([{"role": "user", "content": text}], None, max_tokens, **options)  # type: ignore[arg-type]


class Runner:
    """A StepRunner whose messages land on a queue."""

    def __init__(self, folder: Path, rows: int = 4, tokenizer: Any = None) -> None:
        import onnxruntime_genai as og

        self.tokenizer = og.Tokenizer(og.Config(str(folder)))
        self.sent: queue.Queue[tuple[int, str, Any]] = queue.Queue()
        self.runner = StepRunner(
            str(folder), tokenizer or self.tokenizer, threads=1, max_rows=rows,
            context_tokens=2048, send=lambda *m: self.sent.put(m),
        )  # fmt: skip

    def ends(self, count: int) -> dict[int, tuple[str, Any]]:
        out: dict[int, tuple[str, Any]] = {}
        while len(out) < count:
            rid, kind, value = self.sent.get(timeout=60)
            if kind in ("done", "error"):
                out[rid] = (kind, value)
        return out


@pytest.fixture
def folder(models_dir: Path) -> Path:
    path = models_dir / "smollm2-135m-instruct-onnx-int8"
    if not path.exists():
        pytest.skip("edge model not prepared")
    return path


def test_a_late_request_joins_the_running_batch_at_the_next_step(folder: Path) -> None:
    """Continuous, not static: a request sent while another generates gets its first
    piece before that one ends."""
    r = Runner(folder)
    try:
        r.runner.submit(1, job("Write a long essay about the history of Rome.", max_tokens=60))
        while r.sent.get(timeout=60)[1] != "piece":
            pass
        r.runner.submit(2, job("Say hi.", max_tokens=4))
        order = []
        while len([m for m in order if m[1] == "done"]) < 2:
            message = r.sent.get(timeout=60)
            order.append(message)
        first_of_2 = next(i for i, m in enumerate(order) if m[0] == 2 and m[1] == "piece")
        end_of_1 = next(i for i, m in enumerate(order) if m[0] == 1 and m[1] == "done")
        assert first_of_2 < end_of_1
        assert order[end_of_1][2] == (60, "length", False)
    finally:
        r.runner.close()


def test_a_request_the_runner_cannot_take_fails_alone(folder: Path) -> None:
    import onnxruntime_genai as og

    r = Runner(folder, tokenizer=RefusingTokenizer(og.Tokenizer(og.Config(str(folder)))))
    try:
        r.runner.submit(1, job("boom"))
        r.runner.submit(2, job("Say hi."))
        ends = r.ends(2)
        assert ends[1] == ("error", ("failed", "ValueError: cannot template this"))
        assert ends[2][0] == "done"
    finally:
        r.runner.close()


def test_a_failed_step_fails_its_rows_and_the_runner_goes_on(folder: Path) -> None:
    """One decode step raises (injected around the real session: it fails no step on
    demand): every row in it gets an error, and the next request is answered."""
    r = Runner(folder)
    real = r.runner._session
    steps = {"n": 0}
    both_in = threading.Event()

    class FailsOnce:
        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        def run_with_iobinding(self, binding: object) -> None:
            steps["n"] += 1
            if both_in.is_set() and steps["n"] >= 3 and steps["n"] < 100:
                steps["n"] = 100
                raise RuntimeError("injected step failure")
            real.run_with_iobinding(binding)

    r.runner._session = FailsOnce()  # type: ignore[assignment]
    try:
        r.runner.submit(1, job("Count to ten.", max_tokens=40))
        r.runner.submit(2, job("Name three colours.", max_tokens=40))
        both_in.set()
        failed = ("error", ("failed", "RuntimeError: injected step failure"))
        assert r.ends(2) == {1: failed, 2: failed}
        r.runner.submit(3, job("Say hi."))
        assert r.ends(1)[3][0] == "done"
    finally:
        r.runner.close()


def test_a_stopped_or_waiting_request_ends_and_close_ends_the_rest(folder: Path) -> None:
    r = Runner(folder, rows=1)
    r.runner.submit(1, job("Write a long essay about the history of Rome.", max_tokens=60))
    r.runner.submit(2, job("Say hi."))  # waits: one row
    r.runner.stop(2)
    assert r.ends(1) == {2: ("done", (0, "stop", True))}
    r.runner.stop(1)
    kind, (count, finish, stopped) = r.ends(1)[1]
    assert kind == "done" and finish == "stop" and stopped and count < 60
    r.runner.submit(3, job("Write a long essay about the history of Rome.", max_tokens=60))
    while r.sent.get(timeout=60)[1] != "piece":
        pass
    r.runner.close()
    assert r.ends(1)[3][0] == "done"
