"""Pick the tier for a cache miss: the edge's small model or the core.

1. Rules override everything: an explicit model name; a parameter the edge model cannot
   honour (tools, JSON mode, logprobs, ...: shared.parameters); a context or
   ``max_tokens`` beyond the edge model's limits; a policy that pins a tier.
2. Otherwise the learned score (``edge.router_model``) is compared with a threshold that
   is either fixed or kept at a quantile of recent scores, so that a target share of
   traffic goes to the core (RouteRLM-style calibration).
3. Load, given as a ``Load`` snapshot taken per request: a saturated core sends
   *borderline* core prompts to the edge (and the answer says
   ``x-edgecore-degraded: core-saturated``); a long edge queue sends borderline edge
   prompts to the core.
4. A conversation keeps its tier unless its score moves decisively past the threshold.

Without a trained model, a prompt-length rule stands in for the score.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from edge.routing.model import RouterModel
from edge.settings import RouteSettings
from shared.errors import ApiError
from shared.parameters import Refusal, refusals
from shared.schemas import ChatCompletionRequest

Tier = Literal["edge", "core"]


@dataclass(frozen=True)
class RouteRules:
    auto_model: str
    edge_model: str
    core_model: str
    max_prompt_chars: int  # the length rule used when no trained model is loaded
    max_tokens: int  # above this many output tokens, the core answers
    edge_context_tokens: int = 2048
    policy: Literal["auto", "edge", "core"] = "auto"


@dataclass(frozen=True)
class Decision:
    tier: Tier
    reason: str
    score: float | None = None
    degraded: str | None = None


@dataclass(frozen=True)
class Load:
    """What the router weighs besides the prompt, as one snapshot per request."""

    core_saturated: bool = False  # the core said 429/503 lately, or no core takes traffic
    edge_queue_high: bool = False  # the edge model's queue is at ROUTE edge_queue_high


def edge_refusal_of(req: ChatCompletionRequest) -> Refusal | None:
    """The first parameter of ``req`` the edge model cannot honour (shared.parameters)."""
    return refusals(req.model_dump(exclude_none=True)).get("edge")


def rule(
    req: ChatCompletionRequest,
    rules: RouteRules,
    policy: str = "auto",
    edge_refusal: Refusal | None = None,
) -> Decision | None:
    """The decision rules impose, or None when the score should decide. 404 for unknown models.

    ``policy`` is the tenant's (auto/edge/core); the edge-wide one applies when it is auto.
    ``edge_refusal``: a parameter the edge model cannot honour (``edge_refusal_of``). "auto"
    then goes to the core; a request pinned to the edge gets a 400 that names it.
    """
    if req.model == rules.edge_model:
        _refuse_on_edge(edge_refusal, rules)
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
    pinned = policy if policy in ("edge", "core") else rules.policy
    if pinned == "edge":
        _refuse_on_edge(edge_refusal, rules)
        return Decision("edge", "policy")
    if pinned == "core":
        return Decision("core", "policy")
    if edge_refusal is not None:
        return Decision("core", "features")
    limit = req.output_limit
    if limit is not None and limit > rules.max_tokens:
        return Decision("core", "max_tokens")
    # ~4 characters per token: a cheap, conservative estimate of the prompt's length.
    if len(req.prompt_text()) / 4 + (limit or 0) > rules.edge_context_tokens:
        return Decision("core", "context")
    return None


def _refuse_on_edge(refusal: Refusal | None, rules: RouteRules) -> None:
    if refusal is not None:
        raise ApiError(
            400,
            refusal.message(rules.core_model),
            code="unsupported_parameter",
            param=refusal.param,
        )


def decide(req: ChatCompletionRequest, rules: RouteRules) -> Decision:
    """Rules only (no trained model): long prompts go to the core."""
    return rule(req, rules, "auto", edge_refusal_of(req)) or (
        Decision("core", "prompt_length")
        if len(req.prompt_text()) > rules.max_prompt_chars
        else Decision("edge", "simple")
    )


def conversation_key(req: ChatCompletionRequest) -> str:
    """Stable across turns: the system prompt and the first user message."""
    first = next((m.text() for m in req.messages if m.role == "user"), "")
    system = "".join(m.text() for m in req.messages if m.role in ("system", "developer"))
    return hashlib.sha256(f"{system}\x00{first}".encode()).hexdigest()[:24]


class Router:
    def __init__(
        self,
        rules: RouteRules,
        model: RouterModel | None,
        calibration: RouteSettings,
        *,
        max_conversations: int = 100_000,
    ) -> None:
        self.rules = rules
        self.model = model
        self.cal = calibration
        self._scores: deque[float] = deque(maxlen=calibration.window)
        self._threshold = self._initial_threshold()
        self._since_update = 0
        self._conversations: OrderedDict[str, Tier] = OrderedDict()
        self._max_conversations = max_conversations

    @property
    def needs_embedding(self) -> bool:
        return self.model is not None

    def _initial_threshold(self) -> float:
        if self.model is None:
            return 0.0
        if self.cal.mode == "fixed":
            return self._score_for_probability(self.cal.threshold)
        return self.model.threshold_for_share(self.cal.core_share)

    def _score_for_probability(self, p: float) -> float:
        assert self.model is not None
        a, b = self.model.platt
        p = min(max(p, 1e-6), 1 - 1e-6)
        return float((np.log(p / (1 - p)) - b) / a)

    @property
    def threshold(self) -> float:
        return self._threshold

    def observe(self, score: float) -> None:
        """Keep the threshold at the target quantile of recent scores (quantile mode)."""
        self._scores.append(score)
        if self.cal.mode != "quantile" or len(self._scores) < self.cal.min_samples:
            return
        self._since_update += 1
        if self._since_update >= 16:  # cheap enough each time, but no need
            self._since_update = 0
            q = 1.0 - self.cal.core_share
            self._threshold = float(np.quantile(np.fromiter(self._scores, float), q))

    def route(
        self,
        req: ChatCompletionRequest,
        vector: np.ndarray | None,
        load: Load = Load(),
        policy: str = "auto",
    ) -> Decision:
        """The rules, then the score: the whole decision for ``req``."""
        return rule(req, self.rules, policy, edge_refusal_of(req)) or self.score(req, vector, load)

    def score(self, req: ChatCompletionRequest, vector: np.ndarray | None, load: Load) -> Decision:
        """The tier for a request no rule decided (the pipeline runs the rules first, before
        any work): the learned score, the conversation's tier, and ``load``."""
        if self.model is None or vector is None:
            return decide(req, self.rules)
        text = req.prompt_text()
        score = self.model.score(vector, text)
        self.observe(score)
        margin = score - self._threshold
        tier: Tier = "core" if margin > 0 else "edge"
        reason = "score"
        key = conversation_key(req)
        previous = self._conversations.get(key) if len(req.messages) > 1 else None
        if previous is not None and previous != tier and abs(margin) < self.cal.sticky_margin:
            tier, reason = previous, "sticky"
        degraded = None
        if tier == "core" and margin < self.cal.band and load.core_saturated:
            tier, reason, degraded = "edge", "core_saturated", "core-saturated"
        elif tier == "edge" and margin > -self.cal.band and load.edge_queue_high:
            tier, reason = "core", "edge_busy"
        self._remember(key, tier)
        return Decision(tier, reason, score, degraded)

    def _remember(self, key: str, tier: Tier) -> None:
        self._conversations[key] = tier
        self._conversations.move_to_end(key)
        while len(self._conversations) > self._max_conversations:
            self._conversations.popitem(last=False)


class Saturation:
    """When the core last said it is full (429/503) or had no core to offer: for the next
    ``seconds`` the router's ``Load`` says saturated."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self.until = 0.0

    def mark(self) -> None:
        self.until = self.clock() + self.seconds

    @property
    def active(self) -> bool:
        return self.clock() < self.until
