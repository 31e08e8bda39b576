"""bench.common's load drivers: what they call, in which order, and what they count."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from bench.common import alternating, load


def test_alternating_takes_turns_and_pools_each_ops_calls() -> None:
    calls: list[tuple[str, int]] = []

    def op(name: str) -> Callable[[int], Awaitable[None]]:
        async def call(i: int) -> None:
            calls.append((name, i))
            await asyncio.sleep(0)

        return call

    runs = asyncio.run(alternating({"a": op("a"), "b": op("b")}, requests=6, clients=1, rounds=3))
    assert [name for name, _ in calls] == [
        "a",
        "a",
        "b",
        "b",
    ] * 3  # in turns, not one then the other
    assert sorted(i for name, i in calls if name == "a") == list(range(6))  # each index once
    assert {name: run["n"] for name, run in runs.items()} == {"a": 6, "b": 6}
    assert all(run["clients"] == 1 and run["per_s"] > 0 for run in runs.values())


def test_load_runs_every_call_once_across_its_clients() -> None:
    seen: list[int] = []

    async def call(i: int) -> None:
        seen.append(i)
        await asyncio.sleep(0)

    run = asyncio.run(load(call, requests=50, clients=8))
    assert sorted(seen) == list(range(50)) and run["n"] == 50 and run["clients"] == 8
