"""GPU pool profiles: named ``EngineConfig`` presets in ``core/profiles/*.toml``.

A profile is the one place a pool's vLLM flags are written down. The Helm chart's engine
values must agree with it (``tests/infra/`` renders the chart and compares the
engine container's arguments with ``load_profile(name).command()``).

    python -m core.profiles                      # list the profiles
    python -m core.profiles llama-3.3-70b-tp4-eagle3   # print the vLLM command line
"""

from __future__ import annotations

import re
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.settings import EngineConfig, SpeculativeConfig

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
_NAME = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.toml"))


def unknown_fields(data: dict[str, Any]) -> list[str]:
    # EngineConfig ignores unknown keys; a typo in a profile must not pass silently.
    unknown = [k for k in data if k not in EngineConfig.model_fields]
    spec = data.get("speculative")
    if isinstance(spec, dict):
        unknown += [f"speculative.{k}" for k in spec if k not in SpeculativeConfig.model_fields]
    return unknown


def load_profile(name: str) -> EngineConfig:
    """The validated engine config of profile ``name``; ValueError naming what is wrong."""
    path = PROFILES_DIR / f"{name}.toml"
    if not _NAME.match(name) or not path.is_file():
        known = ", ".join(profile_names()) or "none"
        raise ValueError(f"unknown engine profile {name!r} (known: {known})")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"engine profile {name!r}: invalid TOML in {path}: {exc}") from None
    unknown = unknown_fields(data)
    if unknown:
        raise ValueError(f"engine profile {name!r}: unknown field(s) {', '.join(unknown)}")
    try:
        return EngineConfig.model_validate(data)
    except ValidationError as exc:
        fields = ", ".join(".".join(str(p) for p in err["loc"]) for err in exc.errors())
        raise ValueError(f"engine profile {name!r}: invalid field(s) {fields}: {exc}") from None


def main(argv: list[str]) -> int:
    if not argv:
        print("\n".join(profile_names()))
        return 0
    try:
        config = load_profile(argv[0])
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(shlex.join(config.command(python="python3")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
