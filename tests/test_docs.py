"""The README stays a front door (<= 200 lines); every relative link in the docs resolves;
the defaults the docs quote are the code's."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from pydantic import BaseModel

from core.settings import CoreSettings
from edge.settings import EdgeSettings

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move detail to docs/"


def test_relative_links_resolve() -> None:
    pages = [ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("infra/*.md")]
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text()):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


# --- defaults quoted in docs/configuration.md are the settings' ----------------------------

ROW = re.compile(r"^\|\s*(`[^|]+`)\s*\|\s*([^|]+?)\s*\|")
UNITS = {"MiB": 2**20, "KiB": 2**10}


def _default_of(model: type[BaseModel], path: list[str]) -> object:
    field = model.model_fields[path[0]]
    if len(path) == 1:
        return field.get_default(call_default_factory=True)
    inner = field.annotation
    assert isinstance(inner, type) and issubclass(inner, BaseModel), path
    return _default_of(inner, path[1:])


def _setting(service: str, name: str) -> object:
    """The default of ``EDGECORE_<SERVICE>_<name>`` (flat or nested name)."""
    key = name.lower()
    if service == "edge":
        flat = EdgeSettings.legacy_names()
        if key in flat:
            section, field = flat[key]
            return _default_of(EdgeSettings, [section, field])
        return _default_of(EdgeSettings, key.split("__"))
    return _default_of(CoreSettings, key.split("__"))


def _literal(text: str) -> tuple[bool, object]:
    """(parsed, value) for a default as the docs write it; descriptive ones are skipped."""
    t = text.strip().strip("`")
    if t in ("true", "false"):
        return True, t == "true"
    if t in ("none", "unset", "-"):  # "-": not set, the engine decides
        return True, None
    if t == "[]":
        return True, []
    number, _, unit = t.partition(" ")
    try:
        value = float(number.replace(",", "")) * (UNITS[unit] if unit else 1)
    except (ValueError, KeyError):
        return (bool(re.fullmatch(r"[\w.:/-]+", t)) and "~" not in t), t
    return True, value


def _rows(section: str) -> list[tuple[list[str], list[str]]]:
    text = (ROOT / "docs/configuration.md").read_text()
    edge, _, core = text.partition("\n## Core (")
    rows = []
    for line in (edge if section == "edge" else core).splitlines():
        m = ROW.match(line)
        if m and m.group(1) != "`variable`":
            names = re.findall(r"`([A-Z0-9_]+)`", m.group(1))
            rows.append((names, [d.strip() for d in m.group(2).split(", ")]))
    return rows


def test_defaults_quoted_in_the_configuration_doc_are_the_settings() -> None:
    checked, wrong = 0, []
    for service in ("edge", "core"):
        for names, defaults in _rows(service):
            if len(names) != len(defaults):
                continue  # a default written in words ("max_num_seqs, else 64")
            for name, doc in zip(names, defaults, strict=True):
                parsed, value = _literal(doc)
                if not parsed:
                    continue
                actual = _setting(service, name)
                if isinstance(value, float) and not isinstance(actual, bool):
                    same = isinstance(actual, int | float) and float(actual) == value
                else:
                    same = actual == value or str(actual) == value
                checked += 1
                if not same:
                    wrong.append(f"{service} {name}: docs say {doc}, the settings {actual!r}")
    assert checked > 60, checked
    assert not wrong, "\n".join(wrong)


def test_the_configuration_doc_is_generated_from_the_settings() -> None:
    from tools.settings_doc import DOC, render

    assert DOC.read_text() == render(), "run: python -m tools.settings_doc"


def test_every_setting_is_in_the_configuration_doc() -> None:
    text = (ROOT / "docs/configuration.md").read_text()
    edge, _, core = text.partition("\n## Core (")
    named = {"edge": set(re.findall(r"`([A-Z0-9_]+)`", edge)),
             "core": set(re.findall(r"`([A-Z0-9_]+)`", core))}  # fmt: skip
    missing = []
    for service, model in (("edge", EdgeSettings), ("core", CoreSettings)):
        for name, field in model.model_fields.items():
            inner = field.annotation
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                for sub in inner.model_fields:
                    if f"{name}__{sub}".upper() not in named[service]:
                        missing.append(f"{service} {name}__{sub}".upper())
            elif name.upper() not in named[service]:
                missing.append(f"{service} {name.upper()}")
    assert not missing, f"settings missing from docs/configuration.md: {missing}"


def test_no_doc_or_deployment_uses_a_deprecated_setting_name() -> None:
    """Old flat names are read for one release only: nothing shipped may rely on them."""
    old = {
        prefix + flat.upper()
        for prefix, model in (("EDGECORE_EDGE_", EdgeSettings), ("EDGECORE_CORE_", CoreSettings))
        for flat in model.legacy_names()
    }
    name = re.compile(r"EDGECORE_(?:EDGE|CORE)_[A-Z0-9_]+")
    files = [ROOT / "README.md", ROOT / "Makefile", *ROOT.glob("docs/**/*.md"),
             *ROOT.glob("infra/**/*"), *ROOT.glob("tools/**/*.py"), *ROOT.glob("bench/*.py"),
             *ROOT.glob("edge/**/*.py"), *ROOT.glob("core/**/*.py"),
             *ROOT.glob("core/profiles/*.toml"), *ROOT.glob("tests/**/*.py")]  # fmt: skip
    # These say what the old names were, to explain the rename.
    allowed = {ROOT / p for p in ("tests/edge/test_settings.py", "docs/configuration.md",
                                  "tools/settings_doc.py", "edge/settings.py")}  # fmt: skip
    found = [
        f"{path.relative_to(ROOT)}: {hit}"
        for path in files
        if path.is_file() and path not in allowed
        for hit in name.findall(path.read_text(errors="ignore"))
        if hit in old
    ]
    assert not found, found


def test_code_in_the_docs_imports() -> None:
    """Every import the docs show (``python -c '...'`` lines, ```python blocks) resolves."""
    snippets = []
    for page in [ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("infra/*.md")]:
        text = page.read_text()
        snippets += [(page, s) for s in re.findall(r"python -c '([^']+)'", text)]
        snippets += [(page, s) for s in re.findall(r"```python\n(.*?)```", text, re.S)]
    assert snippets
    broken = []
    for page, source in snippets:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = importlib.import_module(node.module)
                broken += [f"{page.name}: {node.module}.{a.name}" for a in node.names
                           if not hasattr(module, a.name)]  # fmt: skip
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    importlib.import_module(alias.name)
    assert not broken, broken


# --- one measured build time, said the same way everywhere ---------------------------------

BUILD_TIME = re.compile(
    r"full build takes about (\d+) min and the test build about (\d+) min on 2 idle cores"
)
# Where a newcomer or an operator reads how long the models take to build.
BUILD_TIME_PLACES = ("README.md", "Makefile", "tools/prepare/__init__.py", "tools/cli.py",
                     "docs/cache.md", "tools/prepare/cross_encoder_train.py")  # fmt: skip


def test_the_model_build_time_is_one_measured_figure() -> None:
    """docs/models.md states the measured figures; every other place that speaks of the
    build's duration repeats them, and says no other duration (they drifted: 'about an
    hour', '25 minutes', '15-20 min' and '6 min' for the same build)."""
    source = BUILD_TIME.search(" ".join((ROOT / "docs/models.md").read_text().split()))
    assert source, "docs/models.md must state the build times (BUILD_TIME)"
    full, small = source.groups()
    for place in BUILD_TIME_PLACES:
        text = " ".join((ROOT / place).read_text().split())
        found = BUILD_TIME.search(text)
        assert found, f"{place} must state the build times as docs/models.md does"
        assert found.groups() == (full, small), f"{place} says {found.groups()}"
        others = set(re.findall(r"(\d+) min(?:utes)?\b", text)) - {full, small}
        assert not others and " hour" not in text, f"{place} also says {others or 'an hour'}"
