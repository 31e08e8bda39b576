"""Which tier answers a cache miss: rules first, then the learned score and the load."""

from edge.routing.model import RouterModel
from edge.routing.router import Decision, Load, Router, RouteRules, Saturation, rule

__all__ = ["Decision", "Load", "RouteRules", "Router", "RouterModel", "Saturation", "rule"]
