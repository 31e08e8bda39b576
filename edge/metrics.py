"""The edge's Prometheus metrics, on a registry owned by the app (no process globals).

Names follow the OpenTelemetry GenAI conventions where one exists
(``gen_ai_server_time_to_first_token_seconds``, ``..._time_per_output_token_seconds``,
``gen_ai_server_request_duration_seconds``, ``gen_ai_client_token_usage``);
the rest are edgecore's own.

Timing, honestly: time to first token is taken when the first *content* token of a stream
is ready (for the core, the first SSE event with content, not the response headers, which
come before the engine has prefilled), and only for streams; time per output token is the
time after that token divided by the tokens after it. A JSON answer has no first token of
its own: it is measured by the request duration only.

OTel attributes become label names with dots replaced by underscores (Prometheus label
names cannot hold dots): ``gen_ai.operation.name`` -> ``gen_ai_operation_name``,
``gen_ai.token.type`` -> ``gen_ai_token_type`` (``input`` / ``output``),
``gen_ai.request.model`` -> ``gen_ai_request_model``, ``gen_ai.response.model`` ->
``gen_ai_response_model``. ``tier`` (cache, edge, core) is edgecore's own.

Counts that only grow are counters, also those kept elsewhere (``ScrapedCounter``).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from edge.upstream.pool import CorePool
from shared.prom import Declare, ScrapedCounter

# Per-token gaps: OTel's suggested buckets for gen_ai.server.time_per_output_token.
_TOKEN = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
# Tokens per request: OTel's suggested buckets for gen_ai.client.token.usage.
_TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)
_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


@dataclass
class EdgeMetrics:
    registry: CollectorRegistry
    requests: Counter
    in_flight: Gauge
    ttft: Histogram
    tpot: Histogram
    duration: Histogram
    overhead: Histogram
    tokens: Histogram
    cache: Counter
    cache_similarity: Histogram
    cache_candidate_similarity: Histogram
    cache_verifier_score: Histogram
    cache_lookup_seconds: Histogram
    cache_match: Counter
    cache_feedback: Counter
    cache_semantic_enabled: Gauge
    embed_seconds: Histogram
    route: Counter
    route_score: Histogram
    route_seconds: Histogram
    router_apgr: Gauge
    router_pgr: Gauge
    embed_failures: Counter
    degraded: Counter
    core_requests: Counter
    disconnects: Counter
    edge_model_running: Gauge
    edge_model_waiting: Gauge
    edge_model_cancelled: ScrapedCounter
    edge_model_restarts: ScrapedCounter
    core_up: Gauge
    core_breaker: Gauge
    core_streams: Gauge
    core_rtt: Gauge
    core_failovers: ScrapedCounter

    @classmethod
    def create(cls) -> EdgeMetrics:
        d = Declare()
        return cls(
            registry=d.registry,
            requests=d.counter("edgecore_edge_requests", "Chat requests by tier and status.",
                "tier", "status"),
            in_flight=d.gauge("edgecore_edge_in_flight", "Chat requests in flight."),
            ttft=d.histogram("gen_ai_server_time_to_first_token_seconds",
                "Time from request arrival to the first content token, for streamed answers.",
                "tier", buckets=_LATENCY),
            tpot=d.histogram("gen_ai_server_time_per_output_token_seconds",
                "Time per output token after the first, for streamed answers.",
                "tier", buckets=_TOKEN),
            duration=d.histogram("gen_ai_server_request_duration_seconds",
                "Time from request arrival to the last answer byte.", "tier", buckets=_LATENCY),
            overhead=d.histogram("edgecore_edge_overhead_seconds",
                "Time the edge added before the first byte (tier wait excluded).",
                "tier", buckets=_LATENCY),
            tokens=d.histogram("gen_ai_client_token_usage",
                "Tokens per answered request, by tier, operation, token type (input/output), "
                "requested and responding model.",
                "tier", "gen_ai_operation_name", "gen_ai_token_type", "gen_ai_request_model",
                "gen_ai_response_model", buckets=_TOKENS),
            cache=d.counter("edgecore_cache_lookups",
                "Cache outcomes: hit, miss, bypass (not cacheable/opt-out), error.", "outcome"),
            cache_similarity=d.histogram("edgecore_cache_hit_similarity",
                "Cosine similarity of served cache hits.",
                buckets=(0.9, 0.92, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99, 0.995, 1.0)),
            cache_candidate_similarity=d.histogram("edgecore_cache_candidate_similarity",
                "Cosine similarity of the nearest entry in the partition, per lookup.",
                buckets=(0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.99, 1.0)),
            cache_verifier_score=d.histogram("edgecore_cache_verifier_score",
                "Verifier P(same question) of the best candidate, by match decision.",
                "decision",
                buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 1.0)),
            cache_lookup_seconds=d.histogram("edgecore_cache_lookup_seconds",
                "Cache lookup: Redis KNN, candidate fetch and verification.", buckets=_LATENCY),
            cache_match=d.counter("edgecore_cache_match_decisions",
                "Match decisions: exact, reworded, verified, respelled, in_context, cosine "
                "(served); rejected, contrast, below_floor, explore, exact_only, none (not "
                "served).",
                "reason"),
            cache_semantic_enabled=d.gauge("edgecore_cache_semantic_enabled",
                "1: the cache serves verified near-repeats; 0: word-for-word repeats only "
                "(no verifier was prepared, or the cache is off)."),
            cache_feedback=d.counter("edgecore_cache_feedback",
                "Unserved candidates checked against the fresh answer (agreed: a hit was right).",
                "agreed"),
            embed_seconds=d.histogram("edgecore_embed_seconds",
                "Embedding latency per request (queue included).", buckets=_LATENCY),
            route=d.counter("edgecore_route_decisions", "Routing decisions by tier and reason.",
                "tier", "reason"),
            route_score=d.histogram("edgecore_router_score",
                "Router score (expected quality gain of the core's model) of scored prompts.",
                buckets=(-0.2, -0.1, -0.05, 0, 0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.3)),
            route_seconds=d.histogram("edgecore_router_decision_seconds",
                "Routing decision time (embedding excluded).",
                buckets=(1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2)),
            router_apgr=d.gauge("edgecore_router_heldout_apgr",
                "The router's average performance gap recovered on its held-out prompts, for "
                "the pair it was trained on (small: the edge's model, large: the core's).",
                "small", "large"),
            router_pgr=d.gauge("edgecore_router_heldout_pgr",
                "The router's performance gap recovered on its held-out prompts when this "
                "share of them goes to the core.", "small", "large", "core_share"),
            embed_failures=d.counter("edgecore_embed_failures",
                "Embeddings that failed or timed out."),
            degraded=d.counter("edgecore_degraded",
                "Requests answered in a degraded mode, by reason.", "reason"),
            core_requests=d.counter("edgecore_core_forwards",
                "Requests forwarded to the core, by HTTP version.", "http_version"),
            disconnects=d.counter("edgecore_edge_client_disconnects",
                "Requests whose client left early; upstream work was cancelled.", "tier"),
            edge_model_running=d.gauge("edgecore_edge_model_running",
                "Edge-model generations running now."),
            edge_model_waiting=d.gauge("edgecore_edge_model_waiting",
                "Requests waiting for an edge-model slot."),
            edge_model_cancelled=d.scraped("edgecore_edge_model_cancelled",
                "Edge-model generations stopped early because the client left."),
            edge_model_restarts=d.scraped("edgecore_edge_model_restarts",
                "Edge-model processes started again after one died."),
            core_up=d.gauge("edgecore_core_up", "1 when the core's last probe passed.", "core"),
            core_breaker=d.gauge("edgecore_core_breaker_state",
                "Circuit breaker: 0 closed, 1 half-open, 2 open.", "core"),
            core_streams=d.gauge("edgecore_core_streams", "HTTP/2 streams open to the core.",
                "core"),
            core_rtt=d.gauge("edgecore_core_rtt_seconds", "Probe round trip to the core (EWMA).",
                "core"),
            core_failovers=d.scraped("edgecore_core_failovers",
                "Requests that moved to another core before their first byte."),
        )  # fmt: skip

    def observe_router(self, meta: dict[str, object]) -> None:
        """The trained router's held-out quality (router.json), set once at start."""
        small, large = str(meta.get("small", "")), str(meta.get("large", ""))
        if isinstance(apgr := meta.get("heldout_apgr"), int | float):
            self.router_apgr.labels(small, large).set(apgr)
        pgr_at = meta.get("heldout_pgr_at")
        for share, pgr in pgr_at.items() if isinstance(pgr_at, dict) else ():
            self.router_pgr.labels(small, large, str(share)).set(float(pgr))

    def observe_cores(self, pool: CorePool) -> None:
        for core in pool.cores:
            self.core_up.labels(core.url).set(1 if core.healthy else 0)
            self.core_breaker.labels(core.url).set(int(core.breaker.state))
            self.core_streams.labels(core.url).set(core.streams)
            self.core_rtt.labels(core.url).set(core.rtt_s or 0.0)
        self.core_failovers.set(pool.failovers)
