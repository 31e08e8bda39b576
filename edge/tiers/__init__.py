"""The tiers that answer: the core (over HTTP/2) and the edge's own small model."""

from edge.tiers.core import CoreTier
from edge.tiers.local import LocalTier
from edge.tiers.local_model import EdgeBusy, LocalModel, PromptTooLong

__all__ = ["CoreTier", "EdgeBusy", "LocalModel", "LocalTier", "PromptTooLong"]
