"""Admission control: requests wait in a bounded queue per priority class for a replica
with room, instead of piling up in vLLM's own (unbounded) queue.

A full queue answers at once (429 with Retry-After): a caller learns "busy" in
microseconds and can go elsewhere (the edge keeps borderline prompts local). Interactive
requests are always placed before batch ones; within a class the order is FIFO. A queued
request whose deadline passes, or whose caller leaves, is dropped from the queue.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

Priority = Literal["interactive", "batch"]
Reason = Literal["queue_full", "queue_timeout", "no_replica"]
PRIORITIES: tuple[Priority, ...] = ("interactive", "batch")

T = TypeVar("T")


class Rejected(Exception):
    """The request cannot be admitted; ``reason`` is a metric label and error code."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(eq=False)
class _Waiter(Generic[T]):
    key: str | None
    exclude: frozenset[str]
    future: asyncio.Future[T] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Admission(Generic[T]):
    """``pick(key, exclude)`` reserves a replica (returns its lease) or returns None when
    every replica is full; ``release`` of a lease must be followed by ``dispatch()``."""

    def __init__(
        self,
        limits: Mapping[Priority, int],
        pick: Callable[[str | None, frozenset[str]], T | None],
        release: Callable[[T], None],
        available: Callable[[], bool],
    ) -> None:
        self.limits = dict(limits)
        self._pick = pick
        self._release = release
        self._available = available
        self.queues: dict[Priority, deque[_Waiter[T]]] = {p: deque() for p in PRIORITIES}
        self.rejected: Counter[tuple[Priority, str]] = Counter()
        self.admitted: Counter[Priority] = Counter()

    def depth(self, priority: Priority) -> int:
        return len(self.queues[priority])

    def _ahead(self, priority: Priority) -> bool:
        """Are requests of this or a higher class already waiting (FIFO, no overtaking)?"""
        for p in PRIORITIES:
            if self.queues[p]:
                return True
            if p == priority:
                return False
        return False

    def _reject(self, priority: Priority, reason: Reason) -> Rejected:
        self.rejected[(priority, reason)] += 1
        return Rejected(reason)

    async def admit(
        self,
        priority: Priority,
        key: str | None,
        timeout: float,
        exclude: frozenset[str] = frozenset(),
    ) -> T:
        if not self._available():
            # Nothing could serve it within any deadline worth waiting: say so now (503).
            raise self._reject(priority, "no_replica")
        if not self._ahead(priority):
            lease = self._pick(key, exclude)
            if lease is not None:
                self.admitted[priority] += 1
                return lease
        queue = self.queues[priority]
        if len(queue) >= self.limits[priority]:
            raise self._reject(priority, "queue_full")
        waiter: _Waiter[T] = _Waiter(key, exclude)
        queue.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                lease = await asyncio.shield(waiter.future)
        except TimeoutError:
            self._abandon(queue, waiter)
            raise self._reject(priority, "queue_timeout") from None
        except BaseException:
            self._abandon(queue, waiter)  # the caller left while queued
            raise
        self.admitted[priority] += 1
        return lease

    def _abandon(self, queue: deque[_Waiter[T]], waiter: _Waiter[T]) -> None:
        if waiter.future.done():
            # Placed just as it gave up: give the replica's slot back to the next one.
            self._release(waiter.future.result())
            self.dispatch()
        else:
            waiter.future.cancel()
            queue.remove(waiter)

    def dispatch(self) -> None:
        """Place queued requests, interactive first, while replicas have room."""
        for priority in PRIORITIES:
            queue = self.queues[priority]
            while queue:
                waiter = queue[0]
                lease = self._pick(waiter.key, waiter.exclude)
                if lease is None:
                    return  # the head can't be placed: nothing behind it may overtake
                queue.popleft()
                waiter.future.set_result(lease)
