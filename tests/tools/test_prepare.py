"""``edgecore models prepare`` rebuilds what is stale: a cross-encoder made another way, a verifier
calibrated another way or stacked with another cross-encoder; and no weights live in git.
Without pair data it fetches the pinned public pairs (served here on loopback), checked by
sha256, or falls back to exact-match caching."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import json
import socket
import subprocess
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.prepare import CROSS_ENCODER, CROSS_ENCODER_RECIPE, VERIFIER, VERIFIER_RECIPE, _done
from tools.prepare.pair_data import PairDataError, fetch_pairs

REPO = Path(__file__).resolve().parents[2]


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
    meta = {"cross_encoder": None, "recipe": f"{VERIFIER_RECIPE}:full"}
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
    meta = {"version": "0123456789ab", "recipe": f"{CROSS_ENCODER_RECIPE}:full"}
    (cross / "edgecore.json").write_text(json.dumps(meta))
    assert _done(cross, "edgecore.json")


def test_a_full_build_serves_the_tests_budget_not_the_reverse(tmp_path: Path) -> None:
    cross = tmp_path / CROSS_ENCODER
    cross.mkdir()
    meta = {"version": "0123456789ab", "recipe": f"{CROSS_ENCODER_RECIPE}:small"}
    (cross / "edgecore.json").write_text(json.dumps(meta))
    assert _done(cross, "edgecore.json", "small")
    assert not _done(cross, "edgecore.json", "full")  # `make run` builds the full model
    meta["recipe"] = f"{CROSS_ENCODER_RECIPE}:full"
    (cross / "edgecore.json").write_text(json.dumps(meta))
    assert _done(cross, "edgecore.json", "small") and _done(cross, "edgecore.json", "full")


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


def _archive(rows: list[dict[str, object]]) -> bytes:
    """GPTCache's packaging: a gzipped tar holding one JSON list."""
    buf = io.BytesIO()
    body = json.dumps(rows).encode()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("examples/benchmark/similiar_qqp_full.json")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


@pytest.fixture
def pairs_server() -> Iterator[tuple[str, str]]:
    """The pinned download, served on loopback: (url, its sha256)."""
    rows = [
        {"text_a": "How do I learn Python?", "text_b": "How can I learn Python?", "label": 1},
        {"text_a": "Is tea healthy?", "text_b": "Is coffee healthy?", "label": "0"},
    ]
    raw = _archive(rows)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/pairs.json.gz", hashlib.sha256(raw).hexdigest()
    server.shutdown()


def test_the_pinned_pairs_are_checked_then_converted(
    tmp_path: Path, pairs_server: tuple[str, str]
) -> None:
    url, digest = pairs_server
    out = fetch_pairs(tmp_path, url=url, sha256=digest)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0] == {"text_a": "How do I learn Python?", "text_b": "How can I learn Python?",
                       "label": 1}  # fmt: skip
    assert rows[1]["label"] == 0


def test_a_download_that_does_not_match_its_sha256_is_refused(
    tmp_path: Path, pairs_server: tuple[str, str]
) -> None:
    url, _ = pairs_server
    with pytest.raises(PairDataError, match="is not the pinned"):
        fetch_pairs(tmp_path, url=url, sha256="0" * 64)
    assert list(tmp_path.iterdir()) == []  # nothing half-trusted is left to train on


def test_prepare_fetches_pairs_when_none_are_at_hand(
    tmp_path: Path,
    pairs_server: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import tools.prepare as prepare

    url, digest = pairs_server
    monkeypatch.setenv("EDGECORE_CACHE_DATA", str(tmp_path / "nowhere"))
    monkeypatch.setattr(prepare, "fetch_pairs", functools.partial(fetch_pairs, sha256=digest))
    prepare.find_or_fetch_pairs(tmp_path / "home", url)
    said = capsys.readouterr().out
    assert f"fetching {url}" in said and "non-commercial" in said  # the licence, said
    assert prepare.cache_data() == tmp_path / "home" / "pair-data"
    assert "2 pairs" in prepare.describe_cache_data()


def test_no_pairs_and_no_network_means_exact_only_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tools.prepare as prepare

    monkeypatch.setenv("EDGECORE_CACHE_DATA", str(tmp_path / "nowhere"))
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/pairs.json.gz"
    prepare.find_or_fetch_pairs(tmp_path / "home", dead)
    assert "NOT FETCHED" in capsys.readouterr().err
    assert prepare.cache_data() == tmp_path / "nowhere"
    assert "exact repeats only" in prepare.describe_cache_data()


def test_an_edge_model_folder_built_another_way_is_rebuilt(tmp_path: Path) -> None:
    from tools.prepare import SMOLLM2_ONNX
    from tools.prepare.smollm2 import ONNX_RECIPE

    folder = tmp_path / SMOLLM2_ONNX
    folder.mkdir()
    assert not _done(folder, "edgecore.json")
    # Built before its folder named the model's defaults (the repetition penalty): rebuild.
    (folder / "edgecore.json").write_text(json.dumps({"served_model_name": "edge-smollm2-135m"}))
    assert not _done(folder, "edgecore.json")
    meta = {"served_model_name": "edge-smollm2-135m", "recipe": ONNX_RECIPE}
    (folder / "edgecore.json").write_text(json.dumps(meta))
    assert _done(folder, "edgecore.json")
