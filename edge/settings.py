"""The edge's typed settings, loaded once from ``EDGECORE_EDGE_*`` environment variables.

Components get their own section, whole: ``cache``, ``route``, ``core`` (the upstream
cores), ``local`` (the edge model) and ``limits``. A section's field is set as
``EDGECORE_EDGE_<SECTION>__<FIELD>`` (``EDGECORE_EDGE_CACHE__TTL_S``) or by its flat name,
which every earlier release used and which keeps working (``EDGECORE_EDGE_CACHE_TTL_S``;
``legacy_names()`` lists them all, docs/configuration.md documents both).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from shared.paths import default_home, default_models_dir

ENV_PREFIX = "EDGECORE_EDGE_"


class CoreSpec(BaseModel):
    url: str
    priority: int = 0


class CacheSettings(BaseModel):
    """The semantic cache (edge.cache): what is stored, how a hit is decided."""

    enabled: bool = True
    index: str = "edgecore:cache:v2"
    max_entries_per_tenant: int = Field(default=10_000, ge=1)
    min_similarity: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Only when no verifier was prepared: serve neighbours this close by cosine "
        "alone (opposite questions embed at 0.95-0.99); unset: exact repeats only.",
    )
    top_k: int = Field(
        default=1, ge=1, le=64, description="Neighbours verified (more: slower lookups)."
    )
    # Set together with the budget and the cross-encoder (docs/cache.md): with the MLP alone
    # readers called low-cosine hits wrong more often, so the floor was 0.92; the stacked
    # verifier holds QQP precision down to 0.85 with 1.6x the recall.
    candidate_floor: float = Field(
        default=0.85, ge=0.0, le=1.0, description="Neighbours below this cosine are not served."
    )
    false_hit_budget: float = Field(
        default=0.1,
        gt=0.0,
        lt=1.0,
        description="Share of wrong answers among cache hits by the verifier's calibration "
        "(QQP labels, delta); sets the verifier's threshold.",
    )
    cross_encoder: bool = Field(
        default=True,
        description="Also ask the cross-encoder about candidates whose decision it can change "
        "(stacked verifier; docs/cache.md: more recall at the same QQP precision). Falls back "
        "to the MLP alone when the cross-encoder is missing.",
    )
    cross_encoder_band: bool = Field(
        default=True,
        description="Ask the cross-encoder only where its answer can change the decision "
        "(false: every candidate the MLP does not rule out, as before; for measuring).",
    )
    prior_strength: float = Field(
        default=20.0, gt=0.0, description="How many observations the verifier's prior is worth."
    )
    explore_rate: float = Field(
        default=0.05, ge=0.0, le=1.0, description="Share of new hits re-asked to learn from."
    )
    answer_agreement: float = Field(
        default=0.90, ge=0.0, le=1.0, description="Answer cosine that counts a hit as right."
    )
    ttl_s: int = Field(default=3600, ge=1)
    only_deterministic: bool = Field(
        default=True, description="Cache only temperature-0 requests (others vary by design)."
    )
    context_messages: int = Field(
        default=4, ge=1, description="Earlier turns embedded with the last message."
    )


class RouteSettings(BaseModel):
    """The router (edge.routing): which tier answers a cache miss."""

    policy: Literal["auto", "edge", "core"] = "auto"
    mode: Literal["quantile", "fixed"] = Field(
        default="quantile",
        description="quantile: keep ROUTE_CORE_SHARE of scored traffic on the core; "
        "fixed: core when P(large needed) > ROUTE_THRESHOLD.",
    )
    core_share: float = Field(default=0.3, ge=0.0, le=1.0)
    threshold: float = Field(default=0.5, gt=0.0, lt=1.0)
    window: int = Field(default=2000, ge=10)
    min_samples: int = Field(
        default=50, ge=1, description="Scores seen before the quantile threshold moves."
    )
    band: float = Field(
        default=0.02, ge=0.0, description="Score distance from the threshold that is 'borderline'."
    )
    sticky_margin: float = Field(default=0.03, ge=0.0)
    max_prompt_chars: int = Field(
        default=600, ge=0, description="Without a trained router: longer prompts go to the core."
    )
    max_tokens: int = Field(default=256, ge=1)
    saturation_s: float = Field(
        default=10.0,
        gt=0,
        description="After a 429/503 from the core, borderline prompts "
        "stay at the edge for this long.",
    )
    edge_queue_high: int = Field(
        default=4,
        ge=1,
        description="Edge-model queue length at which borderline prompts go to the core.",
    )


class UpstreamSettings(BaseModel):
    """The cores (edge.upstream): HTTP/2 connections, probes, deadlines, fallback."""

    embed_models: list[str] = Field(
        default_factory=list,
        description="Embedding model names the core serves: /v1/embeddings forwards them.",
    )
    multimodal: bool = Field(
        default=False,
        description="The core's model takes image_url parts (else such requests get a 400).",
    )
    responses: bool = Field(
        default=True,
        description="Forward /v1/responses to the core (vLLM serves it); off: 501.",
    )
    url: str = "http://127.0.0.1:8090"
    cores: list[CoreSpec] = Field(
        default_factory=list,
        description='Several cores (regions), JSON: [{"url": ..., "priority": 0}, ...]; '
        "lower priority first. Empty: CORE_URL alone.",
    )
    ca_file: Path | None = Field(
        default=None, description="CA bundle that signs the cores' certificates (https cores)."
    )
    token: SecretStr | None = Field(
        default=None, description="Bearer token the cores require (their AUTH_TOKEN)."
    )
    client_certfile: Path | None = Field(
        default=None, description="mTLS: this edge's client certificate for https cores."
    )
    client_keyfile: Path | None = None
    streams_per_connection: int = Field(default=100, ge=1)
    max_connections: int = Field(default=4, ge=1)
    breaker_threshold: int = Field(default=3, ge=1)
    breaker_cooldown_s: float = Field(default=10.0, gt=0)
    probe_interval_s: float = Field(
        default=1.0, gt=0, description="Health probe (/readyz) of every core, this often."
    )
    probe_timeout_s: float = Field(
        default=2.0, gt=0, description="A probe not answered by then failed (a frozen core)."
    )
    probe_failures: int = Field(
        default=1,
        ge=1,
        description="Failed probes in a row that take a core out of rotation (its breaker "
        "opens, requests waiting on it for a first byte fail over or degrade at once).",
    )
    probe_successes: int = Field(
        default=2, ge=1, description="Answered probes in a row that bring it back."
    )
    sse_keepalive_s: float = Field(
        default=10.0, gt=0, description="Comment lines while a stream waits (long first token)."
    )
    connect_timeout_s: float = Field(default=3.0, gt=0)
    first_byte_timeout_s: float = Field(
        default=120.0, gt=0, description="Deadline for the core's response headers (base)."
    )
    first_byte_per_1k_chars_s: float = Field(
        default=1.0,
        ge=0,
        description="Added to the first-byte deadline per 1000 prompt characters (prefill).",
    )
    unary_per_token_s: float = Field(
        default=0.1,
        ge=0,
        description="A JSON (non-stream) request waits for the whole answer before any byte "
        "comes back: its first-byte deadline grows by this per token of max_tokens "
        "(1024 when unset). Streams are unaffected.",
    )
    idle_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="A stream silent this long ends with an error event (the core sends "
        "comments while its engine works, so only a stalled core stays silent).",
    )
    unavailable_policy: Literal["edge", "503"] = Field(
        default="edge",
        description="Core down: answer with the edge model (x-edgecore-degraded) or 503.",
    )


class LocalSettings(BaseModel):
    """The edge model (edge.tiers.local_model): SmolLM2 on onnxruntime-genai."""

    model_dir: Path | None = None
    provider: str = Field(
        default="cpu",
        description="onnxruntime-genai execution provider: cpu, cuda, dml, openvino, qnn or "
        "webgpu; one this build lacks fails at start, by name.",
    )
    threads: int = Field(default=2, ge=1)
    max_concurrency: int = Field(default=2, ge=1)
    queue_timeout_s: float = Field(default=10.0, gt=0)
    max_new_tokens: int = Field(default=512, ge=1)
    context_tokens: int = Field(
        default=2048, ge=256, description="Longest prompt + answer; capped by the model's own."
    )
    repetition_penalty: float = Field(
        default=1.1,
        ge=1.0,
        le=2.0,
        description="SmolLM2-135M (from a Q4_1 GGUF) loops under greedy decoding without it.",
    )


class LimitSettings(BaseModel):
    """Input limits checked before any work."""

    body_timeout_s: float = Field(default=30.0, gt=0, description="Deadline to receive a body.")
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    max_messages: int = Field(default=256, ge=1)
    max_prompt_chars: int = Field(default=200_000, ge=1)
    max_output_tokens: int = Field(default=8192, ge=1, description="Ceiling on max_tokens.")
    embed_max_inputs: int = Field(default=256, ge=1, description="Inputs per embeddings call.")
    embed_max_input_chars: int = Field(
        default=20_000, ge=1, description="Characters per embeddings input (tokens: 4 each)."
    )


# Section -> (its model, the prefix of its flat names, flat names that break the pattern).
_SECTIONS: dict[str, tuple[type[BaseModel], str, dict[str, str]]] = {
    "cache": (CacheSettings, "cache_", {}),
    "route": (RouteSettings, "route_", {"saturation_s": "core_saturation_s",
                                        "edge_queue_high": "edge_queue_high"}),
    "core": (UpstreamSettings, "core_", {"cores": "cores", "sse_keepalive_s": "sse_keepalive_s"}),
    "local": (LocalSettings, "edge_", {}),
    "limits": (LimitSettings, "", {}),
}  # fmt: skip


def legacy_names() -> dict[str, tuple[str, str]]:
    """Every flat setting name -> (section, field): ``cache_ttl_s`` -> (cache, ttl_s)."""
    return {
        overrides.get(name, prefix + name): (section, name)
        for section, (model, prefix, overrides) in _SECTIONS.items()
        for name in model.model_fields
    }


class _FlatEnv(PydanticBaseSettingsSource):
    """``EDGECORE_EDGE_<FLAT_NAME>`` variables, read into their sections."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the environment itself

    def __call__(self) -> dict[str, Any]:
        env = {k.upper(): v for k, v in os.environ.items()}
        found: dict[str, Any] = {}
        for flat in legacy_names():
            raw = env.get(ENV_PREFIX + flat.upper())
            if raw is not None:
                found[flat] = json.loads(raw) if raw.strip()[:1] in ("[", "{") else raw
        return found


class EdgeSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="ignore"
    )

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65535)
    home: Path = Field(default_factory=default_home)
    tls_certfile: Path | None = Field(default=None, description="Serve HTTPS (h2 via ALPN).")
    tls_keyfile: Path | None = None
    models_dir: Path = Field(default_factory=default_models_dir)
    # Model names the edge answers to. "auto" lets the router pick the tier.
    auto_model: str = "auto"
    edge_model: str = "edge-smollm2-135m"
    core_model: str = "smollm2-135m-instruct"
    embed_model: str = Field(
        default="edge-minilm-l6-v2",
        description="Name of the edge's own embedding model in /v1/embeddings and /v1/models.",
    )
    retry_after_s: int = Field(default=5, ge=1)
    redis_url: str = "redis://127.0.0.1:6390/0"
    redis_timeout_s: float = Field(default=0.25, gt=0)
    admin_keys: list[str] = Field(
        default_factory=list,
        description="SHA-256 hashes (sha256:...) of keys for /admin/*; empty: admin API off.",
    )
    embed_threads: int = Field(default=1, ge=1)
    embed_max_batch: int = Field(default=32, ge=1)
    embed_batch_window_ms: float = Field(default=0.0, ge=0.0)
    blas_threads: int = Field(
        default=1,
        ge=1,
        description="numpy's BLAS threads (verifier, router): their products are small, and "
        "spinning BLAS workers took CPU from the embedder and the event loop.",
    )
    profile: Literal["dev", "prod"] = Field(
        default="dev", description="prod refuses to start without a keys file."
    )
    keys_file: Path | None = Field(default=None, description="TOML: see edge/tenants.py.")
    log_prompts: bool = Field(
        default=False, description="Log prompts (redacted). Off: prompts and answers never logged."
    )

    cache: CacheSettings = Field(default_factory=CacheSettings)
    route: RouteSettings = Field(default_factory=RouteSettings)
    core: UpstreamSettings = Field(default_factory=UpstreamSettings)
    local: LocalSettings = Field(default_factory=LocalSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Nested names (CACHE__TTL_S) win over flat ones (CACHE_TTL_S) when both are set.
        return (
            init_settings,
            env_settings,
            _FlatEnv(settings_cls),
            dotenv_settings,
            file_secret_settings,
        )

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_names(cls, data: Any) -> Any:
        """Flat names (keyword arguments, the flat environment) into their sections."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for flat, (section, name) in legacy_names().items():
            if flat in out:
                value = out.pop(flat)
                current = out.get(section)
                nested = dict(current) if isinstance(current, dict) else {}
                if isinstance(current, BaseModel):
                    nested = current.model_dump()
                nested.setdefault(name, value)
                out[section] = nested
        return out

    def resolved_edge_model_dir(self) -> Path:
        return self.local.model_dir or self.models_dir / "smollm2-135m-instruct-onnx-int8"

    def core_specs(self) -> list[CoreSpec]:
        return self.core.cores or [CoreSpec(url=self.core.url)]

    def router_dir(self) -> Path:
        return self.models_dir / "router"

    def with_cache(self, **changes: object) -> EdgeSettings:
        """A copy with these cache fields changed (``model_copy`` with a flat name such as
        ``cache_cross_encoder`` would set an attribute nothing reads)."""
        return self.model_copy(update={"cache": self.cache.model_copy(update=changes)})

    def verifier_dir(self) -> Path:
        return self.models_dir / "verifier"

    def cross_encoder_dir(self) -> Path:
        return self.models_dir / "cache-cross-encoder"

    def embed_model_dir(self) -> Path:
        return self.models_dir / "all-minilm-l6-v2-onnx"
