"""Generation slots: at most N generations at once, and a deadline on waiting for one.

``waiting`` and ``running`` are what the router's load rule and ``/metrics`` read. The wait
uses ``asyncio.timeout``, which never drops a cancel (``wait_for`` on Python 3.11 can: a
client gone just as a slot freed would then hold that slot for a whole generation).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class EdgeBusy(Exception):
    """No generation slot freed up in time."""


class Slots:
    def __init__(self, size: int, timeout_s: float) -> None:
        self.size = size
        self.timeout_s = timeout_s
        self.waiting = 0
        self.running = 0
        self._free = asyncio.Semaphore(size)

    @property
    def free(self) -> int:
        # The semaphore's own count, so a leaked permit shows (size - running would hide it).
        return self._free._value

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot for the block; EdgeBusy if none frees up within ``timeout_s``."""
        self.waiting += 1
        try:
            async with asyncio.timeout(self.timeout_s):
                await self._free.acquire()
        except TimeoutError:
            raise EdgeBusy() from None
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._free.release()
