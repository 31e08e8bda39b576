"""Public pair data for the cache's models, fetched from a pinned URL when none is at hand.

The file is Quora Question Pairs as packaged in GPTCache's benchmark folder (80,854 labelled
pairs), at a fixed commit, checked against its sha256 before anything reads it. Licence:
the GPTCache repository is MIT, but the pairs are Quora's, whose terms allow non-commercial
use only; weights trained on them inherit that (docs/models.md). An operator who cannot
accept that passes ``--no-fetch`` (exact-match caching) or ``--pairs`` with their own data.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import urllib.request
from pathlib import Path

PAIRS_URL = (
    "https://raw.githubusercontent.com/zilliztech/GPTCache/"
    "79497fea723e1816b1e433459539a6cbac1b5fc7/examples/benchmark/similiar_qqp_full.json.gz"
)
PAIRS_SHA256 = "1fcd814990dd8ebbc1cdacd41fca11e56739e2e4d72e4ac119334084ed7e2b58"
PAIRS_LICENCE = (
    "Quora Question Pairs (packaged by zilliztech/GPTCache, MIT); Quora's terms: "
    "non-commercial use only, and so for the models trained on them"
)


class PairDataError(Exception):
    """The pinned pair data could not be fetched or did not check out."""


def jsonl_from_archive(raw: bytes) -> str:
    """GPTCache's archive (a gzipped tar holding one JSON list) as JSONL lines."""
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tar:
        member = next((m for m in tar.getmembers() if m.name.endswith(".json")), None)
        handle = tar.extractfile(member) if member else None
        if handle is None:
            raise PairDataError("the archive holds no .json file")
        rows = json.load(handle)
    lines = []
    for r in rows:
        pair = {"text_a": str(r["text_a"]), "text_b": str(r["text_b"]), "label": int(r["label"])}
        lines.append(json.dumps(pair, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def fetch_pairs(
    folder: Path, *, url: str = PAIRS_URL, sha256: str = PAIRS_SHA256, timeout_s: float = 60.0
) -> Path:
    """Download, check and convert the pinned pairs into ``folder/qqp_pairs.jsonl``.

    Nothing is written unless the download's sha256 matches: a moved or altered file is
    refused, not trained on.
    """
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            raw = response.read()
    except (OSError, ValueError) as exc:
        raise PairDataError(f"could not fetch {url}: {exc}") from exc
    digest = hashlib.sha256(raw).hexdigest()
    if digest != sha256:
        raise PairDataError(f"{url}: sha256 {digest} is not the pinned {sha256}")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "qqp_pairs.jsonl"
    partial = target.with_suffix(".partial")
    partial.write_text(jsonl_from_archive(raw))
    partial.replace(target)
    return target
