"""Cache audit: would people call the served answers right? QQP's labels, read again.

    .venv/bin/python -m bench.cache_audit sample [--config 0.1:0.80 ...] [--split test]
                                [--served 400] [--controls 100] [--exclude OLD/blind.jsonl ...]
    .venv/bin/python -m bench.cache_audit score READER.jsonl [READER.jsonl ...]
    .venv/bin/python -m bench.cache_audit census [--config 0.1:0.80] [--split test]
                            --audit DIR READER.jsonl ... [--audit DIR READER.jsonl ...]

``bench.cache_quality`` counts a served hit as wrong when QQP says "not a duplicate". Those
labels are one crowd worker's call each, and the hard pairs a cache serves are where they
are noisiest ("What will be the output of the following program ?" against the same text
without the space is labelled different). A false-hit rate read off them mixes the
decision's errors with the yardstick's. This audit measures the decision against readers
instead, blind, on a random sample of what it serves.

``sample`` runs the shipped decision (the MLP verifier, ``bench.cache_quality``'s code) on
the held-out QQP pairs (``--split test``, or ``calibration``: pairs no audit has read yet)
for each ``--config DELTA:FLOOR`` (false-hit budget, candidate floor), draws ``--served``
of the pairs some config serves and ``--controls`` of the candidates none serves, shuffles
them and writes, under ``bench/results/cache_audit/``:

- ``blind.jsonl``: ``{"id", "cached", "asked"}``, all a reader sees;
- ``key.jsonl``: ``{"id", "kind": "served"|"control", "qqp_label", "score", "cosine",
  "configs"}`` (the configs that serve the pair), which no reader may see.

The draw is uniform over what any config serves, so the drawn pairs one config serves are
a uniform sample of all it serves: several configs are compared on the same pairs by the
same readers.

Each reader answers for every id, alone: would a correct answer to ``cached`` also be a
correct and complete answer to ``asked``? One JSON line each, ``{"id", "same": true|false}``.

``score`` joins the readers' files with the key and prints, per reader and for "every
reader says yes": the precision of served answers with a 95 % Wilson interval, the share
of controls called the same (a reader who says yes to everything shows up here), Cohen's
kappa between the first two readers, and QQP's own precision on the same served pairs;
then the same precisions per config.
The pairs stay under ``bench/results`` (ignored by git): QQP's terms forbid shipping them.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import RESULTS, SHARED_DATA, progress, save
from edge.cache.eval import load_pairs
from edge.cache.loading import load_matcher
from edge.embedder import Embedder
from edge.settings import EdgeSettings
from tools.prepare.pair_split import split

AUDIT = RESULTS / "cache_audit"
SEED = 0


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Two-sided Wilson score interval of a proportion k/n (95 % by default)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def kappa(a: Sequence[bool], b: Sequence[bool]) -> float:
    """Cohen's kappa of two readers' yes/no answers on the same items."""
    n = len(a)
    if n == 0 or n != len(b):
        raise ValueError("kappa needs two equally long, non-empty answer lists")
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    chance = pa * pb + (1 - pa) * (1 - pb)
    return 1.0 if chance == 1.0 else (observed - chance) / (1 - chance)


def draw(
    served: np.ndarray, candidate: np.ndarray, n_served: int, n_controls: int, seed: int = SEED
) -> list[tuple[int, str]]:
    """Indices to audit, shuffled: served pairs, and rejected candidates as controls."""
    rng = random.Random(seed)
    hits = [int(i) for i in np.nonzero(served)[0]]
    rejected = [int(i) for i in np.nonzero(candidate & ~served)[0]]
    picked = [(i, "served") for i in rng.sample(hits, min(n_served, len(hits)))]
    picked += [(i, "control") for i in rng.sample(rejected, min(n_controls, len(rejected)))]
    rng.shuffle(picked)
    return picked


def _rate(yes: int, n: int) -> dict[str, Any]:
    lo, hi = wilson(yes, n)
    return {"n": n, "rate": round(yes / n, 4) if n else None, "ci95": [round(lo, 4), round(hi, 4)]}


def audit_stats(key: list[dict[str, Any]], readers: dict[str, dict[int, bool]]) -> dict[str, Any]:
    """Precision of served answers by each reader, by all of them, and by QQP's labels."""
    if not readers:
        raise ValueError("no reader's judgments")
    missing = {name: [k["id"] for k in key if k["id"] not in r] for name, r in readers.items()}
    if any(missing.values()):
        raise ValueError(f"judgments missing: { {n: m[:5] for n, m in missing.items() if m} }")
    served = [k for k in key if k["kind"] == "served"]
    controls = [k for k in key if k["kind"] == "control"]
    judges = dict(readers)
    if len(readers) > 1:
        judges["all readers"] = {k["id"]: all(r[k["id"]] for r in readers.values()) for k in key}
    out: dict[str, Any] = {"served": len(served), "controls": len(controls), "readers": {}}
    for name, r in judges.items():
        out["readers"][name] = {
            "served_right": _rate(sum(r[k["id"]] for k in served), len(served)),
            "controls_called_same": _rate(sum(r[k["id"]] for k in controls), len(controls)),
            # QQP says "not a duplicate" but the reader says the answer fits, and back.
            "qqp_false_hits_called_right": _rate(
                sum(r[k["id"]] for k in served if k["qqp_label"] == 0),
                sum(k["qqp_label"] == 0 for k in served),
            ),
            "qqp_duplicates_called_wrong": _rate(
                sum(not r[k["id"]] for k in served if k["qqp_label"] == 1),
                sum(k["qqp_label"] == 1 for k in served),
            ),
        }
    out["qqp_precision"] = _rate(sum(k["qqp_label"] for k in served), len(served))
    names = list(readers)
    if len(names) >= 2:
        ids = [k["id"] for k in key]
        a, b = readers[names[0]], readers[names[1]]
        out["kappa"] = round(kappa([a[i] for i in ids], [b[i] for i in ids]), 4)
    return out


