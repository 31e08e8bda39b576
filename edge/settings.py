"""The edge's typed settings, loaded once from ``EDGECORE_EDGE_*`` environment variables.

Components get their own section, whole: ``cache``, ``route``, ``core`` (the upstream
cores), ``local`` (the edge model), ``limits``, ``embed`` and ``redis``. A section's field is
set by its nested name, ``EDGECORE_EDGE_<SECTION>__<FIELD>`` (``EDGECORE_EDGE_CACHE__TTL_S``).
The flat names of earlier releases (``EDGECORE_EDGE_CACHE_TTL_S``) still work for this
release, with a deprecation warning (``shared.settings``). docs/configuration.md is
generated from these models (``python -m tools.settings_doc``).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import SettingsConfigDict

from shared.cpus import usable_cpus
from shared.paths import default_models_dir
from shared.settings import Legacy, ServerSettings

ENV_PREFIX = "EDGECORE_EDGE_"


class CoreSpec(BaseModel):
    url: str
    priority: int = 0


class CacheSettings(BaseModel):
    """The semantic cache (edge.cache): what is stored, how a hit is decided."""

    enabled: bool = Field(
        default=True, description="The semantic cache; false: every request goes to a tier."
    )
    index: str = Field(
        default="edgecore:cache:v2",
        description="The Redis index (and key prefix) of the cache's entries.",
    )
    max_entries_per_tenant: int = Field(
        default=10_000, ge=1, description="Per-tenant cap; the oldest entries are evicted."
    )
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
    match_threads: int | None = Field(
        default=None,
        ge=1,
        description="Threads that make the match decision (its cross-encoder) off the event "
        "loop; unset: the CPUs this process may use, at most its container's CPU limit "
        "(asyncio's default of CPUs + 4 measured slower, docs/benchmarks.md).",
    )
    prior_strength: float = Field(
        default=20.0, gt=0.0, description="How many observations the verifier's prior is worth."
    )
    explore_rate: float = Field(
        default=0.05, ge=0.0, le=1.0, description="Share of new hits re-asked to learn from."
    )
    respell: bool = Field(
        default=True,
        description="On a miss, look again with the question's typos fixed (symspellpy's "
        "English dictionary); served only when the verifier agrees and the cached question "
        "has every fixed word.",
    )
    answer_agreement: float = Field(
        default=0.90, ge=0.0, le=1.0, description="Answer cosine that counts a hit as right."
    )
    ttl_s: int = Field(default=3600, ge=1, description="Absolute time to live of an entry.")
    only_deterministic: bool = Field(
        default=True, description="Cache only temperature-0 requests (others vary by design)."
    )
    context_messages: int = Field(
        default=4, ge=1, description="Earlier turns embedded with the last message."
    )

    def match_workers(self) -> int:
        """``match_threads``, or the CPUs this process may use."""
        return self.match_threads if self.match_threads is not None else usable_cpus()


class RouteSettings(BaseModel):
    """The router (edge.routing): which tier answers a cache miss."""

    policy: Literal["auto", "edge", "core"] = Field(
        default="auto",
        description="edge / core pins every auto request to a tier (see docs/routing.md).",
    )
    mode: Literal["quantile", "fixed"] = Field(
        default="quantile",
        description="quantile: keep ROUTE__CORE_SHARE of scored traffic on the core; "
        "fixed: core when P(large needed) > ROUTE__THRESHOLD.",
    )
    core_share: float = Field(
        default=0.3,
        ge=0.0,
        le=1.0,
        description="quantile mode: the share of scored traffic sent to the core.",
    )
    threshold: float = Field(
        default=0.5, gt=0.0, lt=1.0, description="fixed mode: scores above this go to the core."
    )
    window: int = Field(
        default=2000, ge=10, description="Recent scores the quantile threshold is kept over."
    )
    min_samples: int = Field(
        default=50, ge=1, description="Scores seen before the quantile threshold moves."
    )
    band: float = Field(
        default=0.02, ge=0.0, description="Score distance from the threshold that is 'borderline'."
    )
    sticky_margin: float = Field(
        default=0.03,
        ge=0.0,
        description="A conversation keeps its tier unless its score moves this far past the"
        " threshold (score units).",
    )
    max_prompt_chars: int = Field(
        default=600, ge=0, description="Without a trained router: longer prompts go to the core."
    )
    max_tokens: int = Field(
        default=256, ge=1, description="Requests asking for more output tokens go to the core."
    )
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
    url: str = Field(
        default="http://127.0.0.1:8090",
        description="The core; http:// = h2c prior knowledge, https:// = h2 via ALPN. CORE__CORES"
        " for several.",
    )
    cores: list[CoreSpec] = Field(
        default_factory=list,
        description='Several cores (regions), JSON: [{"url": ..., "priority": 0}, ...]; '
        "lower priority first. Empty: CORE__URL alone.",
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
    client_keyfile: Path | None = Field(
        default=None, description="mTLS: the key of CORE__CLIENT_CERTFILE."
    )
    streams_per_connection: int = Field(
        default=100, ge=1, description="HTTP/2 streams per connection to a core."
    )
    max_connections: int = Field(default=4, ge=1, description="HTTP/2 connections per core.")
    breaker_threshold: int = Field(
        default=3, ge=1, description="Failures in a row that open a core's breaker."
    )
    breaker_cooldown_s: float = Field(
        default=10.0, gt=0, description="Time an open breaker waits before a trial request."
    )
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
    connect_timeout_s: float = Field(
        default=3.0, gt=0, description="Deadline to connect to a core."
    )
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

    model_dir: Path | None = Field(
        default=None,
        description="The edge model's onnxruntime-genai folder (none: "
        "MODELS_DIR/smollm2-135m-instruct-onnx-int8).",
    )
    provider: str = Field(
        default="cpu",
        description="onnxruntime-genai execution provider: cpu, cuda, dml, openvino, qnn or "
        "webgpu; one this build lacks fails at start, by name.",
    )
    threads: int = Field(default=2, ge=1, description="The edge model's intra-op threads.")
    max_concurrency: int = Field(
        default=8,
        ge=1,
        description="Generations at once (with batching: the rows that share a decode step); "
        "more wait for a slot.",
    )
    queue_timeout_s: float = Field(
        default=10.0, gt=0, description="Longest wait for a slot before a 503 (edge_busy)."
    )
    batching: Literal["auto", "steps", "engine", "off"] = Field(
        default="auto",
        description="steps: continuous batching on the CPU, every running generation in each "
        "decode step and a new one joining at the next (measured at 8 streams: about 3x the "
        "tokens/s of off; docs/models.md). engine: onnxruntime-genai's Engine (static batches "
        "on the CPU, dynamic on CUDA). off: one generation per slot. auto: steps on the CPU, "
        "engine on another provider.",
    )
    max_new_tokens: int = Field(
        default=512, ge=1, description="Output tokens when a request sets no max_tokens."
    )
    restart_backoff_s: float = Field(
        default=1.0,
        ge=0,
        description="Wait before starting a new model process when one dies (doubling after "
        "each failed try, up to 60 s); meanwhile the edge model answers 503 and auto goes "
        "to the core. 0: never (the edge model stays down until the edge restarts).",
    )
    context_tokens: int = Field(
        default=2048, ge=256, description="Longest prompt + answer; capped by the model's own."
    )
    repetition_penalty: float | None = Field(
        default=None,
        ge=1.0,
        le=2.0,
        description="Repetition penalty when a request sets none. None: the model folder's "
        "(edgecore.json: 1.1 for SmolLM2-135M, which loops under greedy decoding without "
        "it), else 1.0 (off).",
    )


class LimitSettings(BaseModel):
    """Input limits checked before any work."""

    body_timeout_s: float = Field(default=30.0, gt=0, description="Deadline to receive a body.")
    max_body_bytes: int = Field(
        default=1024 * 1024, ge=1024, description="Largest request body (413 above it)."
    )
    max_messages: int = Field(default=256, ge=1, description="Most messages in one chat request.")
    max_prompt_chars: int = Field(
        default=200_000, ge=1, description="Longest prompt, in characters (400 above it)."
    )
    max_output_tokens: int = Field(default=8192, ge=1, description="Ceiling on max_tokens.")
    embed_max_inputs: int = Field(default=256, ge=1, description="Inputs per embeddings call.")
    embed_max_input_chars: int = Field(
        default=20_000, ge=1, description="Characters per embeddings input (tokens: 4 each)."
    )


class EmbedSettings(BaseModel):
    """The edge's embedding model (edge.embedder): MiniLM on ONNX Runtime, batched."""

    model: str = Field(
        default="edge-minilm-l6-v2",
        description="Its name in /v1/embeddings and /v1/models.",
    )
    threads: int = Field(default=1, ge=1, description="ONNX Runtime threads per run.")
    workers: int | None = Field(
        default=None,
        ge=1,
        description="Threads that embed side by side, each text run alone; unset: the CPUs "
        "this process may use, at most its container's CPU limit (one thread capped the "
        "cache's semantic hits, docs/benchmarks.md).",
    )
    max_batch: int = Field(default=32, ge=1, description="Texts embedded in one batch.")
    batch_window_ms: float = Field(
        default=0.0,
        ge=0.0,
        description="How long the batcher waits for more texts (0: only what queued meanwhile).",
    )

    def worker_count(self) -> int:
        """``workers``, or the CPUs this process may use."""
        return self.workers if self.workers is not None else usable_cpus()


