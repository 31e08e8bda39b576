"""The edge's connections to its cores: HTTP/2, several cores (regions), failover.

Each core gets a few HTTP/2 connections, each carrying at most ``streams_per_connection``
streams; when all are full another connection opens (httpcore alone would queue on one).
``http://`` URLs use prior-knowledge h2c, ``https://`` negotiates h2 by ALPN.

A request goes to the best core that is healthy and whose breaker allows it: lowest
priority number first, then lowest measured round trip. Before the first byte nothing has
been answered, so a refused connection is retried once (with jitter) and any failure fails
over to the next core. After the first byte there is no failover; a failure mid-stream
counts against the core's breaker, a client that cancels does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from edge.breaker import CircuitBreaker, State
from edge.h2_cancel import close_early
from shared import tracing
from shared.errors import ApiError

log = logging.getLogger("edgecore.edge.core")


class CoreUnavailable(Exception):
    """No core could take the request before its first byte (nothing was answered)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass
class Timeouts:
    connect_s: float
    first_byte_s: float
    idle_s: float


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
class _Connection:
    client: httpx.AsyncClient
    active: int = 0


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
    healthy: bool = True
    rtt_s: float | None = None
    connections: list[_Connection] = field(default_factory=list)

    def _new_connection(self) -> _Connection:
        t = self.timeouts
        client = httpx.AsyncClient(
            base_url=self.url,
            http1=self.url.startswith("https://"),  # TLS: ALPN may still pick 1.1; else h2c
            http2=True,
            timeout=httpx.Timeout(t.idle_s, connect=t.connect_s, pool=t.connect_s),
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            verify=self.verify,
            headers=self.headers,  # the core's edge token, on every request and probe
        )
        conn = _Connection(client)
        self.connections.append(conn)
        return conn

    def connection(self) -> _Connection:
        open_ = [c for c in self.connections if c.active < self.streams_per_connection]
        if open_:
            return min(open_, key=lambda c: c.active)
        if len(self.connections) < self.max_connections:
            return self._new_connection()
        return min(self.connections, key=lambda c: c.active)  # all full: queue on the least busy

    @property
    def streams(self) -> int:
        return sum(c.active for c in self.connections)

    async def aclose(self) -> None:
        for c in self.connections:
            await c.client.aclose()


@dataclass
class Upstream:
    """A response from a core, with the bookkeeping to release its stream."""

    response: httpx.Response
    core: Core
    connection: _Connection
    _released: bool = False

    async def close(self) -> None:
        """Close (resetting the HTTP/2 stream if unfinished) and release the slot; idempotent."""
        if not self._released:
            self._released = True
            self.connection.active -= 1
        await close_early(self.response)

    def succeeded(self) -> None:
        self.core.breaker.success()

    def failed(self) -> None:
        """The core failed mid-answer (not a client cancel)."""
        self.core.breaker.failure()


