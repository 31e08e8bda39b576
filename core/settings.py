"""The core's typed settings: where it listens and which vLLM engine it supervises.

A GPU profile (70B, tensor parallel 4, EAGLE-3 speculation) is a change of these values,
not of code: ``EngineConfig.command()`` turns them into vLLM's command line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from shared.paths import default_models_dir
from shared.settings import Legacy, ServerSettings


class SpeculativeConfig(BaseModel):
    """vLLM's ``--speculative-config``; only set fields are passed on."""

    method: Literal["eagle3", "eagle", "draft_model", "ngram", "mtp"]
    model: str | None = None
    num_speculative_tokens: int = Field(default=3, ge=1, le=16)
    prompt_lookup_max: int | None = None
    prompt_lookup_min: int | None = None
    disable_by_batch_size: int | None = Field(
        default=None,
        ge=1,
        description="Stop speculating once this many sequences run at once (big batches are "
        "compute-bound, drafts only cost). vLLM 0.32 has no flag of this name: it is emitted "
        "as its dynamic schedule, num_speculative_tokens_per_batch_size.",
    )

    @model_validator(mode="after")
    def _needs_model(self) -> SpeculativeConfig:
        if self.method in ("eagle3", "eagle", "draft_model") and not self.model:
            raise ValueError(f"speculative method {self.method!r} needs a draft model path")
        return self

    def vllm_json(self) -> dict[str, Any]:
        """The JSON vLLM 0.32 takes for ``--speculative-config``."""
        spec: dict[str, Any] = self.model_dump(exclude_none=True)
        limit = spec.pop("disable_by_batch_size", None)
        if limit is not None:
            k = self.num_speculative_tokens
            # Inclusive batch-size ranges; vLLM carries the last K (0) through the tail.
            schedule = [[1, limit - 1, k], [limit, limit, 0]] if limit > 1 else [[1, 1, 0]]
            spec["num_speculative_tokens_per_batch_size"] = schedule
        return spec


class EngineConfig(BaseModel):
    """The vLLM engine each replica runs (``command()`` is its command line)."""

    model: str = Field(
        default_factory=lambda: str(default_models_dir() / "smollm2-135m-instruct-hf"),
        description="Model path (prepared HF folder) or name.",
    )
    served_model_name: str = Field(
        default="smollm2-135m-instruct", description="The model name clients use."
    )
    host: str = Field(
        default="127.0.0.1",
        description="The engine's address (a supervised one listens on loopback).",
    )
    port: int = Field(
        default=8091,
        ge=1,
        le=65535,
        description="The engine's port (replica i of a pool: PORT + i).",
    )
    tensor_parallel_size: int = Field(default=1, ge=1, description="vLLM's --tensor-parallel-size.")
    pipeline_parallel_size: int = Field(
        default=1, ge=1, description="vLLM's --pipeline-parallel-size."
    )
    distributed_executor_backend: Literal["mp", "ray", "uni"] | None = Field(
        default=None, description="vLLM's --distributed-executor-backend (mp or ray)."
    )
    dtype: str = Field(default="auto", description="vLLM's --dtype.")
    quantization: str | None = Field(default=None, description="vLLM's --quantization.")
    max_model_len: int | None = Field(default=4096, ge=128, description="vLLM's --max-model-len.")
    max_num_seqs: int | None = Field(default=None, ge=1, description="vLLM's --max-num-seqs.")
    gpu_memory_utilization: float | None = Field(
        default=None, gt=0.0, le=1.0, description="vLLM's --gpu-memory-utilization."
    )
    enable_prefix_caching: bool | None = Field(
        default=None, description="vLLM's --enable-prefix-caching (None: vLLM's default)."
    )
    enforce_eager: bool = Field(
        default=True, description="Skip graph capture: CPU dev starts in ~25 s instead of ~90 s."
    )
    speculative: SpeculativeConfig | None = Field(
        default=None,
        description='JSON, e.g. {"method": "eagle3", "model": "/models/eagle3", '
        '"num_speculative_tokens": 3}.',
    )
    cpu_kv_cache_gib: int | None = Field(
        default=1, ge=1, description="VLLM_CPU_KVCACHE_SPACE on CPU builds; ignored on GPUs."
    )
    cpu_threads_bind: str | None = Field(
        default=None,
        description="VLLM_CPU_OMP_THREADS_BIND on CPU builds (e.g. '0', '1-3'); 'split' gives "
        "each replica of a pool its own share of this machine's cores. None: vLLM's auto.",
    )
    visible_devices: str | None = Field(
        default=None,
        description="CUDA_VISIBLE_DEVICES for this engine (e.g. '0,1,2,3'); 'split' gives "
        "replica i of a pool the GPUs i*TP*PP .. (i+1)*TP*PP-1.",
    )
    otlp_traces_endpoint: str | None = Field(
        default=None,
        description="vLLM's --otlp-traces-endpoint (e.g. 'grpc://otel-collector:4317'): its "
        "request spans join the trace the core forwards in traceparent. None: no engine traces.",
    )
    tool_call_parser: str | None = Field(
        default=None,
        description="vLLM's --tool-call-parser for the model (llama3_json for Llama 3.x, "
        "hermes, mistral, ...); set: tool calling on (--enable-auto-tool-choice).",
    )
    extra_args: list[str] = Field(
        default_factory=list, description="More vLLM flags (a JSON list)."
    )
    startup_timeout_s: float = Field(
        default=600.0, gt=0, description="A supervised engine not healthy by then failed to start."
    )

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self, python: str = sys.executable) -> list[str]:
        # `python -m` rather than the `vllm` script: the script fails under the `vllm-cpu`
        # distribution name.
        argv = [
            python, "-m", "vllm.entrypoints.openai.api_server",
            "--model", self.model,
            "--served-model-name", self.served_model_name,
            "--host", self.host,
            "--port", str(self.port),
            "--tensor-parallel-size", str(self.tensor_parallel_size),
            "--pipeline-parallel-size", str(self.pipeline_parallel_size),
            "--dtype", self.dtype,
            "--disable-uvicorn-access-log",
        ]  # fmt: skip
        if self.distributed_executor_backend:
            argv += ["--distributed-executor-backend", self.distributed_executor_backend]
        if self.quantization:
            argv += ["--quantization", self.quantization]
        if self.max_model_len:
            argv += ["--max-model-len", str(self.max_model_len)]
        if self.max_num_seqs:
            argv += ["--max-num-seqs", str(self.max_num_seqs)]
        if self.tool_call_parser:
            argv += ["--enable-auto-tool-choice", "--tool-call-parser", self.tool_call_parser]
        if self.gpu_memory_utilization:
            argv += ["--gpu-memory-utilization", str(self.gpu_memory_utilization)]
        if self.enable_prefix_caching is not None:
            argv.append(
                "--enable-prefix-caching"
                if self.enable_prefix_caching
                else "--no-enable-prefix-caching"
            )
        if self.enforce_eager:
            argv.append("--enforce-eager")
        if self.speculative:
            spec = self.speculative.vllm_json()
            argv += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
        if self.otlp_traces_endpoint:
            argv += ["--otlp-traces-endpoint", self.otlp_traces_endpoint]
        return argv + list(self.extra_args)


