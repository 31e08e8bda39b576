"""The edge's connections to its cores: HTTP/2 pools, health probes, breakers, failover."""

from edge.upstream.breaker import CircuitBreaker, State
from edge.upstream.pool import CorePool, CoreStalled, CoreUnavailable, Timeouts, Upstream

__all__ = [
    "CircuitBreaker",
    "CorePool",
    "CoreStalled",
    "CoreUnavailable",
    "State",
    "Timeouts",
    "Upstream",
]