def table(stats: dict[str, Any]) -> str:
    lines = [
        f"{stats['served']} served pairs, {stats['controls']} rejected controls",
        f"  {'judge':<16}{'served right':>14}{'95% CI':>16}{'controls same':>15}",
    ]
    rows = {**stats["readers"], "QQP labels": {"served_right": stats["qqp_precision"]}}
    for name, r in rows.items():
        s, c = r["served_right"], r.get("controls_called_same")
        ci = f"{s['ci95'][0]:.3f}-{s['ci95'][1]:.3f}"
        ctl = f"{c['rate']:.3f}" if c and c["rate"] is not None else "-"
        lines.append(f"  {name:<16}{s['rate']:>14.3f}{ci:>16}{ctl:>15}")
    if "kappa" in stats:
        lines.append(f"  Cohen's kappa, first two readers: {stats['kappa']:.3f}")
    return "\n".join(lines)


def stratified(
    scores: np.ndarray, verdicts: Sequence[float | None], bins: int = 5
) -> tuple[float, list[dict[str, Any]]]:
    """Readers' precision over everything served, from the served pairs someone judged.

    Samples drawn at other budgets, by other builds or with ``--exclude`` do not cover the
    served set evenly (a sample at delta 0.05 takes only high scores), so judged pairs are
    averaged per score quantile and each quantile weighted by how much is served in it.
    ``verdicts[i]``: the share of samples whose readers all called pair ``i`` right, None
    if no sample drew it.
    """
    edges = np.quantile(scores, np.linspace(0.0, 1.0, bins + 1))
    which = np.clip(np.searchsorted(edges, scores, side="right") - 1, 0, bins - 1)
    total, rows = 0.0, []
    for b in range(bins):
        members = np.nonzero(which == b)[0]
        judged = [v for i in members if (v := verdicts[int(i)]) is not None]
        rate = float(np.mean(judged)) if judged else float("nan")
        total += rate * len(members)
        bounds = [round(float(edges[b]), 4), round(float(edges[b + 1]), 4)]
        row = {"served": len(members), "judged": len(judged), "readers": round(rate, 4)}
        rows.append({"scores": bounds, **row})
    return total / max(1, len(scores)), rows


Config = tuple[float, float]  # (false-hit budget delta, candidate floor)


def parse_config(text: str) -> Config:
    """``"0.1:0.92"`` -> (0.1, 0.92); ``"0.1"`` keeps the configured candidate floor."""
    delta, _, floor = text.partition(":")
    return float(delta), float(floor) if floor else EdgeSettings().cache.candidate_floor


