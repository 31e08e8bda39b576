"""The core's Prometheus metrics: requests, disconnects, and the pool (replicas, queues).

The pool's tallies since start (admitted, rejected, affinity, evictions, restarts) only grow:
they are counters (``NAME_total``), copied from the pool at scrape time like the gauges.
Time to first token at the core is taken at the engine's first body bytes (vLLM sends its
first event once prefill is done), not at its response headers, and only for streams.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from core.admission import PRIORITIES
from core.pool import Pool
from shared.prom import Declare, ScrapedCounter

_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

STATES = ("ready", "wedged", "starting", "restarting", "down", "draining", "drained", "stopped")


@dataclass
class CoreMetrics:
    registry: CollectorRegistry
    requests: Counter
    in_flight: Gauge
    disconnects: Counter
    ttft: Histogram
    duration: Histogram
    engine_ready: Gauge
    replica_state: Gauge
    replica_in_flight: Gauge
    replica_engine_requests: Gauge
    replica_kv_usage: Gauge
    replica_restarts: ScrapedCounter
    replica_wedges: ScrapedCounter
    replica_silent: Gauge
    queue_depth: Gauge
    queue_limit: Gauge
    admitted: ScrapedCounter
    rejected: ScrapedCounter
    affinity: ScrapedCounter
    evicted: ScrapedCounter

    @classmethod
    def create(cls) -> CoreMetrics:
        d = Declare()
        return cls(
            registry=d.registry,
            requests=d.counter("edgecore_core_requests",
                "Chat requests by HTTP version of the caller and response status.",
                "http_version", "status"),
            in_flight=d.gauge("edgecore_core_in_flight", "Requests in flight."),
            disconnects=d.counter("edgecore_core_client_disconnects",
                "Requests whose caller left before the end; engine work was aborted."),
            ttft=d.histogram("gen_ai_server_time_to_first_token_seconds",
                "Time from request arrival to the engine's first body bytes, for streams.",
                buckets=_LATENCY),
            duration=d.histogram("gen_ai_server_request_duration_seconds",
                "Time from request arrival to the end of the answer.", buckets=_LATENCY),
            engine_ready=d.gauge("edgecore_core_engine_ready",
                "1 when some replica's engine is healthy."),
            replica_state=d.gauge("edgecore_core_replica_state",
                "1 for the replica's current state.", "replica", "state"),
            replica_in_flight=d.gauge("edgecore_core_replica_in_flight",
                "Requests this core has on the replica.", "replica"),
            replica_engine_requests=d.gauge("edgecore_core_replica_engine_requests",
                "The engine's own running / waiting counts, as last polled.", "replica", "kind"),
            replica_kv_usage=d.gauge("edgecore_core_replica_kv_cache_usage",
                "The engine's KV cache usage (0-1).", "replica"),
            replica_restarts=d.scraped("edgecore_core_replica_restarts",
                "Engine restarts after a crash.", "replica"),
            replica_wedges=d.scraped("edgecore_core_replica_wedges",
                "Times the replica's engine was found making no progress with work in "
                "flight (or its canary got no answer): taken out of rotation.", "replica"),
            replica_silent=d.gauge("edgecore_core_replica_silent_seconds",
                "Seconds since the engine last showed progress while this core had "
                "requests on it (0 when idle).", "replica"),
            queue_depth=d.gauge("edgecore_core_queue_depth",
                "Requests waiting for a replica.", "priority"),
            queue_limit=d.gauge("edgecore_core_queue_limit",
                "Queue bound per priority class.", "priority"),
            admitted=d.scraped("edgecore_core_admitted", "Requests given a replica.", "priority"),
            rejected=d.scraped("edgecore_core_rejected",
                "Requests refused (queue_full, queue_timeout: 429; no_replica: 503).",
                "priority", "reason"),
            affinity=d.scraped("edgecore_core_affinity",
                "Replica choices: hit (the conversation's replica), fallback "
                "(it was too busy), none (no shared prefix).", "outcome"),
            evicted=d.scraped("edgecore_core_drain_evicted",
                "Requests ended because a drain deadline passed."),
        )  # fmt: skip

    def observe(self, pool: Pool) -> None:
        """Copy the pool's state into the gauges (at scrape time: no bookkeeping per request)."""
        self.engine_ready.set(1 if pool.available() else 0)
        for rep in pool.replicas:
            state = rep.state
            for s in STATES:
                self.replica_state.labels(rep.name, s).set(1 if s == state else 0)
            self.replica_in_flight.labels(rep.name).set(rep.in_flight)
            self.replica_engine_requests.labels(rep.name, "running").set(rep.load.running)
            self.replica_engine_requests.labels(rep.name, "waiting").set(rep.load.waiting)
            self.replica_kv_usage.labels(rep.name).set(rep.load.kv_usage)
            self.replica_restarts.set(rep.engine.restarts if rep.engine else 0, rep.name)
            self.replica_wedges.set(rep.progress.wedges, rep.name)
            self.replica_silent.labels(rep.name).set(rep.silent_s())
        adm = pool.admission
        for p in PRIORITIES:
            self.queue_depth.labels(p).set(adm.depth(p))
            self.queue_limit.labels(p).set(adm.limits[p])
            self.admitted.set(adm.admitted[p], p)
            for reason in ("queue_full", "queue_timeout", "no_replica"):
                self.rejected.set(adm.rejected[(p, reason)], p, reason)
        for outcome in ("hit", "fallback", "none"):
            self.affinity.set(pool.affinity[outcome], outcome)
        self.evicted.set(pool.evicted)
