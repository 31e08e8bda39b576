"""Chaos's load: what it asks (exact and reworded cache hits, the edge model, the core model)
and how each request ends (``Result``: ok, 503, 429, other, hung, lost, refused).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import httpx

EDGE_MODEL = "edge-smollm2-135m"
CORE_MODEL = "smollm2-135m-instruct"
KINDS = ("exact", "reworded", "edge", "core")
WEIGHTS = (0.35, 0.15, 0.25, 0.25)

# Answered once in the warm-up (model auto, temperature 0): later identical requests are
# exact hits, the rewordings semantic ones (when the verifier accepts them).
PROMPTS = [
    ("What is the capital of France?", "Which city is the capital of France?"),
    ("Say hello.", "Please say hello."),
    ("Reply with the word yes.", "Answer with the single word yes."),
    (
        "What is the boiling point of water in Celsius?",
        "At what Celsius temperature does water boil?",
    ),
    ("How many days are in a week?", "A week has how many days?"),
    ("What colour is the sky on a clear day?", "On a clear day, what colour is the sky?"),
    ("What is 2 plus 2?", "What do you get when you add 2 and 2?"),
]


def cached_body(prompt: str, stream: bool) -> dict[str, Any]:
    return {
        "model": "auto",
        "temperature": 0,
        "max_tokens": 96,  # an answer cut at the limit is not cached
        "stream": stream,
        "messages": [{"role": "user", "content": prompt}],
    }


def fresh_body(model: str, n: int, stream: bool) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 16,
        "stream": stream,
        "messages": [{"role": "user", "content": f"Name a fruit and a colour. (#{n})"}],
    }


@dataclass
class Result:
    kind: str
    stream: bool
    start: float  # seconds since the load began
    end: float
    outcome: str  # ok | 503 | 429 | other | hung | lost | refused
    status: int | None = None
    tier: str | None = None
    degraded: str | None = None
    detail: str = ""

    @property
    def ms(self) -> float:
        return (self.end - self.start) * 1000.0


async def request(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    kind: str,
    t0: float,
    deadline: float,
) -> Result:
    """One request, classified (see the module's docstring)."""
    start = time.monotonic() - t0
    res = Result(kind, bool(body.get("stream")), start, start, "lost")

    async def run() -> None:
        async with client.stream("POST", url, json=body, headers=headers) as r:
            res.status, res.tier = r.status_code, r.headers.get("x-edgecore-tier")
            res.degraded = r.headers.get("x-edgecore-degraded")
            if r.status_code != 200:
                text = await r.aread()
                res.outcome = {503: "503", 429: "429"}.get(r.status_code, "other")
                res.detail = text[:200].decode(errors="replace")
                return
            if not res.stream:
                data = json.loads(await r.aread())
                res.outcome = "ok" if data.get("choices") else "other"
                return
            error = done = False
            try:
                async for line in r.aiter_lines():
                    if line.startswith("data:"):
                        payload = line[5:].strip()
                        if payload == "[DONE]":
                            done = True
                        elif '"error"' in payload and "error" in json.loads(payload):
                            error = True
                            res.detail = payload[:200]
            except httpx.TransportError as exc:
                res.outcome, res.detail = ("other" if error else "lost"), repr(exc)[:200]
                return
            res.outcome = "other" if error else ("ok" if done else "lost")

    try:
        async with asyncio.timeout(deadline):
            await run()
    except TimeoutError:
        res.outcome = "hung"
    except httpx.ConnectError as exc:
        res.outcome, res.detail = "refused", repr(exc)[:200]
    except (httpx.TransportError, ValueError) as exc:
        res.outcome, res.detail = "lost", repr(exc)[:200]
    res.end = time.monotonic() - t0
    return res
