"""Who is asking and how much they may ask: API keys, tenants, rate and concurrency limits."""

from edge.tenancy.keys import KeyStore, Tenant, add_key, hash_key, new_key
from edge.tenancy.limits import Limiter

__all__ = ["KeyStore", "Limiter", "Tenant", "add_key", "hash_key", "new_key"]
