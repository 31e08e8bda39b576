"""What the shared rate limiter costs per request, next to a bare Redis round trip.

    .venv/bin/python -m bench.limiter_overhead [--n 3000] [--out bench/results/limiter.json]

Starts the bundled Redis on a free port and times, sequentially from one client:
PING (the floor any Redis-backed limiter pays), the limiter's atomic Lua check (requests
and tokens per minute), and the local fallback used when Redis is down.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis

from bench.common import Results, redis_server, run_bench
from edge.tenancy.keys import Tenant
from edge.tenancy.limits import Limiter


async def timed(n: int, op: Callable[[], Awaitable[Any]]) -> dict[str, float]:
    for _ in range(100):  # warm-up
        await op()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        await op()
        samples.append((time.perf_counter() - t) * 1e6)
    samples.sort()
    return {
        "p50_us": round(samples[len(samples) // 2], 1),
        "p99_us": round(samples[int(len(samples) * 0.99)], 1),
    }


async def measure(port: int, n: int) -> dict[str, Any]:
    redis = Redis(port=port)
    limiter = Limiter(redis, prefix=f"bench:{time.time_ns()}")
    tenant = Tenant(name="bench", requests_per_minute=10**9, tokens_per_minute=10**12)
    local = Limiter(None)
    results = {
        "redis_ping": await timed(n, redis.ping),
        "limiter_redis_lua": await timed(n, lambda: limiter.check_rate(tenant, 100)),
        "limiter_local_fallback": await timed(n, lambda: local.check_rate(tenant, 100)),
    }
    await redis.aclose()
    results["ratio_lua_vs_ping_p50"] = round(
        results["limiter_redis_lua"]["p50_us"] / results["redis_ping"]["p50_us"], 2
    )
    return results


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=3000)


def run_all(args: argparse.Namespace) -> Results:
    with redis_server() as port:
        return asyncio.run(measure(port, args.n))


def table(results: Results) -> str:
    rows = [f"{'operation':<26}{'p50 µs':>10}{'p99 µs':>10}"]
    for name in ("redis_ping", "limiter_redis_lua", "limiter_local_fallback"):
        r = results[name]
        rows.append(f"{name:<26}{r['p50_us']:>10}{r['p99_us']:>10}")
    rows.append(f"limiter / ping (p50): {results['ratio_lua_vs_ping_p50']}")
    return "\n".join(rows)


def main() -> None:
    run_bench("limiter", __doc__, run_all, arguments=arguments, table=table)


if __name__ == "__main__":
    main()