def config_name(config: Config) -> str:
    return f"{config[0]:g}:{config[1]:.2f}"


def serves(arrays: dict[str, np.ndarray], config: Config) -> np.ndarray:
    """What the decision serves at ``config``: confident enough and close enough.

    A fresh entry is served at budget delta exactly when its confidence is >= 1 - delta
    (``bench.cache_quality.decisions``); a higher floor only removes neighbours.
    """
    delta, floor = config
    served: np.ndarray = (arrays["conf"] >= 1.0 - delta) & (arrays["cosine"] >= floor)
    return served


def _decide(
    data: Path, part: str = "test"
) -> tuple[list[tuple[str, str, int]], dict[str, np.ndarray]]:
    """The shipped decision's inputs (MLP verifier, ``bench.cache_quality``'s code) on one
    held-out split: score, confidence, cosine and label per pair."""
    from bench.cache_quality import decisions, scored

    settings = EdgeSettings()
    base = load_matcher(settings.with_cache(cross_encoder=False))
    if base.verifier is None:
        raise SystemExit("no verifier prepared: run `edgecore models prepare` first")
    # The lowest floor: ``serves`` raises it per config.
    matcher = base.with_policy(floor=0.0)
    pairs = [p for p in load_pairs(data / "qqp_pairs.jsonl") if split(p[0], p[1]) == part]
    progress(f"deciding {len(pairs)} held-out {part} pairs ...")
    embedder = Embedder(settings.embed_model_dir(), threads=2)
    va, vb, labels = scored(pairs, embedder)
    _, scores, conf = decisions(pairs, va, vb, matcher, embedder)
    cosine = np.einsum("ij,ij->i", va, vb)
    arrays = {"scores": scores, "conf": conf, "labels": labels, "cosine": cosine}
    return pairs, arrays


def _meta(config: Config, labels: np.ndarray, served: np.ndarray) -> dict[str, Any]:
    verifier = load_matcher(EdgeSettings()).verifier
    return {"delta": config[0], "floor": config[1], "pairs": len(labels),
            "served": int(served.sum()),
            "recall": round(float((served & (labels == 1)).sum() / labels.sum()), 4),
            "verifier": verifier.meta.get("version") if verifier else None}  # fmt: skip


def sample(
    data: Path,
    configs: Sequence[Config],
    n_served: int,
    n_controls: int,
    out: Path,
    exclude: Sequence[Path],
    part: str = "test",
) -> None:
    """``exclude``: earlier ``blind.jsonl`` files whose pairs are not drawn again (pairs a
    check was designed on do not measure it)."""
    pairs, d = _decide(data, part)
    seen = {(r["cached"], r["asked"]) for path in exclude for r in _read_jsonl(path)}
    fresh = np.array([(a, b) not in seen for a, b, _ in pairs], dtype=bool)
    by_config = {config_name(c): serves(d, c) for c in configs}
    served = np.logical_or.reduce(list(by_config.values()))
    lowest = min(floor for _, floor in configs)
    candidate = d["cosine"] >= lowest
    out.mkdir(parents=True, exist_ok=True)
    with (out / "blind.jsonl").open("w") as blind, (out / "key.jsonl").open("w") as key:
        drawn = draw(served & fresh, candidate & fresh, n_served, n_controls)
        for n, (i, kind) in enumerate(drawn):
            blind.write(json.dumps({"id": n, "cached": pairs[i][0], "asked": pairs[i][1]}) + "\n")
            row = {"id": n, "kind": kind, "qqp_label": int(d["labels"][i]),
                   "score": float(d["scores"][i]), "cosine": round(float(d["cosine"][i]), 4),
                   "configs": [name for name, m in by_config.items() if m[i]]}  # fmt: skip
            key.write(json.dumps(row) + "\n")
    meta = {
        "split": part,
        "excluded": int((~fresh).sum()),
        "configs": {
            config_name(c): _meta(c, d["labels"], by_config[config_name(c)]) for c in configs
        },
    }
    (out / "sample.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {out / 'blind.jsonl'} for readers and {out / 'key.jsonl'}; {meta}")


