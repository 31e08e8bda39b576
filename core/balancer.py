"""Replica choice, as pure functions: engine load from /metrics, conversation affinity, and
least-loaded selection with a preferred replica.

Affinity uses rendezvous hashing: each (key, replica) pair gets a score and the highest
wins, so a replica leaving (drained, crashed) moves only its own conversations and they
come back when it returns. vLLM's prefix cache then holds the shared prefix (system prompt,
first turns) on one replica instead of being recomputed everywhere.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

# The engine gauges that say how busy a vLLM replica is (vLLM's metrics documentation).
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = "vllm:kv_cache_usage_perc"
# Counted every engine step (vllm/v1/metrics/loggers.py): they move only while it works.
TOKENS = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total")
_PREFIXES = tuple(
    p + name for name in (RUNNING, WAITING, KV_USAGE, *TOKENS) for p in ("", "# HELP ", "# TYPE ")
)


@dataclass(frozen=True)
class EngineLoad:
    running: float = 0.0
    waiting: float = 0.0
    kv_usage: float = 0.0  # 0..1
    tokens: float = 0.0  # prompt + generated tokens ever processed (counters)


def parse_engine_load(text: str) -> EngineLoad:
    """Sum running / waiting over the engine's samples (one per model and engine index)
    and take the fullest KV cache."""
    # vLLM's exposition is large (histograms); parsing all of it every poll would block the
    # event loop for milliseconds. Keep the three families' lines, parse only those.
    wanted = "\n".join(line for line in text.splitlines() if line.startswith(_PREFIXES))
    running = waiting = kv = tokens = 0.0
    for family in text_string_to_metric_families(wanted):
        for sample in family.samples:
            if sample.name == RUNNING:
                running += sample.value
            elif sample.name == WAITING:
                waiting += sample.value
            elif sample.name == KV_USAGE:
                kv = max(kv, sample.value)
            elif sample.name in TOKENS:
                tokens += sample.value
    return EngineLoad(running, waiting, kv, tokens)


def affinity_key(payload: Mapping[str, Any], session: str | None = None) -> str | None:
    """A stable key for the conversation's shared prefix: an explicit session id (header),
    else the model, the leading system prompt(s) and the first turn, which every later
    request of the conversation repeats. None without messages."""
    if session:
        return "s:" + hashlib.blake2b(session.encode(), digest_size=8).hexdigest()
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    n = 0
    while n < len(messages) and _is_system(messages[n]):
        n += 1
    head = messages[: n + 1]
    blob = json.dumps([payload.get("model"), head], sort_keys=True, default=str)
    return "p:" + hashlib.blake2b(blob.encode(), digest_size=8).hexdigest()


def _is_system(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") in ("system", "developer")


def external_load(load: EngineLoad, ours: int, previous: EngineLoad | None = None) -> float:
    """Requests on the engine that are not this core's (other gateways share engines).

    ``ours``: the most requests this core had on it since the previous read. ``previous``:
    that read. vLLM sets its gauges when it runs a step, so after the last request ends an
    idle engine can keep showing it as running (vLLM #22545, #29928) until the next one;
    an engine that processed no token since the previous read is running nothing.
    """
    if previous is not None and load.tokens == previous.tokens:
        return 0.0
    return max(0.0, load.running + load.waiting - ours)


@dataclass(frozen=True)
class Candidate:
    """What the balancer needs to know of a replica that may take a request now."""

    name: str
    in_flight: int  # requests this core has sent and not finished: exact and current
    limit: int  # max_in_flight
    load: EngineLoad = EngineLoad()
    external: float = 0.0  # other gateways' requests on the engine, as of the last poll

    @property
    def occupancy(self) -> float:
        # Not the engine's own (polled, so stale) total: a request of ours that just ended
        # would still count. Ours are counted here, the engine adds only what isn't ours.
        return self.in_flight + self.external

    @property
    def score(self) -> float:
        # Share of the admission limit in use, plus KV pressure (a full cache preempts).
        return self.occupancy / self.limit + self.load.kv_usage

    @property
    def has_room(self) -> bool:
        return self.in_flight < self.limit


def rendezvous(key: str, names: Sequence[str]) -> str:
    """The replica that owns ``key`` among ``names`` (highest random weight)."""
    return max(names, key=lambda n: hashlib.blake2b(f"{key}|{n}".encode(), digest_size=8).digest())


@dataclass(frozen=True)
class Choice:
    name: str
    affinity: str  # "hit", "fallback" (preferred replica too busy) or "none"


def choose(candidates: Sequence[Candidate], key: str | None, slack: float) -> Choice | None:
    """The replica for a request: the key's preferred replica unless it is full or more
    than ``slack`` busier than the least loaded, else the least loaded; None if all full."""
    open_ = [c for c in candidates if c.has_room]
    if not open_:
        return None
    best = min(open_, key=lambda c: (c.score, c.name))
    if key is None:
        return Choice(best.name, "none")
    preferred_name = rendezvous(key, [c.name for c in candidates])
    preferred = next((c for c in open_ if c.name == preferred_name), None)
    if preferred is not None and preferred.score <= best.score + slack:
        return Choice(preferred.name, "hit")
    return Choice(best.name, "fallback")