class PoolSettings(BaseModel):
    """The engines this core relays to (core/pool_config.py turns these into replicas)."""

    file: Path | None = Field(
        default=None, description="TOML pool: profile, replicas, per-replica engine settings."
    )
    profile: str | None = Field(
        default=None, description="Engine profile (core/profiles/NAME.toml) under ENGINE__*."
    )
    replicas: int = Field(
        default=1, ge=1, le=64, description="Identical replicas; engine ports ENGINE__PORT + i."
    )
    max_in_flight: int | None = Field(
        default=None,
        ge=1,
        description="Requests sent to one replica at once (default: its max_num_seqs, else 64); "
        "more wait in the core's bounded queue instead of vLLM's unbounded one.",
    )
    metrics_interval_s: float = Field(
        default=1.0, gt=0, description="How often each engine's /metrics is read."
    )
    affinity_slack: float = Field(
        default=0.25,
        ge=0.0,
        description="How much busier (share of max_in_flight) the preferred replica of a "
        "conversation may be than the least loaded before its traffic moves.",
    )
    drain_timeout_s: float = Field(
        default=300.0, gt=0, description="Default drain deadline; then in-flight requests end."
    )


class AdmissionSettings(BaseModel):
    """Bounded queues per priority class (core/admission.py, core/policy.py)."""

    queue_interactive: int = Field(default=64, ge=0, description="Waiting interactive requests.")
    queue_batch: int = Field(default=256, ge=0, description="Waiting batch requests.")
    queue_timeout_s: float = Field(
        default=30.0, gt=0, description="Longest wait for a replica (a request may ask for less)."
    )
    batch_tenants: list[str] = Field(
        default_factory=list, description="Tenants (x-edgecore-tenant) whose requests are batch."
    )