def census(data: Path, config: Config, audits: list[list[Path]], part: str = "test") -> None:
    """Readers' precision over all the decision serves at ``config``, from every audit."""
    verdicts: dict[tuple[str, str], list[bool]] = {}
    for folder, *reader_files in audits:
        readers = [{int(r["id"]): bool(r["same"]) for r in _read_jsonl(f)} for f in reader_files]
        for r in _read_jsonl(folder / "blind.jsonl"):
            ok = all(j[int(r["id"])] for j in readers)
            verdicts.setdefault((r["cached"], r["asked"]), []).append(ok)
    pairs, d = _decide(data, part)
    served = serves(d, config)
    hits = np.nonzero(served)[0]
    judged = [verdicts.get((pairs[i][0], pairs[i][1])) for i in hits]
    rate, rows = stratified(d["scores"][hits], [float(np.mean(v)) if v else None for v in judged])
    stats = {"sample": _meta(config, d["labels"], served), "readers_precision": round(rate, 4),
             "judged": sum(v is not None for v in judged), "quantiles": rows,
             "qqp_precision": round(float(d["labels"][hits].mean()), 4)}  # fmt: skip
    path = save("cache_audit_census", stats)
    print(f"{len(hits)} served at {config_name(config)}, {stats['judged']} judged by readers")
    for row in rows:
        lo, hi = row["scores"]
        print(f"  score {lo:.3f}-{hi:.3f}: {row['served']:>5} served {row['judged']:>5} judged"
              f"  readers {row['readers']:.3f}")  # fmt: skip
    print(f"  readers' precision {rate:.3f} (QQP's {stats['qqp_precision']:.3f}); wrote {path}")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def score(out: Path, reader_files: list[Path]) -> None:
    key = _read_jsonl(out / "key.jsonl")
    readers = {
        p.stem: {int(r["id"]): bool(r["same"]) for r in _read_jsonl(p)} for p in reader_files
    }
    sample_meta = json.loads((out / "sample.json").read_text())
    stats = {"sample": sample_meta, **audit_stats(key, readers)}
    print(table(stats))
    # Per config: the drawn pairs it serves (a uniform sample of all it serves), same controls.
    configs = sample_meta.get("configs", {})
    stats["configs"] = {}
    for name in configs if len(configs) > 1 else ():
        mine = [k for k in key if k["kind"] == "control" or name in k.get("configs", ())]
        stats["configs"][name] = audit_stats(mine, readers)
        print(f"\nconfig {name} (delta:floor), recall {configs[name]['recall']}:")
        print(table(stats["configs"][name]))
    path = save("cache_audit", stats)
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="draw the blind sample")
    s.add_argument("--data", type=Path, default=SHARED_DATA / "cache")
    s.add_argument(
        "--config",
        type=parse_config,
        action="append",
        default=None,
        help="DELTA:FLOOR served by the decision (repeat to compare; default 0.1)",
    )
    s.add_argument("--split", choices=("test", "calibration"), default="test")
    s.add_argument("--served", type=int, default=400)
    s.add_argument("--controls", type=int, default=100)
    s.add_argument("--out", type=Path, default=AUDIT)
    s.add_argument("--exclude", type=Path, nargs="*", default=[],
                   help="earlier blind.jsonl files: their pairs are not drawn again")  # fmt: skip
    c = sub.add_parser("score", help="score readers' judgments against the key")
    c.add_argument("readers", type=Path, nargs="+")
    c.add_argument("--out", type=Path, default=AUDIT)
    n = sub.add_parser("census", help="readers' precision over all that is served, every audit")
    n.add_argument("--data", type=Path, default=SHARED_DATA / "cache")
    n.add_argument("--config", type=parse_config, default="0.1", help="DELTA:FLOOR")
    n.add_argument("--split", choices=("test", "calibration"), default="test")
    n.add_argument("--audit", type=Path, nargs="+", action="append", required=True,
                   help="a sample's folder, then its readers' files")  # fmt: skip
    args = parser.parse_args()
    if args.command in ("sample", "census") and not (args.data / "qqp_pairs.jsonl").exists():
        raise SystemExit(f"no evaluation data at {args.data} (../shared/data/cache)")
    if args.command == "sample":
        configs = args.config or [parse_config("0.1")]
        sample(args.data, configs, args.served, args.controls, args.out, args.exclude, args.split)
    elif args.command == "census":
        census(args.data, args.config, args.audit, args.split)
    else:
        score(args.out, args.readers)


if __name__ == "__main__":
    main()
