"""One request's context: what the headers, metrics and access log say about it.

Built when a request arrives, filled in as the pipeline decides (tier, cache outcome,
degradation), and observed exactly twice: when the answer starts (``opened``: status,
overhead) and when it ends (``closed``: duration, tokens, time per output token). The reply
builders in ``edge.replies`` call both, so no stage records metrics of its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from edge.metrics import EdgeMetrics
from shared import accesslog


@dataclass
class Answer:
    """A complete answer a tier produced: what the pipeline hands the cache to remember."""

    content: str
    finish_reason: str | None
    usage: dict[str, Any] | None
    model: str


@dataclass
class RequestContext:
    request_id: str
    started: float  # perf_counter at arrival
    metrics: EdgeMetrics
    operation: str = "chat"  # gen_ai.operation.name: chat, text_completion, embeddings
    tier: str = "edge"
    cache: str = "off"
    degraded: str | None = None
    tier_wait_s: float = 0.0  # time spent waiting on the tier before its first byte
    first_token_s: float | None = None  # seconds from arrival to a stream's first content token
    tenant: str | None = None
    request_model: str = ""
    response_model: str = ""
    extra_headers: dict[str, str] = field(default_factory=dict)
    answer: Answer | None = None  # a complete answer, as the tier reported it (answered())
    _opened: bool = False
    _closed: bool = False

    def __post_init__(self) -> None:
        # The access log line (shared/accesslog.py) reads this request's facts at its end.
        record = accesslog.current()
        if record is not None:
            record.source = self

    def overhead_ms(self) -> float:
        return max(0.0, (time.perf_counter() - self.started - self.tier_wait_s) * 1000.0)

    def headers(self) -> dict[str, str]:
        h = {
            "x-request-id": self.request_id,
            "x-edgecore-tier": self.tier,
            "x-edgecore-cache": self.cache,
            "x-edgecore-overhead-ms": f"{self.overhead_ms():.2f}",
        }
        if self.degraded:
            h["x-edgecore-degraded"] = self.degraded
        h.update(self.extra_headers)
        return h

    def answered(self, answer: Answer) -> None:
        """The tier's answer is complete (the pipeline's remember stage may store it)."""
        self.answer = answer

    def degrade(self, reason: str) -> None:
        self.degraded = reason
        self.metrics.degraded.labels(reason).inc()

    def failed(self, status: int) -> None:
        """The request ended in an error response (counted once, by status)."""
        self.metrics.requests.labels(self.tier, str(status)).inc()

    def first_token(self) -> None:
        """A stream's first content token is ready to send: time to first token, once.

        Only streams have one (a JSON answer is measured by its duration); for the core it
        is the first event with content, not the response headers, which come before
        prefill."""
        if self.first_token_s is None:
            self.first_token_s = time.perf_counter() - self.started
            self.metrics.ttft.labels(self.tier).observe(self.first_token_s)

    def opened(self) -> None:
        """The answer's first byte is ready: status 200 and the edge's overhead, once."""
        if self._opened:
            return
        self._opened = True
        self.metrics.overhead.labels(self.tier).observe(self.overhead_ms() / 1000.0)
        self.metrics.requests.labels(self.tier, "200").inc()

    def closed(self, usage: dict[str, Any] | None) -> None:
        """The answer is complete: duration, token usage and time per output token, once."""
        self.opened()
        if self._closed:
            return
        self._closed = True
        m = self.metrics
        elapsed = time.perf_counter() - self.started
        m.duration.labels(self.tier).observe(elapsed)
        if usage:
            request_model = self.request_model or "unknown"
            response_model = self.response_model or request_model
            for kind, key in (("input", "prompt_tokens"), ("output", "completion_tokens")):
                m.tokens.labels(self.tier, self.operation, kind, request_model,
                                response_model).observe(usage.get(key) or 0)  # fmt: skip
        # Time per output token only where tokens arrived over time (a stream): the tokens
        # after the first share the time after it, as OTel's gen_ai.server.time_per_output_token.
        output = (usage or {}).get("completion_tokens") or 0
        if self.first_token_s is not None and output > 1:
            m.tpot.labels(self.tier).observe((elapsed - self.first_token_s) / (output - 1))