class HealthSettings(BaseModel):
    """Is each engine alive and making progress (core/replica.py, core/progress.py)?

    A frozen engine accepts connections and answers nothing; a wedged one answers /health
    (the API server is up) while its scheduler produces no token.
    """

    interval_s: float = Field(
        default=1.0, gt=0, description="How often a supervised engine's /health is asked."
    )
    timeout_s: float = Field(
        default=2.0,
        gt=0,
        description="An engine that does not answer /health (engines run elsewhere: /metrics) "
        "by then is unhealthy: it gets nothing new, its requests without a first byte move to "
        "another replica (or get 503), its streams end with an error event, unless they moved "
        "while the probe waited (a busy API server answers late; the progress watch still "
        "ends them if they stop).",
    )
    wedged_restart_s: float = Field(
        default=60.0,
        ge=0,
        description="A supervised engine unhealthy (or wedged) this long after it was ready is "
        "killed and restarted like one that exited; 0: only when it exits.",
    )
    progress_timeout_s: float = Field(
        default=3.0,
        ge=0,
        description="An engine with requests of this core in flight that produces no token "
        "and no byte for this long (or 4x its own recent pace, up to 10x; plus "
        "PREFILL_TOKENS_PER_S's allowance for prompts in prefill) is wedged: treated like one "
        "that stopped answering /health; 0: off.",
    )
    prefill_tokens_per_s: float = Field(
        default=1000.0,
        gt=0,
        description="The slowest prefill expected (prompt tokens per second, estimated as "
        "bytes / 4): a long prompt's silence before its first token is not a wedge.",
    )
    canary_idle_s: float = Field(
        default=30.0,
        ge=0,
        description="A replica with no traffic and no progress for this long is sent a "
        "one-token generation (a wedged one every PROGRESS_TIMEOUT_S, to see it come back), so "
        "a wedge is found before a user meets it; 0: never.",
    )


class DiscoverySettings(BaseModel):
    """Engines run elsewhere, one replica per engine pod (core/discovery.py)."""

    dns_name: str | None = Field(
        default=None,
        description="DNS name whose A/AAAA records are the engines (a Kubernetes headless "
        "Service): each address becomes a replica at ENGINE__PORT, re-resolved every "
        "INTERVAL_S. Replaces ENGINE__HOST, POOL__REPLICAS and the pool file's list.",
    )
    interval_s: float = Field(default=5.0, gt=0, description="How often DNS_NAME is resolved.")


class CoreSettings(ServerSettings):
    """Loaded once from ``EDGECORE_CORE_*`` variables; a section's field by its nested name
    (``EDGECORE_CORE_ENGINE__PORT``, ``EDGECORE_CORE_ADMISSION__QUEUE_BATCH``)."""

    model_config = SettingsConfigDict(
        env_prefix="EDGECORE_CORE_", env_nested_delimiter="__", extra="ignore"
    )

    port: int = Field(default=8090, ge=1, le=65535, description="Listen port.")
    profile: Literal["dev", "prod"] = Field(
        default="dev", description="prod refuses to start without AUTH_TOKEN and ADMIN_KEY."
    )
    retry_after_s: int = Field(
        default=2, ge=1, description="Retry-After on the core's 429s (its queues are full)."
    )
    manage_engine: bool = Field(
        default=True, description="Start and supervise the engine; false: use one already running."
    )
    request_timeout_s: float = Field(
        default=600.0, gt=0, description="An engine request's overall deadline."
    )
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024, description="Request body limit.")
    sse_keepalive_s: float = Field(
        default=10.0, gt=0, description="Comment lines on a stream that waits (long first token)."
    )
    tls_client_ca: Path | None = Field(
        default=None,
        description="mTLS: CA that signs the edges' client certificates; with TLS on, callers "
        "without a certificate from it are refused in the handshake.",
    )
    engine_api_key: SecretStr | None = Field(
        default=None,
        description="Bearer key the engines require (vLLM's --api-key / VLLM_API_KEY); sent "
        "on every engine request.",
    )
    auth_token: SecretStr | None = Field(
        default=None, description="Bearer token every edge must send (/v1/*)."
    )
    admin_key: SecretStr | None = Field(
        default=None, description="Bearer key for /admin/*; unset: no admin API (404)."
    )

    engine: EngineConfig = Field(default_factory=EngineConfig)
    pool: PoolSettings = Field(default_factory=PoolSettings)
    admission: AdmissionSettings = Field(default_factory=AdmissionSettings)
    health: HealthSettings = Field(default_factory=HealthSettings)
    discovery: DiscoverySettings = Field(default_factory=DiscoverySettings)

    legacy: ClassVar[dict[str, Legacy]] = {
        "pool": Legacy(prefix="", renamed={"file": "pool_file", "profile": "pool_profile"}),
        "admission": Legacy(prefix=""),
        "health": Legacy(prefix="engine_", renamed={"interval_s": "engine_health_interval_s",
                                                    "timeout_s": "engine_health_timeout_s"}),
        "discovery": Legacy(prefix="", renamed={"dns_name": "engine_discovery",
                                                "interval_s": "discovery_interval_s"}),
    }  # fmt: skip