class CorePool:
    def __init__(
        self,
        cores: list[tuple[str, int]],
        *,
        timeouts: Timeouts,
        streams_per_connection: int = 100,
        max_connections: int = 4,
        breaker_threshold: int = 3,
        breaker_cooldown_s: float = 10.0,
        ca_file: Path | None = None,
        token: str | None = None,
        client_cert: tuple[Path, Path] | None = None,
    ) -> None:
        self.timeouts = timeouts
        verify = tls_context(ca_file, client_cert)
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self.cores = [
            Core(url.rstrip("/"), priority, CircuitBreaker(breaker_threshold, breaker_cooldown_s),
                 streams_per_connection, max_connections, timeouts, verify, dict(headers))
            for url, priority in cores
        ]  # fmt: skip
        self.failovers = 0
        self._unary_timeout = httpx.Timeout(timeouts.first_byte_s, connect=timeouts.connect_s)

    def candidates(self) -> list[Core]:
        ranked = sorted(self.cores, key=lambda c: (c.priority, c.rtt_s or 0.0))
        closed = [c for c in ranked if c.breaker.state is not State.OPEN]
        # Unhealthy cores are a last resort: a probe can be wrong, a request will tell.
        return [c for c in closed if c.healthy] + [c for c in closed if not c.healthy]

    async def send(
        self,
        payload: dict[str, Any],
        *,
        request_id: str,
        stream: bool,
        priority: str | None = None,
        tenant: str | None = None,
        path: str = "/v1/chat/completions",
    ) -> Upstream:
        """POST a chat completion (or ``path``: completions, embeddings, responses) to the
        best core; returns once response headers arrive.

        Raises CoreUnavailable when every core failed before its first byte, ApiError for
        the core's own 4xx answers (which no other core would answer differently).
        """
        last = CoreUnavailable("core-unreachable", "no core configured")
        tried = 0
        for core in self.candidates():
            if not core.breaker.allow():
                continue
            if tried:
                self.failovers += 1
            tried += 1
            try:
                return await self._send_to(
                    core, payload, request_id, stream, priority, tenant, path
                )
            except CoreUnavailable as exc:
                core.breaker.failure()
                log.warning("core %s: %s", core.url, exc)
                last = exc
        raise last

    async def _send_to(
        self,
        core: Core,
        payload: dict[str, Any],
        request_id: str,
        stream: bool,
        priority: str | None = None,
        tenant: str | None = None,
        path: str = "/v1/chat/completions",
    ) -> Upstream:
        headers = {"x-request-id": request_id}
        if priority:
            headers["x-edgecore-priority"] = priority  # the core's admission class
        if tenant:
            headers["x-edgecore-tenant"] = tenant  # the core may class whole tenants as batch
        tracing.inject(headers)  # traceparent: the core's spans join this request's trace
        for attempt in range(2):
            conn = core.connection()
            request = conn.client.build_request(
                "POST",
                path,
                json=payload,
                headers=headers,
                timeout=httpx.USE_CLIENT_DEFAULT if stream else self._unary_timeout,
            )
            conn.active += 1
            try:
                response = await asyncio.wait_for(
                    conn.client.send(request, stream=stream), self.timeouts.first_byte_s
                )
            except httpx.ConnectError as exc:
                conn.active -= 1
                if attempt == 0:  # nothing was sent: safe to retry once, with jitter
                    await asyncio.sleep(random.uniform(0.05, 0.15))
                    continue
                raise CoreUnavailable("core-unreachable", str(exc)) from None
            except TimeoutError:
                conn.active -= 1
                raise CoreUnavailable("core-timeout", "no first byte in time") from None
            except httpx.HTTPError as exc:
                conn.active -= 1
                raise CoreUnavailable("core-error", repr(exc)) from None
            except BaseException:
                conn.active -= 1
                raise
            upstream = Upstream(response, core, conn)
            if response.status_code < 400:
                return upstream
            body = await response.aread()
            await upstream.close()
            if response.status_code in (429, 503):
                reason = "core-saturated" if response.status_code == 429 else "core-unavailable"
                raise CoreUnavailable(reason, f"HTTP {response.status_code}")
            core.breaker.success()  # it answered: the core works, the request was bad
            raise _relay_error(response.status_code, body)
        raise CoreUnavailable("core-unreachable", "retries exhausted")  # pragma: no cover

    async def probe(self) -> None:
        """One round of health probes: readiness and round-trip time of every core."""

        async def one(core: Core) -> None:
            conn = core.connection()
            t = time.perf_counter()
            try:
                r = await conn.client.get("/readyz", timeout=self.timeouts.connect_s)
                core.healthy = r.status_code == 200
                rtt = time.perf_counter() - t
                core.rtt_s = rtt if core.rtt_s is None else 0.8 * core.rtt_s + 0.2 * rtt
            except httpx.HTTPError:
                core.healthy = False

        await asyncio.gather(*(one(c) for c in self.cores))

    async def probe_forever(self, interval_s: float) -> None:
        while True:
            with contextlib.suppress(Exception):
                await self.probe()
            await asyncio.sleep(interval_s)

    def status(self) -> list[dict[str, Any]]:
        return [
            {
                "url": c.url,
                "priority": c.priority,
                "healthy": c.healthy,
                "breaker": c.breaker.state.name.lower(),
                "rtt_ms": round(c.rtt_s * 1000, 2) if c.rtt_s else None,
                "streams": c.streams,
                "connections": len(c.connections),
            }
            for c in self.cores
        ]

    async def aclose(self) -> None:
        for core in self.cores:
            await core.aclose()


def _relay_error(status: int, body: bytes) -> ApiError:
    """The core's own 4xx/5xx, passed on with its message (vLLM's errors are OpenAI-shaped)."""
    message = f"core returned HTTP {status}"
    try:
        data = httpx.Response(status, content=body).json()
        err = data.get("error", data) if isinstance(data, dict) else {}
        message = str(err.get("message") or message)
    except ValueError:
        pass
    return ApiError(status if 400 <= status < 500 else 502, message, code="upstream_error")
