"""Pick the tier for a cache miss: the edge's small model or the core.

Rules, first match wins: an explicit model name; features the edge model lacks (tools,
JSON mode); a long prompt; a large ``max_tokens``. Everything else stays at the edge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from shared.errors import ApiError
from shared.schemas import ChatCompletionRequest

Tier = Literal["edge", "core"]


@dataclass(frozen=True)
class RouteRules:
    auto_model: str
    edge_model: str
    core_model: str
    max_prompt_chars: int
    max_tokens: int


@dataclass(frozen=True)
class Decision:
    tier: Tier
    reason: str


def decide(req: ChatCompletionRequest, rules: RouteRules) -> Decision:
    if req.model == rules.edge_model:
        return Decision("edge", "model")
    if req.model == rules.core_model:
        return Decision("core", "model")
    if req.model != rules.auto_model:
        raise ApiError(
            404,
            f"The model '{req.model}' does not exist. Available: "
            f"{rules.auto_model}, {rules.edge_model}, {rules.core_model}.",
            code="model_not_found",
            param="model",
        )
    if req.tools or req.response_format:
        return Decision("core", "features")
    if len(req.prompt_text()) > rules.max_prompt_chars:
        return Decision("core", "prompt_length")
    limit = req.output_limit
    if limit is not None and limit > rules.max_tokens:
        return Decision("core", "max_tokens")
    return Decision("edge", "simple")
