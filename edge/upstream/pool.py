"""The edge's connections to its cores: HTTP/2, several cores (regions), failover.

Each core gets a few HTTP/2 connections, each carrying at most ``streams_per_connection``
streams; when all are full another connection opens (httpcore alone would queue on one).
``http://`` URLs use prior-knowledge h2c, ``https://`` negotiates h2 by ALPN.

A request goes to the best core that is healthy and whose breaker allows it: lowest
priority number first, then lowest measured round trip. Before the first byte nothing has
been answered, so a refused connection is retried once (with jitter), a connection that
ends first (a GOAWAY, a closed socket) is retried once on a fresh one, and any other
failure fails over to the next core. After the first byte there is no failover; a failure mid-stream
counts against the core's breaker, a client that cancels does not.

A frozen core (its socket accepts, nothing answers) is found by the health probe: every
``probe_interval_s`` each core's ``/readyz`` is asked on a connection of its own, with a
``probe_s`` deadline. ``probe_failures`` failures in a row take the core out of rotation at
once: its breaker opens, its ``down`` event is set, which ends every wait for a first byte
(the request fails over or degrades) and every stalled stream on it (an SSE error event),
and its pooled connections are closed (the core aborts what it had of ours when it wakes).
``probe_successes`` answers in a row bring it back. A first byte may take
``first_byte_s + first_byte_per_1k_chars_s`` per 1000 prompt characters (long prefills),
a stream may be silent ``idle_s`` (the core sends comments while its engine prefills).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from pathlib import Path
from typing import Any

import httpx

from edge.settings import CoreSpec, UpstreamSettings
from edge.upstream.breaker import CircuitBreaker, State
from edge.upstream.cores import Connection, Core, Timeouts, prompt_chars, tls_context
from edge.upstream.errors import CoreStalled, CoreUnavailable
from edge.upstream.first_byte import ResetIfAbandoned, Waited, first_byte
from edge.upstream.stream import Upstream
from shared import tracing
from shared.errors import ApiError
from shared.repeats import RepeatLog

# The names the edge imports from here (the request path, the tiers, the app).
__all__ = ["CorePool", "CoreStalled", "CoreUnavailable", "Timeouts", "Upstream", "prompt_chars"]

log = logging.getLogger("edgecore.edge.core")


class CorePool:
    @classmethod
    def configured(cls, cores: list[CoreSpec], s: UpstreamSettings) -> CorePool:
        """The pool the settings' core section describes (edge.settings)."""
        timeouts = Timeouts(
            connect_s=s.connect_timeout_s, first_byte_s=s.first_byte_timeout_s,
            idle_s=s.idle_timeout_s, first_byte_per_1k_chars_s=s.first_byte_per_1k_chars_s,
            probe_s=s.probe_timeout_s, unary_per_token_s=s.unary_per_token_s,
        )  # fmt: skip
        certs = (s.client_certfile, s.client_keyfile)
        return cls(
            [(c.url, c.priority) for c in cores],
            timeouts=timeouts,
            streams_per_connection=s.streams_per_connection,
            max_connections=s.max_connections,
            breaker_threshold=s.breaker_threshold,
            breaker_cooldown_s=s.breaker_cooldown_s,
            probe_failures=s.probe_failures,
            probe_successes=s.probe_successes,
            ca_file=s.ca_file,
            token=s.token.get_secret_value() if s.token else None,
            client_cert=(certs[0], certs[1]) if certs[0] and certs[1] else None,
        )

    def __init__(
        self,
        cores: list[tuple[str, int]],
        *,
        timeouts: Timeouts,
        streams_per_connection: int = 100,
        max_connections: int = 4,
        breaker_threshold: int = 3,
        breaker_cooldown_s: float = 10.0,
        probe_failures: int = 1,
        probe_successes: int = 2,
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
        self.probe_failures = probe_failures
        self.probe_successes = probe_successes
        self._closing: set[asyncio.Task[None]] = set()

    def candidates(self) -> list[Core]:
        ranked = sorted(self.cores, key=lambda c: (c.priority, c.rtt_s or 0.0))
        # A core that does not answer its probes is skipped (a request would only wait).
        closed = [c for c in ranked if c.alive and c.breaker.state is not State.OPEN]
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
        last = CoreUnavailable("core-unreachable", "every core is down or its breaker is open")
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
        deadline = self.timeouts.first_byte_for(prompt_chars(payload), payload)
        for attempt in range(2):
            if core.down.is_set():
                raise CoreUnavailable("core-down", "its health probe failed")
            conn = core.connection()
            # A JSON answer's headers come only with the whole answer: its reads may wait up
            # to the first-byte deadline. The client's default (the idle timeout, 60 s) cut
            # them first, whatever the deadline, since the tiers read every answer as a
            # stream. A stream's headers come at once and keepalives follow: idle it is.
            unary = not payload.get("stream")
            trace = Waited(ResetIfAbandoned(conn.transport))
            timeout = (
                httpx.Timeout(deadline, connect=self.timeouts.connect_s).as_dict()
                if unary
                else conn.timeout
            )
            request = core.request(path, payload, headers, {"trace": trace, "timeout": timeout})
            conn.active += 1
            try:
                response = await first_byte(conn.send(request, stream=stream), core.down, deadline)
            except httpx.ConnectError as exc:
                conn.active -= 1
                if attempt == 0:  # nothing was sent: safe to retry once, with jitter
                    await asyncio.sleep(random.uniform(0.05, 0.15))
                    continue
                raise CoreUnavailable("core-unreachable", str(exc)) from None
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                conn.active -= 1
                # The connection ended before any answer: an HTTP/2 GOAWAY (servers and
                # proxies rotate connections) or a closed socket. Nothing was answered, so
                # once more on a fresh connection before it counts against the core.
                if attempt == 0:
                    continue
                raise CoreUnavailable("core-error", repr(exc)) from None
            except CoreUnavailable:
                conn.active -= 1
                raise
            except httpx.HTTPError as exc:
                conn.active -= 1
                raise CoreUnavailable("core-error", repr(exc)) from None
            except BaseException:
                conn.active -= 1
                raise
            upstream = Upstream(response, core, conn, waited_s=trace.seconds)
            if response.status_code < 400:
                return upstream
            body = await response.aread()
            await upstream.close()
            if response.status_code in (429, 503):
                reason = "core-saturated" if response.status_code == 429 else "core-unavailable"
                raise CoreUnavailable(reason, f"HTTP {response.status_code}")
            core.breaker.success()  # it answered: the core works, the request was bad
            raise relay_error(response.status_code, body)
        raise CoreUnavailable("core-unreachable", "retries exhausted")  # pragma: no cover

    async def probe(self) -> None:
        """One round of health probes: liveness, readiness and round trip of every core."""
        await asyncio.gather(*(self.probe_one(c) for c in self.cores))

    async def probe_one(self, core: Core) -> None:
        """Ask ``/readyz`` within ``probe_s``. Any answer means alive (200: healthy too); no
        answer ``probe_failures`` times in a row takes the core down, ``probe_successes``
        answers in a row bring it back."""
        client = core.probe_connection()
        t = time.perf_counter()
        try:
            r = await client.get("/readyz")
        except Exception as exc:  # a timeout, a refused or broken connection
            core.probe_successes = 0
            core.probe_failures += 1
            core.healthy = False
            # The next probe opens a fresh connection: this one may be wedged for good.
            core.probe_client = None
            self._close_later(client)
            if core.probe_failures >= self.probe_failures:
                reason = f"no answer to its health probe in {core.timeouts.probe_s:g}s"
                if not isinstance(exc, httpx.TimeoutException):
                    reason = f"health probe failed: {exc!r}"
                for conn in core.mark_down(reason):
                    self._close_later(conn)
            return
        core.probe_failures = 0
        core.probe_successes += 1
        core.healthy = r.status_code == 200
        rtt = time.perf_counter() - t
        core.rtt_s = rtt if core.rtt_s is None else 0.8 * core.rtt_s + 0.2 * rtt
        if not core.alive and core.probe_successes >= self.probe_successes:
            core.mark_up()

    def _close_later(self, closable: httpx.AsyncClient | Connection) -> None:
        """Close a probe client or a connection in the background, bounded: its peer may be
        frozen."""

        async def close() -> None:
            await asyncio.sleep(0.1)  # let the requests on it see ``down`` and reset first
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5.0):
                    await closable.aclose()

        task = asyncio.create_task(close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def probe_forever(self, interval_s: float) -> None:
        """Probe every core on its own schedule (one frozen core does not slow the rest)."""

        async def loop(core: Core) -> None:
            # probe_one handles the core's own failures; anything else is a bug, logged once
            # and then counted, never ending the loop.
            bugs = RepeatLog(log, f"health probe of {core.url} failed")
            while True:
                try:
                    await self.probe_one(core)
                    bugs.succeeded()
                except Exception as exc:
                    bugs.failed(exc)
                await asyncio.sleep(interval_s)

        await asyncio.gather(*(loop(c) for c in self.cores))

    def status(self) -> list[dict[str, Any]]:
        return [
            {
                "url": c.url,
                "priority": c.priority,
                "healthy": c.healthy,
                "alive": c.alive,
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
        for task in list(self._closing):
            task.cancel()


def relay_error(status: int, body: bytes) -> ApiError:
    """The core's own 4xx/5xx, passed on with its message (vLLM's errors are OpenAI-shaped)."""
    message = f"core returned HTTP {status}"
    try:
        data = httpx.Response(status, content=body).json()
        err = data.get("error", data) if isinstance(data, dict) else {}
        message = str(err.get("message") or message)
    except ValueError:
        pass
    return ApiError(status if 400 <= status < 500 else 502, message, code="upstream_error")
