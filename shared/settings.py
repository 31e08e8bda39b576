"""What every edgecore service's settings have: the server fields, and the old flat names.

``ServerSettings`` is the base of ``EdgeSettings`` and ``CoreSettings``: where the service
listens, its home, its profile, TLS, and the Retry-After it sends. Each service groups the
rest into sections (``CACHE__TTL_S``, ``ADMISSION__QUEUE_BATCH``), set by their nested
names only.

Earlier releases named section fields flat (``EDGECORE_EDGE_CACHE_TTL_S``). A subclass lists
those in ``legacy``; they keep working for one release, each read logs a deprecation
warning naming its new name, and the nested name wins when both are set.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from shared.paths import default_home

log = logging.getLogger("edgecore.settings")


class Legacy(BaseModel):
    """How one section's fields were named flat: ``prefix + field``, except ``renamed``."""

    prefix: str
    renamed: dict[str, str] = Field(default_factory=dict)  # field -> its flat name
    new: frozenset[str] = frozenset()  # fields added since, which never had a flat name


class ServerSettings(BaseSettings):
    host: str = Field(default="127.0.0.1", description="Listen address.")
    port: int = Field(default=8080, ge=1, le=65535, description="Listen port.")
    home: Path = Field(
        default_factory=default_home,
        description="Where edgecore keeps models, data and caches ($EDGECORE_HOME, else "
        "~/.cache/edgecore).",
    )
    profile: Literal["dev", "prod"] = Field(
        default="dev", description="prod refuses to start without its credentials."
    )
    tls_certfile: Path | None = Field(default=None, description="Serve HTTPS (h2 via ALPN).")
    tls_keyfile: Path | None = Field(default=None, description="The TLS certificate's key.")
    retry_after_s: int = Field(
        default=5, ge=1, description="Retry-After on this service's own 429s and 503s."
    )
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field(
        default="asyncio",
        description="The server's event loop: asyncio, uvloop, or auto (uvloop where "
        "installed). uvloop did not measurably pay on the edge's forward path (bench."
        "forward_overhead: 0.94-1.08x requests per CPU-second, within run-to-run noise).",
    )

    # Section -> how its fields were named flat. Set by each service.
    legacy: ClassVar[dict[str, Legacy]] = {}

    @classmethod
    def legacy_names(cls) -> dict[str, tuple[str, str]]:
        """Every old flat name -> (section, field): ``cache_ttl_s`` -> (cache, ttl_s)."""
        out: dict[str, tuple[str, str]] = {}
        for section, old in cls.legacy.items():
            annotation = cls.model_fields[section].annotation
            assert isinstance(annotation, type) and issubclass(annotation, BaseModel)
            for name in annotation.model_fields:
                if name not in old.new:
                    out[old.renamed.get(name, old.prefix + name)] = (section, name)
        return out

    @classmethod
    def sections(cls) -> list[str]:
        """The fields that are sections (a model of their own, set as SECTION__FIELD)."""
        return [
            name
            for name, field in cls.model_fields.items()
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
        ]

    @classmethod
    def env_name(cls, section: str, name: str) -> str:
        prefix = str(cls.model_config.get("env_prefix", ""))
        return f"{prefix}{section}__{name}".upper()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Nested names (CACHE__TTL_S) win over the old flat ones (CACHE_TTL_S).
        flat = _FlatEnv(settings_cls)
        return init_settings, env_settings, flat, dotenv_settings, file_secret_settings

    @model_validator(mode="before")
    @classmethod
    def _nest_names(cls, data: Any) -> Any:
        """``section__field`` keyword arguments, as in the environment, and the old flat
        names (keyword arguments, the flat environment), into their sections."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        sections = cls.sections()
        for key in [k for k in out if "__" in k and k.partition("__")[0] in sections]:
            section, _, name = key.partition("__")
            _section(out, section)[name] = out.pop(key)
        for flat, (section, name) in cls.legacy_names().items():
            if flat in out:
                _section(out, section).setdefault(name, out.pop(flat))
        return out


def _section(data: dict[str, Any], section: str) -> dict[str, Any]:
    """``data[section]`` as a dict to add fields to (a model given whole is dumped)."""
    current = data.get(section)
    if isinstance(current, BaseModel):
        current = current.model_dump()
    nested = dict(current) if isinstance(current, dict) else {}
    data[section] = nested
    return nested


class _FlatEnv(PydanticBaseSettingsSource):
    """The old ``<PREFIX><FLAT_NAME>`` variables, read into their sections, with a
    deprecation warning for each one set."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the environment itself

    def __call__(self) -> dict[str, Any]:
        cls = self.settings_cls
        assert issubclass(cls, ServerSettings)
        prefix = str(cls.model_config.get("env_prefix", ""))
        env = {k.upper(): v for k, v in os.environ.items()}
        found: dict[str, Any] = {}
        for flat, (section, name) in cls.legacy_names().items():
            raw = env.get((prefix + flat).upper())
            if raw is None:
                continue
            found[flat] = json.loads(raw) if raw.strip()[:1] in ("[", "{") else raw
            new = cls.env_name(section, name)
            message = (
                f"{(prefix + flat).upper()} is deprecated and will be removed in the next "
                f"release: set {new}"
            )
            warnings.warn(message, DeprecationWarning, stacklevel=2)
            log.warning("%s", message)
        return found
