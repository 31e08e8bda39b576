"""Pure cache keys: what is embedded, and the hard partition an answer may never cross."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from shared.parameters import non_text_part
from shared.schemas import ChatCompletionRequest, Message


def extra_body(req: ChatCompletionRequest) -> dict[str, Any]:
    """The messages as sent (content parts and all), for the pure parameter checks."""
    return {"messages": [m.model_dump(exclude_none=True) for m in req.messages]}


# Request fields that change the answer; each one is part of the partition.
_ANSWER_PARAMS = (
    "temperature",
    "top_p",
    "stop",
    "seed",
    "response_format",
    "tools",
    "tool_choice",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
)


# Fields that never change the answer's text.
_HARMLESS = frozenset({"user", "metadata", "store", "service_tier", "parallel_tool_calls"})


def normalize(text: str) -> str:
    """Case and spacing aside: what "the same words" means to the exact step and its key."""
    return re.sub(r"\s+", " ", text).strip().casefold()


def _digest(obj: Any) -> str:
    raw = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def max_tokens_bucket(limit: int | None) -> str:
    """Answers cut at 100 vs 120 tokens differ, but not every value needs its own bucket."""
    if limit is None:
        return "none"
    bucket = 16
    while bucket < limit:
        bucket *= 2
    return str(bucket)


def conversation_text(messages: list[Message], window: int, *, last: str | None = None) -> str:
    """The text to embed: the last message first, then earlier turns newest to oldest.

    The embedder truncates at its window (256 word pieces for MiniLM), so putting the newest
    turn first means truncation drops the oldest context, never the question itself.
    ``last``: the last message's text read otherwise (respelled, ``edge.cache.spelling``).
    """
    turns = [m for m in messages if m.role not in ("system", "developer")][-window:]
    texts = [m.text() for m in turns]
    if last is not None and turns and turns[-1] is messages[-1]:
        texts[-1] = last
    return "\n".join(
        f"{m.role}: {t}" for m, t in zip(reversed(turns), reversed(texts), strict=True)
    )


def context_key(messages: list[Message]) -> str:
    """Exact fingerprint of the conversation before the last message.

    A follow-up ("how old is he?") only matches entries from the same earlier conversation,
    so identical follow-ups after different first questions can never hit each other.
    """
    earlier = [m for m in messages[:-1] if m.role not in ("system", "developer")]
    return _digest([[m.role, normalize(m.text())] for m in earlier])


def partition_key(
    req: ChatCompletionRequest, *, tenant: str, embedder_id: str, user: str | None = None
) -> str:
    """Everything besides the prompt that must match exactly for an answer to be reused.
    ``user``: for a tenant whose answers stay with each user (``Tenant.cache_scope``), the
    request's ``user`` field."""
    extra = req.model_extra or {}
    dumped = req.model_dump(include=set(_ANSWER_PARAMS) & set(type(req).model_fields))
    params = {k: dumped.get(k, extra.get(k)) for k in _ANSWER_PARAMS}
    # Any other field we do not model (top_k, min_p, repetition_penalty, ...) may change the
    # answer too: it is part of the partition unless known to be harmless.
    params["other"] = {k: v for k, v in extra.items() if k not in _HARMLESS and k not in params}
    system = [[m.role, m.text()] for m in req.messages if m.role in ("system", "developer")]
    return _digest(
        {
            "tenant": tenant,
            "model": req.model,
            "params": params,
            "max_tokens": max_tokens_bucket(req.output_limit),
            "system": system,
            "embedder": embedder_id,
            # Only when given: a tenant-wide partition keeps the digest it always had.
            **({"user": user} if user is not None else {}),
        }
    )


def is_cacheable(req: ChatCompletionRequest, *, only_deterministic: bool) -> bool:
    if req.tools or req.tool_choice:
        return False
    extra = req.model_extra or {}
    # A stored answer has no log probabilities to give, and the key holds no image bytes.
    if extra.get("logprobs") or extra.get("top_logprobs") or non_text_part(extra_body(req)):
        return False
    if only_deterministic and (req.temperature is None or req.temperature > 0):
        return False
    return True
