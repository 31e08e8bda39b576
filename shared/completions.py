"""Pure builders and accumulators for OpenAI chat-completion responses and stream chunks."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any


def new_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def cached_usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """Usage of an answer served from the cache: every token is marked as cached.

    ``prompt_tokens_details.cached_tokens`` is OpenAI's own field; the same field under
    ``completion_tokens_details`` is edgecore's, since no model generated those tokens.
    """
    if not usage:
        return usage
    prompt = int(usage.get("prompt_tokens", 0))
    completion = int(usage.get("completion_tokens", 0))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": prompt},
        "completion_tokens_details": {"cached_tokens": completion},
    }


def completion(
    *,
    id: str,
    model: str,
    content: str,
    finish_reason: str,
    usage: dict[str, Any] | None,
    created: int | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": id,
        "object": "chat.completion",
        "created": created or int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def chunk(
    *,
    id: str,
    model: str,
    created: int,
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One ``chat.completion.chunk``; ``delta=None`` makes the final usage-only chunk."""
    body: dict[str, Any] = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }
    if usage is not None or delta is None:
        body["usage"] = usage
    return body


def stream_error(message: str, *, code: str = "upstream_error") -> dict[str, Any]:
    """The event that ends a stream which failed after its first byte (not a silent cut)."""
    return {"error": {"message": message, "type": "server_error", "param": None, "code": code}}


@dataclass
class StreamAccumulator:
    """Rebuilds the full answer from a stream's ``data`` payloads (to cache it, count it)."""

    parts: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: bool = False
    tool_calls: bool = False
    done: bool = False

    def add(self, payload: str) -> dict[str, Any] | None:
        """Record one payload; returns it parsed, or None for ``[DONE]`` and non-JSON."""
        if payload.strip() == "[DONE]":
            self.done = True
            return None
        try:
            data = json.loads(payload)
        except json.JSONDecodeError:
            return None
        if not isinstance(data, dict):
            return None
        if "error" in data:
            self.error = True
        for choice in data.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.parts.append(delta["content"])
            if delta.get("tool_calls"):
                self.tool_calls = True
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        if data.get("usage"):
            self.usage = data["usage"]
        return data

    @property
    def content(self) -> str:
        return "".join(self.parts)

    @property
    def complete(self) -> bool:
        """A whole, clean answer: the only kind worth caching."""
        return self.finish_reason == "stop" and not self.error and not self.tool_calls


def new_text_id() -> str:
    return "cmpl-" + uuid.uuid4().hex


def text_completion(
    *,
    id: str,
    model: str,
    text: str | None,
    finish_reason: str | None,
    usage: dict[str, Any] | None = None,
    created: int | None = None,
) -> dict[str, Any]:
    """A ``/v1/completions`` body, or (``text`` None or a delta) one of its stream chunks."""
    body: dict[str, Any] = {
        "id": id,
        "object": "text_completion",
        "created": created or int(time.time()),
        "model": model,
        "choices": []
        if text is None
        else [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = usage
    return body