class RedisSettings(BaseModel):
    """Redis with vector search (edge.cache.store): the cache's and the rate limits' store."""

    url: str = Field(default="redis://127.0.0.1:6390/0", description="Redis with vector search.")
    timeout_s: float = Field(default=0.25, gt=0, description="A slower Redis is bypassed.")
    backoff_s: float = Field(
        default=5.0, gt=0, description="How long a failed Redis is bypassed before a retry."
    )


class EdgeSettings(ServerSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="ignore"
    )

    models_dir: Path = Field(
        default_factory=default_models_dir, description="Prepared models (HOME/models)."
    )
    # Model names the edge answers to. "auto" lets the router pick the tier.
    auto_model: str = Field(
        default="auto", description="The model name that lets the router pick the tier."
    )
    edge_model: str = Field(
        default="",
        description="The edge model's name: pins a request to it (empty: the name its model "
        "folder gives in edgecore.json, else edge-<folder name>).",
    )
    core_model: str = Field(
        default="smollm2-135m-instruct", description="The core's model name: pins a request to it."
    )
    admin_keys: list[str] = Field(
        default_factory=list,
        description="SHA-256 hashes (sha256:...) of keys for /admin/*; empty: admin API off.",
    )
    blas_threads: int = Field(
        default=1,
        ge=1,
        description="numpy's BLAS threads (verifier, router): their products are small, and "
        "spinning BLAS workers took CPU from the embedder and the event loop.",
    )
    profile: Literal["dev", "prod"] = Field(
        default="dev", description="prod refuses to start without a keys file."
    )
    keys_file: Path | None = Field(
        default=None, description="TOML of tenants and their API keys (docs/tenancy.md)."
    )
    log_prompts: bool = Field(
        default=False, description="Log prompts (redacted). Off: prompts and answers never logged."
    )

    cache: CacheSettings = Field(default_factory=CacheSettings)
    route: RouteSettings = Field(default_factory=RouteSettings)
    core: UpstreamSettings = Field(default_factory=UpstreamSettings)
    local: LocalSettings = Field(default_factory=LocalSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    embed: EmbedSettings = Field(default_factory=EmbedSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)

    legacy: ClassVar[dict[str, Legacy]] = {
        "cache": Legacy(prefix="cache_"),
        "route": Legacy(prefix="route_", renamed={"saturation_s": "core_saturation_s",
                                                  "edge_queue_high": "edge_queue_high"}),
        "core": Legacy(prefix="core_", renamed={"cores": "cores",
                                                "sse_keepalive_s": "sse_keepalive_s"}),
        "local": Legacy(prefix="edge_",
                        new=frozenset({"provider", "restart_backoff_s", "batching"})),
        "limits": Legacy(prefix=""),
        "embed": Legacy(prefix="embed_"),
        "redis": Legacy(prefix="redis_", new=frozenset({"backoff_s"})),
    }  # fmt: skip

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
