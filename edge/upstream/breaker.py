"""A circuit breaker per core: stop sending to a core that keeps failing, probe it later.

closed -> (``threshold`` failures in a row) -> open -> (``cooldown_s``) -> half-open:
one trial request; success closes the breaker, failure opens it again. Transport
failures and failures mid-stream count; a client that cancels does not. A failed health
probe opens it at once (``trip``): a frozen core would otherwise cost ``threshold`` users
a deadline each.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import IntEnum


class State(IntEnum):
    CLOSED = 0
    HALF_OPEN = 1
    OPEN = 2


class CircuitBreaker:
    def __init__(
        self,
        threshold: int = 3,
        cooldown_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.clock = clock
        self.failures = 0
        self.opened_at = 0.0
        self._state = State.CLOSED
        self._trial_out = False

    @property
    def state(self) -> State:
        if self._state is State.OPEN and self.clock() - self.opened_at >= self.cooldown_s:
            self._state, self._trial_out = State.HALF_OPEN, False
        return self._state

    def allow(self) -> bool:
        """May a request go to this core now? (Half-open lets exactly one through.)"""
        state = self.state
        if state is State.CLOSED:
            return True
        if state is State.HALF_OPEN and not self._trial_out:
            self._trial_out = True
            return True
        return False

    def success(self) -> None:
        self.failures = 0
        self._state, self._trial_out = State.CLOSED, False

    def failure(self) -> None:
        self.failures += 1
        if self._state is State.HALF_OPEN or self.failures >= self.threshold:
            self._state, self.opened_at, self._trial_out = State.OPEN, self.clock(), False

    def trip(self) -> None:
        """Open now, whatever the count (the core failed its health probe)."""
        self.failures = max(self.failures, self.threshold)
        self._state, self.opened_at, self._trial_out = State.OPEN, self.clock(), False
