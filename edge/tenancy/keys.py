"""API keys -> tenants, from a TOML file that stores only SHA-256 hashes of the keys.

    [tenants.acme]
    keys = ["sha256:9f86d081..."]        # `edgecore keys add acme` prints a key and adds this
    route_policy = "auto"                 # auto | edge | core
    cache = true
    cache_scope = "user"                  # omit: tenant-wide; user: one OpenAI `user` only
    models = ["auto", "edge-smollm2-135m"] # allowed models (omit: all)
    degrade = "edge"                      # core down: edge | 503 (omit: the edge's setting)
    requests_per_minute = 600
    tokens_per_minute = 200000
    max_concurrency = 32

The file is re-read when it changes (checked every few seconds), so adding or revoking a
key needs no restart. Clients send ``Authorization: Bearer <key>`` as OpenAI SDKs do.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.errors import ApiError

log = logging.getLogger("edgecore.edge.tenants")

KEY_PREFIX = "ec-"


class Tenant(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "default"
    keys: tuple[str, ...] = ()
    route_policy: Literal["auto", "edge", "core"] = "auto"
    cache: bool = True
    cache_nondeterministic: bool = False  # also cache sampled (temperature > 0) answers
    cache_max_entries: int | None = Field(default=None, ge=1)
    # Who shares cached answers: every user of the tenant (None, "tenant"), or only requests
    # with the same OpenAI `user` field (an answer may repeat what its asker said about
    # themselves); with "user", a request without one is not cached. None, not "tenant", by
    # default: a keys file written by `edgecore keys add` then still loads in an older edge.
    cache_scope: Literal["tenant", "user"] | None = None
    models: frozenset[str] | None = None
    degrade: Literal["edge", "503"] | None = None
    # The core's admission class for this tenant's forwarded requests (its queues are
    # bounded per class); None lets the core decide (service_tier "flex" -> batch).
    core_priority: Literal["interactive", "batch"] | None = None
    requests_per_minute: int | None = Field(default=None, ge=1)
    tokens_per_minute: int | None = Field(default=None, ge=1)
    max_concurrency: int | None = Field(default=None, ge=1)


class KeysFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenants: dict[str, Tenant] = Field(default_factory=dict)


def hash_key(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def load_keys_file(path: Path) -> dict[str, Tenant]:
    try:
        raw = tomllib.loads(path.read_text())
        parsed = KeysFile.model_validate(raw)
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise ValueError(f"invalid keys file {path}: {exc}") from exc
    return {name: t.model_copy(update={"name": name}) for name, t in parsed.tenants.items()}


def add_key(path: Path, tenant: str) -> str:
    """Create a key for ``tenant`` (creating the tenant if needed); returns the plain key."""
    key = new_key()
    tenants = load_keys_file(path) if path.exists() else {}
    current = tenants.get(tenant, Tenant(name=tenant))
    tenants[tenant] = current.model_copy(update={"keys": (*current.keys, hash_key(key))})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_keys_file(tenants))
    path.chmod(0o600)
    return key


def dump_keys_file(tenants: dict[str, Tenant]) -> str:
    lines = ["# edgecore API keys (hashes only). See edge/tenants.py for the fields.", ""]
    for name, t in tenants.items():
        lines.append(f"[tenants.{name}]")
        for field, value in t.model_dump(exclude={"name"}, exclude_none=True).items():
            if isinstance(value, bool):
                lines.append(f"{field} = {'true' if value else 'false'}")
            elif isinstance(value, int):
                lines.append(f"{field} = {value}")
            elif isinstance(value, str):
                lines.append(f'{field} = "{value}"')
            else:
                items = ", ".join(f'"{v}"' for v in sorted(value) if isinstance(v, str))
                lines.append(f"{field} = [{items}]")
        lines.append("")
    return "\n".join(lines)


class KeyStore:
    """Resolves a bearer key to its tenant; ``open`` (no keys file) admits everyone."""

    def __init__(self, path: Path | None, *, reload_every_s: float = 5.0) -> None:
        self.path = path
        self.reload_every_s = reload_every_s
        self._by_hash: dict[str, Tenant] = {}
        self._mtime = 0.0
        self._checked = 0.0
        if path is not None:
            self._load()

    @property
    def open(self) -> bool:
        return self.path is None

    def _load(self) -> None:
        assert self.path is not None
        tenants = load_keys_file(self.path)
        self._by_hash = {h: t for t in tenants.values() for h in t.keys}
        self._mtime = self.path.stat().st_mtime

    def _maybe_reload(self) -> None:
        now = time.monotonic()
        if self.path is None or now - self._checked < self.reload_every_s:
            return
        self._checked = now
        try:
            if self.path.stat().st_mtime != self._mtime:
                self._load()
                log.info("reloaded keys from %s", self.path)
        except (OSError, ValueError) as exc:  # keep serving with the keys we have
            log.error("keys file not reloaded: %s", exc)

    def resolve(self, authorization: str | None) -> Tenant:
        if self.open:
            return Tenant()
        self._maybe_reload()
        scheme, _, key = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise _unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        # A lookup by the key's hash: the secret itself is never compared.
        tenant = self._by_hash.get(hash_key(key.strip()))
        if tenant is None:
            raise _unauthorized("invalid or revoked API key")
        return tenant


def _unauthorized(message: str) -> ApiError:
    return ApiError(
        401,
        message,
        code="invalid_api_key",
        headers={"www-authenticate": 'Bearer realm="edgecore"'},
    )
