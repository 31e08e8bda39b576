"""Forward progress of one engine: is it producing tokens while it has work?

vLLM's ``/health`` says the API server is up, not that the scheduler runs: with its
``EngineCore`` process hung, ``/health`` answers 200 in a millisecond while every request
waits forever. So the core watches progress, per replica, from what it already sees:

- the engine's token counters (``vllm:prompt_tokens_total`` + ``generation_tokens_total``,
  read every metrics poll): they move at every engine step;
- the relays: any byte from the engine on any stream, any answer that completed;
- a canary (one generated token) when the replica has had no traffic for a while, so a
  wedge is found before a user hits it.

An engine with requests of ours in flight and no progress for its allowance is wedged. The
allowance is ``timeout_s``, or four times the engine's typical silence while it works, if
longer (a moving average: a CPU engine sharing two cores with others can take seconds per
step and is slow, not wedged; one slow step moves it little; capped at ten times
``timeout_s``), plus time for the prefill of the prompts still waiting for their first
byte. An engine whose own processes compute (at least ``COMPUTING_SHARE`` of a core since
the last poll: only a supervised engine's CPU time can be read) is slow, not wedged: a batch
of prefills on a contended CPU went silent for 4.1 s right after a 50 % duty-cycle starve
and was evicted while its worker ran at 100 %. Its allowance is ten times ``timeout_s``, so
a hang that spins is still found; a frozen or deadlocked scheduler stops computing within
a step (its worker fell to 2 % of a core in under a second, measured). This module only
decides;
``core.replica`` acts on it. Pure: the clock is an argument.
"""

from __future__ import annotations

from dataclasses import dataclass

# How the engine's own pace widens its allowance: a moving average of the silences it
# showed while working (each progress event weighs GAP_WEIGHT), from zero.
GAP_FACTOR = 4.0
GAP_WEIGHT = 0.1
MAX_FACTOR = 10.0
# The engine's processes used at least this share of a core since the last poll: computing.
COMPUTING_SHARE = 0.25


@dataclass(frozen=True)
class ProgressPolicy:
    """CoreSettings.engine_progress_* (see there)."""

    timeout_s: float = 3.0  # no progress this long with work in flight: wedged; 0: off
    prefill_tokens_per_s: float = 1000.0  # slowest prefill expected: allowance for long prompts
    canary_idle_s: float = 30.0  # an idle replica gets a one-token generation; 0: never

    @property
    def enabled(self) -> bool:
        return self.timeout_s > 0

    def allowance_s(self, prefill_tokens: int, gap_s: float = 0.0) -> float:
        """How long an engine may go silent while ``prefill_tokens`` wait for a first byte,
        given the longest silence ``gap_s`` it showed lately while working."""
        paced = min(GAP_FACTOR * gap_s, MAX_FACTOR * self.timeout_s)
        return max(self.timeout_s, paced) + prefill_tokens / self.prefill_tokens_per_s


class Progress:
    def __init__(self, policy: ProgressPolicy, now: float) -> None:
        self.policy = policy
        self.last = now  # the last evidence that the engine works
        self.tokens: float | None = None  # the engine's token counters at the last read
        self.busy_since: float | None = None  # work of ours in flight since then
        self.canary_at = now  # the last canary sent (or start)
        self.gap = 0.0  # its typical silence while it works (moving average)
        self.wedged = False
        self.wedges = 0  # times it was found wedged
        self.recoveries = 0

    # --- evidence ------------------------------------------------------------------------

    def moved(self, now: float) -> bool:
        """The engine did something (a byte, an answer, a counter moved, a canary came back).
        True if this ends a wedge."""
        if self.busy_since is not None and not self.wedged:  # a wedge is no pace to learn
            gap = now - max(self.last, self.busy_since)
            self.gap += GAP_WEIGHT * (gap - self.gap)
        self.last = now
        if self.wedged:
            self.wedged = False
            self.recoveries += 1
            return True
        return False

    def counters(self, now: float, tokens: float) -> bool:
        """The token counters read from /metrics; progress if they changed since the last
        read (a restart resets them: that is a change too). True if this ends a wedge."""
        previous, self.tokens = self.tokens, tokens
        if previous is not None and tokens != previous:
            return self.moved(now)
        return False

    def started(self, now: float) -> None:
        """Work arrived at an idle engine: its silence counts from now."""
        self.busy_since = now

    # --- decisions -----------------------------------------------------------------------

    def silent_s(self, now: float, busy: bool) -> float:
        """Seconds without progress while work was in flight (0 when idle)."""
        if not busy:
            self.busy_since = None
            return 0.0
        if self.busy_since is None:
            self.busy_since = now
        return now - max(self.last, self.busy_since)

    def check(
        self, now: float, busy: bool, prefill_tokens: int = 0, computing: bool = False
    ) -> bool:
        """True when the engine has just been found wedged: work in flight (``busy``) and
        silent past the allowance for ``prefill_tokens`` still in prefill (ten times
        ``timeout_s`` while its processes are ``computing``)."""
        silent = self.silent_s(now, busy)
        if self.wedged or not self.policy.enabled or not busy:
            return False
        allowance = self.allowance_s(prefill_tokens)
        if computing:
            allowance = max(allowance, MAX_FACTOR * self.policy.timeout_s)
        return silent > allowance and self.lost()

    def allowance_s(self, prefill_tokens: int = 0) -> float:
        return self.policy.allowance_s(prefill_tokens, self.gap)

    def lost(self) -> bool:
        """Found wedged (silent too long, or a canary got no answer in time); True if this
        starts a wedge."""
        if self.wedged or not self.policy.enabled:
            return False
        self.wedged = True
        self.wedges += 1
        return True

    def canary_due(self, now: float, busy: bool) -> bool:
        """Whether to send a canary now: a wedged engine is re-checked every ``timeout_s``
        (to see it come back); an idle one after ``canary_idle_s`` without progress."""
        if not self.policy.enabled or (busy and not self.wedged):
            return False  # off; or real traffic is the probe
        if self.wedged:
            every = max(self.policy.timeout_s, 0.5)
        elif self.policy.canary_idle_s > 0:
            every = self.policy.canary_idle_s
        else:
            return False
        if now - max(self.last, self.canary_at) < every:
            return False
        self.canary_at = now
        return True
