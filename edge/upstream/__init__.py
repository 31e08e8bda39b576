"""The edge's connections to its cores: HTTP/2 pools, health probes, breakers, failover."""

from edge.upstream.breaker import CircuitBreaker, State
from edge.upstream.cores import Timeouts
from edge.upstream.errors import CoreStalled, CoreUnavailable
from edge.upstream.pool import CorePool
from edge.upstream.stream import Upstream

__all__ = [
    "CircuitBreaker",
    "CorePool",
    "CoreStalled",
    "CoreUnavailable",
    "State",
    "Timeouts",
    "Upstream",
]
