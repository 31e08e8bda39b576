"""Per-tenant limits: requests and tokens per minute (shared through Redis), concurrency.

Requests and tokens per minute use one atomic Lua script on fixed one-minute windows, so
every edge replica on the same Redis enforces the same budget. Tokens are charged up front
from an estimate (prompt characters / 4 + the output limit).

If Redis is down, each edge falls back to counting locally (documented policy: the limit
then holds per replica, not globally) instead of failing open or crashing. Concurrency is
capped per replica.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from edge.tenancy.keys import Tenant
from shared.errors import ApiError

log = logging.getLogger("edgecore.edge.limits")

WINDOW_S = 60

# KEYS: request counter, token counter. ARGV: rpm, tpm, tokens, window seconds.
# A limit of 0 means "none". Returns {allowed, retry_after_seconds}.
_LUA = """
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local tokens, window = tonumber(ARGV[3]), tonumber(ARGV[4])
if rpm > 0 then
  local r = redis.call('INCR', KEYS[1])
  if r == 1 then redis.call('EXPIRE', KEYS[1], window) end
  if r > rpm then
    redis.call('DECR', KEYS[1])
    return {0, redis.call('TTL', KEYS[1])}
  end
end
if tpm > 0 then
  local t = redis.call('INCRBY', KEYS[2], tokens)
  if t == tokens then redis.call('EXPIRE', KEYS[2], window) end
  if t > tpm then
    redis.call('DECRBY', KEYS[2], tokens)
    if rpm > 0 then redis.call('DECR', KEYS[1]) end
    return {0, redis.call('TTL', KEYS[2])}
  end
end
return {1, 0}
"""


@dataclass
class _LocalWindow:
    start: float = 0.0
    requests: int = 0
    tokens: int = 0


@dataclass
class Limiter:
    redis: Redis | None
    prefix: str = "edgecore:rl"
    _local: dict[str, _LocalWindow] = field(default_factory=dict)
    _in_flight: dict[str, int] = field(default_factory=dict)
    fallbacks: int = 0
    _script: AsyncScript | None = None

    async def check_rate(self, tenant: Tenant, tokens: int) -> None:
        rpm, tpm = tenant.requests_per_minute or 0, tenant.tokens_per_minute or 0
        if not rpm and not tpm:
            return
        if tpm and tokens > tpm:
            raise ApiError(
                429,
                f"this request needs ~{tokens} tokens, more than the key's {tpm} per minute",
                code="tokens_per_minute_exceeded",
            )
        allowed, retry_after = await self._check(tenant.name, rpm, tpm, tokens)
        if not allowed:
            raise ApiError(
                429,
                "rate limit reached for this API key; retry later",
                code="rate_limit_exceeded",
                headers={"retry-after": str(max(1, retry_after))},
            )

    async def _check(self, name: str, rpm: int, tpm: int, tokens: int) -> tuple[bool, int]:
        window = int(time.time() // WINDOW_S)
        if self.redis is not None:
            keys = [f"{self.prefix}:{name}:{window}:r", f"{self.prefix}:{name}:{window}:t"]
            if self._script is None:
                # EVALSHA after the first call; redis-py reloads it after a Redis restart.
                self._script = self.redis.register_script(_LUA)
            try:
                result = await self._script(keys=keys, args=[rpm, tpm, tokens, WINDOW_S])
                return bool(result[0]), int(result[1])
            except (RedisError, OSError) as exc:
                self.fallbacks += 1
                log.warning("rate limits fall back to local counting: %s", exc)
        return self._check_local(name, rpm, tpm, tokens)

    def _check_local(self, name: str, rpm: int, tpm: int, tokens: int) -> tuple[bool, int]:
        now = time.time()
        w = self._local.setdefault(name, _LocalWindow(start=now))
        if now - w.start >= WINDOW_S:
            w.start, w.requests, w.tokens = now, 0, 0
        retry = int(WINDOW_S - (now - w.start)) + 1
        if (rpm and w.requests + 1 > rpm) or (tpm and w.tokens + tokens > tpm):
            return False, retry
        w.requests += 1
        w.tokens += tokens
        return True, 0

    def acquire(self, tenant: Tenant) -> None:
        """Take a concurrency slot (per replica); pair with ``release``."""
        cap = tenant.max_concurrency
        current = self._in_flight.get(tenant.name, 0)
        if cap is not None and current >= cap:
            raise ApiError(
                429,
                f"too many concurrent requests for this API key (limit {cap})",
                code="concurrency_limit_exceeded",
                headers={"retry-after": "1"},
            )
        self._in_flight[tenant.name] = current + 1

    def release(self, tenant: Tenant) -> None:
        self._in_flight[tenant.name] = max(0, self._in_flight.get(tenant.name, 1) - 1)

    def in_flight(self, tenant: str) -> int:
        return self._in_flight.get(tenant, 0)
