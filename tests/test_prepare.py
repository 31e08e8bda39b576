"""``edgecore models prepare`` rebuilds what is stale: a cross-encoder made another way, a verifier
calibrated another way or stacked with another cross-encoder; and no weights live in git."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tools.prepare import CROSS_ENCODER, CROSS_ENCODER_RECIPE, VERIFIER, VERIFIER_RECIPE, _done

REPO = Path(__file__).resolve().parents[1]


def test_no_model_weights_are_committed() -> None:
    # The cross-encoder is fine-tuned at prepare time from ../shared (QQP's terms
    # are non-commercial); nothing derived from evaluation data lives in the repository.
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True)
    weights = (".safetensors", ".onnx", ".npz", ".gguf", ".bin", ".pt")
    assert tracked.returncode == 0
    assert [f for f in tracked.stdout.split() if f.endswith(weights)] == []


def test_a_verifier_fitted_with_another_cross_encoder_is_stale(tmp_path: Path) -> None:
    cross, verifier = tmp_path / CROSS_ENCODER, tmp_path / VERIFIER
    cross.mkdir()
    verifier.mkdir()
    assert not _done(verifier, "verifier.json")  # nothing built yet
    meta = {"cross_encoder": None, "recipe": VERIFIER_RECIPE}
    (verifier / "verifier.json").write_text(json.dumps(meta))
    assert _done(verifier, "verifier.json")  # no cross-encoder was built (no data): fine
    (cross / "edgecore.json").write_text(json.dumps({"version": "0123456789ab"}))
    assert not _done(verifier, "verifier.json")  # a cross-encoder it was not fitted with
    meta["cross_encoder"] = "0123456789ab"
    (verifier / "verifier.json").write_text(json.dumps(meta))
    assert _done(verifier, "verifier.json")
    # Calibrated under another recipe (before the directional checks): rebuild.
    (verifier / "verifier.json").write_text(json.dumps({"cross_encoder": "0123456789ab"}))
    assert not _done(verifier, "verifier.json")


def test_a_cross_encoder_built_another_way_is_rebuilt(tmp_path: Path) -> None:
    # The LoRA-tuned cross-encoder of earlier builds carries no recipe: prepare replaces it.
    cross = tmp_path / CROSS_ENCODER
    cross.mkdir()
    (cross / "edgecore.json").write_text(json.dumps({"version": "0123456789ab"}))
    assert not _done(cross, "edgecore.json")
    meta = {"version": "0123456789ab", "recipe": CROSS_ENCODER_RECIPE}
    (cross / "edgecore.json").write_text(json.dumps(meta))
    assert _done(cross, "edgecore.json")


def test_own_pairs_are_what_the_cache_models_train_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tools.prepare import cache_data, describe_cache_data, use_pairs

    pairs = tmp_path / "mine.jsonl"
    pairs.write_text('{"text_a": "a?", "text_b": "b?", "label": 0}\n' * 3)
    monkeypatch.setenv("EDGECORE_CACHE_DATA", str(tmp_path / "nowhere"))
    assert "none at" in describe_cache_data() and "exact repeats only" in describe_cache_data()
    use_pairs(pairs, tmp_path / "home")
    assert (cache_data() / "qqp_pairs.jsonl").resolve() == pairs.resolve()
    said = describe_cache_data()
    assert str(pairs.resolve()) in said and "3 pairs" in said and "sha256" in said
