"""The edge model's execution provider and context window (edge/tiers/local_model.py): a
provider this onnxruntime-genai build lacks fails at start, by name; the window comes from
the model folder."""

from __future__ import annotations

import json
from pathlib import Path

import onnxruntime_genai as og
import pytest

from edge.tiers.local_model import (
    PROVIDERS,
    LocalModel,
    ProviderUnavailable,
    check_provider,
    context_length,
)


def test_the_cpu_is_always_there() -> None:
    check_provider("cpu")


def test_an_unknown_provider_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ProviderUnavailable, match="'tpu' is not an onnxruntime-genai") as e:
        check_provider("tpu")
    assert all(name in str(e.value) for name in PROVIDERS)


@pytest.mark.skipif(og.is_cuda_available(), reason="this build has CUDA")
def test_a_provider_this_build_lacks_fails_at_start_by_name(tmp_path: Path) -> None:
    with pytest.raises(ProviderUnavailable, match=r"LOCAL__PROVIDER='cuda'.*cannot run on cuda"):
        # Refused before the folder is read: no model needed to be told.
        LocalModel(tmp_path, threads=1, max_concurrency=1, queue_timeout_s=1.0,
                   context_tokens=2048, max_new_tokens=16, provider="cuda")  # fmt: skip


def test_the_context_window_comes_from_the_model_folder(tmp_path: Path) -> None:
    assert context_length(tmp_path) is None  # no genai_config.json
    (tmp_path / "genai_config.json").write_text(json.dumps({"model": {"context_length": 1024}}))
    assert context_length(tmp_path) == 1024


def test_the_shipped_edge_model_keeps_the_configured_cap(models_dir: Path) -> None:
    folder = models_dir / "smollm2-135m-instruct-onnx-int8"
    if not folder.exists():
        pytest.skip("edge model not prepared")
    assert context_length(folder) == 8192  # SmolLM2's own window
    model = LocalModel(folder, threads=1, max_concurrency=1, queue_timeout_s=1.0,
                       context_tokens=2048, max_new_tokens=16)  # fmt: skip
    try:
        assert model.context_tokens == 2048  # the setting caps it on a small edge
    finally:
        model.close()
