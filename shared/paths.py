"""Where edgecore keeps what it builds: models, Redis data, caches (never inside git)."""

from __future__ import annotations

import os
from pathlib import Path


def default_home() -> Path:
    """``$EDGECORE_HOME``, else ``$XDG_CACHE_HOME/edgecore``, else ``~/.cache/edgecore``."""
    explicit = os.environ.get("EDGECORE_HOME")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "edgecore"


def default_models_dir() -> Path:
    return default_home() / "models"
