"""The one train / calibration / test split of the cache's QQP pairs (pure, dependency-free).

Both trainers use it (the MLP verifier in the main environment, the cross-encoder in the
preparation environment, which cannot import edgecore), so a pair held out from one is held
out from the other and ``verifier/heldout.jsonl`` stays unseen by every model.
"""

from __future__ import annotations

import hashlib


def split(a: str, b: str) -> str:
    """80 % train, 10 % calibration, 10 % test, by a hash of the two texts."""
    bucket = int(hashlib.sha256(f"{a}\x00{b}".encode()).hexdigest(), 16) % 10
    return "test" if bucket == 5 else "calibration" if bucket == 0 else "train"
