"""One core as the edge sees it: its HTTP/2 connections (a few, each carrying at most
``streams_per_connection`` streams), its probe connection, health and breaker, and the
deadlines that apply to it (``Timeouts``).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from edge.upstream.breaker import CircuitBreaker

log = logging.getLogger("edgecore.edge.core")


@dataclass
class Timeouts:
    connect_s: float
    first_byte_s: float  # the base deadline for response headers
    idle_s: float  # longest silence on a stream once it started
    first_byte_per_1k_chars_s: float = 0.0  # more time to the first byte for long prompts
    probe_s: float = 2.0  # a health probe's deadline
    # A JSON (non-stream) answer's headers come only once it is whole: time per token asked.
    unary_per_token_s: float = 0.0
    unary_default_tokens: int = 1024  # when the request sets no max_tokens

    def first_byte_for(self, prompt_chars: int, payload: dict[str, Any] | None = None) -> float:
        """The deadline for response headers: longer for long prompts (prefill) and, for a
        JSON request, for every token it may generate."""
        deadline = self.first_byte_s + self.first_byte_per_1k_chars_s * prompt_chars / 1000
        if payload is not None and not payload.get("stream"):
            limit = payload.get("max_completion_tokens") or payload.get("max_tokens")
            tokens = limit if isinstance(limit, int) and limit > 0 else self.unary_default_tokens
            deadline += self.unary_per_token_s * tokens
        return deadline


def prompt_chars(payload: dict[str, Any]) -> int:
    """Characters of prompt text in a chat (or completions) payload, for the deadline."""
    total = 0
    messages = payload.get("messages")
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    total += len(part["text"])
    prompt = payload.get("prompt")
    if isinstance(prompt, str):
        total += len(prompt)
    return total


def tls_context(
    ca_file: Path | None, client_cert: tuple[Path, Path] | None = None
) -> ssl.SSLContext:
    """Verification for https cores: the system's CAs, or a private CA for the core fleet;
    with ``client_cert`` (certificate, key) the edge also proves who it is (mTLS)."""
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    if client_cert is not None:
        context.load_cert_chain(str(client_cert[0]), str(client_cert[1]))
    return context


@dataclass
class Connection:
    """One HTTP/2 connection to a core: an httpx transport, which requests go to directly.

    ``httpx.AsyncClient.send`` would add what a core never needs on every request (cookie
    extraction, auth and redirect handling, header and cookie merging in ``build_request``:
    together about 7 % of the edge's CPU on a forwarded stream, py-spy); the pool builds
    complete requests itself (``request``) and the transport answers them as the client
    would, its errors already httpx's.
    """

    transport: httpx.AsyncHTTPTransport
    timeout: dict[str, float | None]  # the default deadlines (httpx's timeout extension)
    active: int = 0

    async def send(self, request: httpx.Request, *, stream: bool = True) -> httpx.Response:
        response = await self.transport.handle_async_request(request)
        response.request = request
        if not stream:
            try:
                await response.aread()
            finally:
                await response.aclose()
        return response

    async def aclose(self) -> None:
        await self.transport.aclose()


@dataclass
class Core:
    url: str
    priority: int
    breaker: CircuitBreaker
    streams_per_connection: int
    max_connections: int
    timeouts: Timeouts
    verify: ssl.SSLContext
    headers: dict[str, str] = field(default_factory=dict)
    healthy: bool = True  # /readyz said 200 (a core without a ready engine answers 503)
    alive: bool = True  # it answers its probes at all; a core that does not gets no requests
    rtt_s: float | None = None
    connections: list[Connection] = field(default_factory=list)
    # Set while the probe says the core is frozen or gone: pending first-byte waits and
    # stalled streams on it end at once.
    down: asyncio.Event = field(default_factory=asyncio.Event)
    probe_client: httpx.AsyncClient | None = None
    probe_failures: int = 0  # in a row
    probe_successes: int = 0  # in a row
    _endpoints: dict[str, httpx.URL] = field(default_factory=dict)

    def endpoint(self, path: str) -> httpx.URL:
        """``path`` on this core, merged as httpx merges it with a client's base URL but
        parsed once: httpx parses both URLs again for every request, about 80 us here."""
        url = self._endpoints.get(path)
        if url is None:
            base = httpx.URL(self.url)
            prefix = base.raw_path if base.raw_path.endswith(b"/") else base.raw_path + b"/"
            url = base.copy_with(raw_path=prefix + path.lstrip("/").encode())
            self._endpoints[path] = url
        return url

    def _new_connection(self) -> Connection:
        t = self.timeouts
        transport = httpx.AsyncHTTPTransport(
            http1=self.url.startswith("https://"),  # TLS: ALPN may still pick 1.1; else h2c
            http2=True,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            verify=self.verify,
        )
        timeout = httpx.Timeout(t.idle_s, connect=t.connect_s, pool=t.connect_s)
        conn = Connection(transport, timeout.as_dict())
        self.connections.append(conn)
        return conn

    def request(
        self,
        path: str,
        payload: dict[str, Any],
        headers: dict[str, str],
        extensions: dict[str, Any],
    ) -> httpx.Request:
        """A POST of ``payload`` to ``path`` on this core, with its edge token (``headers``
        and ``extensions`` as httpx takes them; a ``timeout`` there overrides the default)."""
        return httpx.Request(
            "POST",
            self.endpoint(path),
            json=payload,
            headers={**self.headers, **headers},  # the core's edge token, on every request
            extensions=extensions,
        )

    def connection(self) -> Connection:
        open_ = [c for c in self.connections if c.active < self.streams_per_connection]
        if open_:
            return min(open_, key=lambda c: c.active)
        if len(self.connections) < self.max_connections:
            return self._new_connection()
        return min(self.connections, key=lambda c: c.active)  # all full: queue on the least busy

    def probe_connection(self) -> httpx.AsyncClient:
        if self.probe_client is None:
            self.probe_client = httpx.AsyncClient(
                base_url=self.url,
                http1=self.url.startswith("https://"),
                http2=True,
                timeout=httpx.Timeout(self.timeouts.probe_s, connect=self.timeouts.connect_s),
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
                verify=self.verify,
                headers=self.headers,
            )
        return self.probe_client

    def mark_down(self, reason: str) -> list[Connection]:
        """Out of rotation now; returns the connections to close (the caller closes them)."""
        self.healthy = False
        if not self.alive:
            return []
        log.error("core %s is down (%s): out of rotation", self.url, reason)
        self.alive = False
        self.down.set()
        self.breaker.trip()
        retired, self.connections = self.connections, []
        return retired

    def mark_up(self) -> None:
        if self.alive:
            return
        log.warning("core %s answers its probes again: back in rotation", self.url)
        self.alive = True
        self.down.clear()
        self.breaker.success()

    @property
    def streams(self) -> int:
        return sum(c.active for c in self.connections)

    async def aclose(self) -> None:
        for c in self.connections:
            await c.aclose()
        if self.probe_client is not None:
            await self.probe_client.aclose()
