from edge.upstream.breaker import CircuitBreaker, State


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_opens_after_threshold_and_half_opens_after_cooldown() -> None:
    clock = Clock()
    b = CircuitBreaker(threshold=2, cooldown_s=5, clock=clock)
    b.failure()
    assert b.state is State.CLOSED and b.allow()
    b.failure()
    assert b.state is State.OPEN and not b.allow()
    clock.now = 5
    assert b.state is State.HALF_OPEN
    assert b.allow() and not b.allow()  # exactly one trial
    b.failure()
    assert b.state is State.OPEN
    clock.now = 10
    assert b.allow()
    b.success()
    assert b.state is State.CLOSED and b.allow() and b.failures == 0


def test_success_resets_the_count() -> None:
    b = CircuitBreaker(threshold=2)
    b.failure()
    b.success()
    b.failure()
    assert b.state is State.CLOSED
