"""The core: a Starlette gateway that supervises a vLLM engine and relays OpenAI requests."""

from core.app import create_app
from core.settings import CoreSettings, EngineConfig, SpeculativeConfig

__all__ = ["CoreSettings", "EngineConfig", "SpeculativeConfig", "create_app"]
