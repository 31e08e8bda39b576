"""``edgecore models prepare`` rebuilds what was built from an older committed adapter."""

from __future__ import annotations

import json
from pathlib import Path

from shared.prepare import ADAPTER, CROSS_ENCODER, VERIFIER, _done, adapter_version


def test_the_committed_adapter_is_small_enough_to_commit() -> None:
    assert ADAPTER.exists() and ADAPTER.stat().st_size < 1_000_000


def test_models_built_from_another_adapter_are_stale(tmp_path: Path) -> None:
    cross, verifier = tmp_path / CROSS_ENCODER, tmp_path / VERIFIER
    cross.mkdir()
    verifier.mkdir()
    assert not _done(cross, "edgecore.json")  # nothing built yet
    (cross / "edgecore.json").write_text(json.dumps({"version": adapter_version()}))
    (verifier / "verifier.json").write_text(json.dumps({"cross_encoder": "0123456789ab"}))
    assert _done(cross, "edgecore.json")
    assert not _done(verifier, "verifier.json")  # calibrated with another cross-encoder
    (verifier / "verifier.json").write_text(json.dumps({"cross_encoder": adapter_version()}))
    assert _done(verifier, "verifier.json")
