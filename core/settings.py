"""The core's typed settings: where it listens and which vLLM engine it supervises.

A GPU profile (70B, tensor parallel 4, EAGLE-3 speculation) is a change of these values,
not of code: ``EngineConfig.command()`` turns them into vLLM's command line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.paths import default_home, default_models_dir


class SpeculativeConfig(BaseModel):
    """vLLM's ``--speculative-config``; only set fields are passed on."""

    method: Literal["eagle3", "eagle", "draft_model", "ngram", "mtp"]
    model: str | None = None
    num_speculative_tokens: int = Field(default=3, ge=1, le=16)
    prompt_lookup_max: int | None = None
    prompt_lookup_min: int | None = None
    disable_by_batch_size: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _needs_model(self) -> SpeculativeConfig:
        if self.method in ("eagle3", "eagle", "draft_model") and not self.model:
            raise ValueError(f"speculative method {self.method!r} needs a draft model path")
        return self


class EngineConfig(BaseModel):
    model: str = Field(
        default_factory=lambda: str(default_models_dir() / "smollm2-135m-instruct-hf"),
        description="Model path (prepared HF folder) or name.",
    )
    served_model_name: str = "smollm2-135m-instruct"
    host: str = "127.0.0.1"
    port: int = Field(default=8091, ge=1, le=65535)
    tensor_parallel_size: int = Field(default=1, ge=1)
    pipeline_parallel_size: int = Field(default=1, ge=1)
    distributed_executor_backend: Literal["mp", "ray", "uni"] | None = None
    dtype: str = "auto"
    quantization: str | None = None
    max_model_len: int | None = Field(default=4096, ge=128)
    max_num_seqs: int | None = Field(default=None, ge=1)
    gpu_memory_utilization: float | None = Field(default=None, gt=0.0, le=1.0)
    enable_prefix_caching: bool | None = None
    enforce_eager: bool = Field(
        default=True, description="Skip graph capture: CPU dev starts in ~25 s instead of ~90 s."
    )
    speculative: SpeculativeConfig | None = None
    cpu_kv_cache_gib: int | None = Field(
        default=1, ge=1, description="VLLM_CPU_KVCACHE_SPACE on CPU builds; ignored on GPUs."
    )
    extra_args: list[str] = Field(default_factory=list)
    startup_timeout_s: float = Field(default=600.0, gt=0)

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
            spec: dict[str, Any] = self.speculative.model_dump(exclude_none=True)
            argv += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
        return argv + list(self.extra_args)


class CoreSettings(BaseSettings):
    """Loaded once from ``EDGECORE_CORE_*`` variables (nested: ``EDGECORE_CORE_ENGINE__PORT``)."""

    model_config = SettingsConfigDict(
        env_prefix="EDGECORE_CORE_", env_nested_delimiter="__", extra="ignore"
    )

    host: str = "127.0.0.1"
    port: int = Field(default=8090, ge=1, le=65535)
    home: Path = Field(default_factory=default_home)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    manage_engine: bool = Field(
        default=True, description="Start and supervise the engine; false: use one already running."
    )
    request_timeout_s: float = Field(default=600.0, gt=0)
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    sse_keepalive_s: float = Field(default=10.0, gt=0)
    tls_certfile: Path | None = Field(default=None, description="Serve HTTPS (h2 via ALPN).")
    tls_keyfile: Path | None = None
    log_dir: Path | None = None
