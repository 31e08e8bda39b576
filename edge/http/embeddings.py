"""``POST /v1/embeddings``: the edge's own embedder (the cache's MiniLM), or the core's.

The edge model answers under ``settings.embed.model``: the same ONNX session the cache
uses, off the event loop and batched with the cache's own lookups. Names listed in
``core_embed_models`` are forwarded to the core as they are. Anything else is a 404.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.responses import Response

from edge.http.intake import admit, failed, new_context
from edge.replies import json_answer
from edge.services import EdgeServices
from edge.upstream.pool import CoreUnavailable
from shared.errors import ApiError
from shared.schemas import EmbeddingRequest

# Fields the edge embedder takes; another field set to something is refused, not dropped.
_TAKEN = frozenset({"model", "input", "encoding_format", "dimensions", "user"})


def _tokens(req: EmbeddingRequest) -> int:
    return sum(len(x) // 4 + 1 if isinstance(x, str) else len(x) for x in req.inputs())


async def embeddings(request: Request) -> Response:
    svc: EdgeServices = request.app.state.edge
    ctx = new_context(request, svc, "embed", "embeddings")
    admitted = await admit(request, svc, ctx, EmbeddingRequest, tokens=_tokens)
    try:
        req = admitted.req
        if req.model in svc.settings.core.embed_models:
            ctx.tier = "core"
            body = await _from_core(svc, admitted.data, ctx.request_id)
        else:
            body = await _from_edge(svc, req, admitted.data)
    except ApiError as exc:
        failed(ctx, exc)
        raise
    finally:
        admitted.release()
    return json_answer(body, ctx)


async def _from_edge(svc: EdgeServices, req: EmbeddingRequest, data: dict[str, Any]) -> Any:
    s = svc.settings
    if req.model != s.embed.model:
        known = ", ".join([s.embed.model, *s.core.embed_models])
        raise ApiError(
            404,
            f"The embedding model '{req.model}' does not exist. Available: {known}.",
            code="model_not_found",
            param="model",
        )
    if svc.embedder is None:
        raise ApiError(
            503,
            "the edge's embedding model is not loaded",
            code="embedder_unavailable",
            headers={"retry-after": str(s.retry_after_s)},
        )
    for name, value in data.items():
        if name not in _TAKEN and value is not None:
            raise ApiError(
                400, f"{name} is not a parameter the edge embedder takes", param=name,
                code="unsupported_parameter",
            )  # fmt: skip
    if req.dimensions is not None and req.dimensions != svc.embedder.dim:
        raise ApiError(
            400,
            f"dimensions must be {svc.embedder.dim} for {req.model}: it cannot shorten vectors",
            param="dimensions",
            code="unsupported_parameter",
        )
    inputs = _checked(req.inputs(), svc)
    # Queued together, so they share the embedding thread's next batches.
    results = await asyncio.gather(*(svc.embedder.embed_counted(x) for x in inputs))
    used = sum(n for _, n in results)
    return {
        "object": "list",
        "model": req.model,
        "data": [
            {"object": "embedding", "index": i, "embedding": encode(v, req.encoding_format)}
            for i, (v, _) in enumerate(results)
        ],
        "usage": {"prompt_tokens": used, "total_tokens": used},
    }


def _checked(inputs: list[str | list[int]], svc: EdgeServices) -> list[str | list[int]]:
    s = svc.settings
    vocab = svc.embedder.vocab_size if svc.embedder else 0
    if not inputs:
        raise ApiError(400, "input must not be empty", param="input", code="invalid_value")
    if len(inputs) > s.limits.embed_max_inputs:
        raise ApiError(
            400, f"at most {s.limits.embed_max_inputs} inputs per request", param="input",
            code="too_many_inputs",
        )  # fmt: skip
    for i, x in enumerate(inputs):
        if not x:
            raise ApiError(400, f"input[{i}] is empty", param="input", code="invalid_value")
        if isinstance(x, str) and len(x) > s.limits.embed_max_input_chars:
            raise ApiError(
                400, f"input[{i}] is longer than {s.limits.embed_max_input_chars} characters",
                param="input", code="context_length_exceeded",
            )  # fmt: skip
        if isinstance(x, list) and any(t < 0 or t >= vocab for t in x):
            raise ApiError(
                400, f"input[{i}] has a token id outside the model's vocabulary (0-{vocab - 1})",
                param="input", code="invalid_value",
            )  # fmt: skip
    return inputs


def encode(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    """OpenAI's wire forms: a list of floats, or base64 of little-endian float32."""
    if encoding_format == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode()
    return [float(x) for x in vector]


async def _from_core(svc: EdgeServices, data: dict[str, Any], rid: str) -> Any:
    try:
        upstream = await svc.core.send(data, request_id=rid, stream=True, path="/v1/embeddings")
    except CoreUnavailable as exc:
        raise exc.error(svc.settings.retry_after_s) from None
    try:
        await upstream.response.aread()
    finally:
        await upstream.close()
    upstream.succeeded()
    return upstream.response.json()
