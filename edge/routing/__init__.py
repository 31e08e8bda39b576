"""Which tier answers a cache miss: rules first, then the learned score and the load."""

from edge.routing.model import RouterModel
from edge.routing.router import Decision, Router, RouteRules, rule

__all__ = ["Decision", "RouteRules", "Router", "RouterModel", "rule"]
