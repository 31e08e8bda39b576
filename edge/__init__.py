"""The edge node: embed, semantic cache, route, small local model, forward to the core."""

from edge.app import create_app
from edge.settings import EdgeSettings

__all__ = ["EdgeSettings", "create_app"]
