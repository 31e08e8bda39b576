"""The pool's shape: which replicas exist and how each one's vLLM engine is configured.

Sources, later ones winning field by field: an engine profile (``POOL__PROFILE`` or the pool
file's ``profile``), the pool file's ``[engine]`` table, ``EDGECORE_CORE_ENGINE__*``
variables, then each ``[[replicas]]`` entry's own ``engine`` table. Everything is validated
here, before any process starts, and every error names the field it is about.

    # pool.toml (EDGECORE_CORE_POOL__FILE)
    profile = "cpu-dev"
    replicas = 2                 # or a list of tables, one per replica:
    [engine]
    max_model_len = 1024
    cpu_threads_bind = "split"   # one core each on a CPU box
    # [[replicas]]
    # name = "gpu0-3"
    # engine = { visible_devices = "0,1,2,3", port = 8101 }
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from core.profiles import load_profile, unknown_fields
from core.settings import CoreSettings, EngineConfig

DEFAULT_MAX_IN_FLIGHT = 64


class PoolConfigError(ValueError):
    """The pool configuration is invalid; the message names the field."""


class ReplicaConfig(BaseModel):
    """One replica: a name, its engine, whether this core starts it, its admission limit."""

    name: str
    engine: EngineConfig
    manage: bool
    max_in_flight: int = Field(ge=1)
    api_key: SecretStr | None = None  # the engine's --api-key (CoreSettings.engine_api_key)


class _ReplicaEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
    manage: bool | None = None
    max_in_flight: int | None = Field(default=None, ge=1)
    engine: dict[str, Any] = Field(default_factory=dict)


class _PoolFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    profile: str | None = None
    replicas: int | list[_ReplicaEntry] = Field(default=1)
    max_in_flight: int | None = Field(default=None, ge=1)
    engine: dict[str, Any] = Field(default_factory=dict)


def _fields(exc: ValidationError, prefix: str) -> str:
    """``field: what is wrong`` for each error, fields named from the pool's root."""
    return "; ".join(
        ".".join([prefix, *(str(p) for p in err["loc"])]).strip(".") + f": {err['msg']}"
        for err in exc.errors()
    )


def _read_pool_file(path: Path) -> _PoolFile:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PoolConfigError(f"pool.file: cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PoolConfigError(f"pool.file: invalid TOML in {path}: {exc}") from None
    try:
        return _PoolFile.model_validate(data)
    except ValidationError as exc:
        raise PoolConfigError(f"pool.file {path}: invalid field(s) {_fields(exc, '')}") from None


def _check_engine_keys(data: dict[str, Any], where: str) -> None:
    unknown = unknown_fields(data)
    if unknown:
        raise PoolConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")


def _split(value: str | None, index: int, per_replica: int) -> str | None:
    """Replica ``index``'s share of devices numbered from 0 (``value == 'split'``)."""
    if value != "split":
        return value
    first = index * per_replica
    return ",".join(str(i) for i in range(first, first + per_replica))


def load_pool(settings: CoreSettings) -> list[ReplicaConfig]:
    """The validated replicas of ``settings``; PoolConfigError naming the field otherwise."""
    if settings.profile == "prod":
        missing = [n for n in ("auth_token", "admin_key") if getattr(settings, n) is None]
        if missing:
            raise PoolConfigError(
                f"profile=prod needs {' and '.join(missing)} "
                f"(EDGECORE_CORE_{missing[0].upper()}): the core never runs open in production"
            )
    pool = _read_pool_file(settings.pool.file) if settings.pool.file else _PoolFile()
    base: dict[str, Any] = {}
    profile = settings.pool.profile or pool.profile
    if profile:
        try:
            base = load_profile(profile).model_dump(exclude_unset=True)
        except ValueError as exc:
            raise PoolConfigError(f"pool.profile: {exc}") from None
    _check_engine_keys(pool.engine, "pool.file engine")
    base.update(pool.engine)
    # Only the ENGINE__* variables that were really set override the profile and the file.
    base.update(settings.engine.model_dump(include=settings.engine.model_fields_set))

    entries: list[_ReplicaEntry]
    if isinstance(pool.replicas, int):
        count = settings.pool.replicas if settings.pool.replicas != 1 else pool.replicas
        if count < 1:
            raise PoolConfigError("replicas: must be at least 1")  # pool file; the env is checked
        entries = [_ReplicaEntry() for _ in range(count)]
    else:
        entries = pool.replicas
        if not entries:
            raise PoolConfigError("pool.file replicas: the list is empty")

    replicas: list[ReplicaConfig] = []
    cpus = os.cpu_count() or 1
    for i, entry in enumerate(entries):
        where = f"replicas[{i}].engine"
        _check_engine_keys(entry.engine, where)
        data = {**base, **entry.engine}
        if "port" not in entry.engine:
            data["port"] = int(data.get("port", EngineConfig.model_fields["port"].default)) + i
        try:
            engine = EngineConfig.model_validate(data)
        except ValidationError as exc:
            raise PoolConfigError(f"invalid field(s) {_fields(exc, where)}") from None
        gpus = engine.tensor_parallel_size * engine.pipeline_parallel_size
        engine = engine.model_copy(
            update={
                "cpu_threads_bind": _split(
                    engine.cpu_threads_bind, i, max(1, cpus // len(entries))
                ),
                "visible_devices": _split(engine.visible_devices, i, gpus),
            }
        )
        limit = entry.max_in_flight or settings.pool.max_in_flight or pool.max_in_flight
        replicas.append(
            ReplicaConfig(
                name=entry.name or f"r{i}",
                engine=engine,
                manage=settings.manage_engine if entry.manage is None else entry.manage,
                max_in_flight=limit or engine.max_num_seqs or DEFAULT_MAX_IN_FLIGHT,
                api_key=settings.engine_api_key,
            )
        )
    _check_unique(replicas, settings)
    return replicas


def _check_unique(replicas: list[ReplicaConfig], settings: CoreSettings) -> None:
    names = [r.name for r in replicas]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise PoolConfigError(f"replicas.name: duplicate name(s) {', '.join(dup)}")
    addresses = [(r.engine.host, r.engine.port) for r in replicas]
    clash = sorted({a for a in addresses if addresses.count(a) > 1})
    if clash:
        host, port = clash[0]
        raise PoolConfigError(f"replicas.engine.port: two replicas share {host}:{port}")
    for r in replicas:
        if r.manage and r.engine.port == settings.port and r.engine.host == settings.host:
            raise PoolConfigError(
                f"replicas[{r.name}].engine.port: {r.engine.port} is the core's own port"
            )
