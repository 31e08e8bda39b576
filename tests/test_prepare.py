"""``edgecore models prepare`` refits the verifier's stack when the cross-encoder changed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from shared.prepare import CROSS_ENCODER, VERIFIER, _done

REPO = Path(__file__).resolve().parents[1]


def test_no_model_weights_are_committed() -> None:
    # The cross-encoder's LoRA update is trained at prepare time from ../shared (QQP's terms
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
    (verifier / "verifier.json").write_text(json.dumps({"cross_encoder": None}))
    assert _done(verifier, "verifier.json")  # no cross-encoder was built (no data): fine
    (cross / "edgecore.json").write_text(json.dumps({"version": "0123456789ab"}))
    assert not _done(verifier, "verifier.json")  # a cross-encoder it was not fitted with
    (verifier / "verifier.json").write_text(json.dumps({"cross_encoder": "0123456789ab"}))
    assert _done(verifier, "verifier.json")
    assert _done(cross, "edgecore.json")
