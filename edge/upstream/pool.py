"""The edge's connections to its cores: HTTP/2, several cores (regions), failover.

Each core gets a few HTTP/2 connections, each carrying at most ``streams_per_connection``
streams; when all are full another connection opens (httpcore alone would queue on one).
``http://`` URLs use prior-knowledge h2c, ``https://`` negotiates h2 by ALPN.

A request goes to the best core that is healthy and whose breaker allows it: lowest
priority number first, then lowest measured round trip. Before the first byte nothing has
been answered, so a refused connection is retried once (with jitter) and any failure fails
over to the next core. After the first byte there is no failover; a failure mid-stream
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
import ssl
import time
from collections.abc import AsyncGenerator, Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h2.errors
import httpx

from edge.upstream.breaker import CircuitBreaker, State
from edge.upstream.h2_cancel import close_early
from shared import tracing
from shared.errors import ApiError

log = logging.getLogger("edgecore.edge.core")


class CoreUnavailable(Exception):
    """No core could take the request before its first byte (nothing was answered)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class CoreStalled(httpx.ReadTimeout):
    """A stream from a core went silent past its idle deadline, or the core was found
    frozen while the stream waited (an HTTPError: it ends the stream like one)."""


@dataclass
class Timeouts:
    connect_s: float
    first_byte_s: float  # the base deadline for response headers
    idle_s: float  # longest silence on a stream once it started
    first_byte_per_1k_chars_s: float = 0.0  # more time to the first byte for long prompts
    probe_s: float = 2.0  # a health probe's deadline

    def first_byte_for(self, prompt_chars: int) -> float:
        return self.first_byte_s + self.first_byte_per_1k_chars_s * prompt_chars / 1000


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
    healthy: bool = True  # /readyz said 200 (a core without a ready engine answers 503)
    alive: bool = True  # it answers its probes at all; a core that does not gets no requests
    rtt_s: float | None = None
    connections: list[_Connection] = field(default_factory=list)
    # Set while the probe says the core is frozen or gone: pending first-byte waits and
    # stalled streams on it end at once.
    down: asyncio.Event = field(default_factory=asyncio.Event)
    probe_client: httpx.AsyncClient | None = None
    probe_failures: int = 0  # in a row
    probe_successes: int = 0  # in a row

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

    def mark_down(self, reason: str) -> list[_Connection]:
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
            await c.client.aclose()
        if self.probe_client is not None:
            await self.probe_client.aclose()


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

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The response's bytes; CoreStalled after ``idle_s`` without any, or as soon as the
        probe finds the core down while this waits. (httpx's own read timeout is not enough
        on HTTP/2: any stream's data on the connection resets it.)"""
        raw = self.response.aiter_bytes()
        idle_s = self.core.timeouts.idle_s
        down: asyncio.Future[Any] = asyncio.ensure_future(self.core.down.wait())
        pending: asyncio.Future[Any] | None = None
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(anext(raw))
                done, _ = await asyncio.wait(
                    {pending, down}, timeout=idle_s, return_when=asyncio.FIRST_COMPLETED
                )
                if pending in done:
                    try:
                        chunk = pending.result()
                    except StopAsyncIteration:
                        return
                    finally:
                        pending = None
                    yield chunk
                elif down in done:
                    raise CoreStalled("the core stopped answering (its health probe failed)")
                else:
                    raise CoreStalled(f"the core sent nothing for {idle_s:g}s")
        finally:
            down.cancel()
            if pending is not None:
                pending.cancel()


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
        self._unary_timeout = httpx.Timeout(timeouts.first_byte_s, connect=timeouts.connect_s)
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
        deadline = self.timeouts.first_byte_for(prompt_chars(payload))
        for attempt in range(2):
            if core.down.is_set():
                raise CoreUnavailable("core-down", "its health probe failed")
            conn = core.connection()
            request = conn.client.build_request(
                "POST",
                path,
                json=payload,
                headers=headers,
                timeout=httpx.USE_CLIENT_DEFAULT if stream else self._unary_timeout,
                extensions={"trace": _ResetIfAbandoned(conn.client)},
            )
            conn.active += 1
            try:
                response = await _first_byte(
                    conn.client.send(request, stream=stream), core.down, deadline
                )
            except httpx.ConnectError as exc:
                conn.active -= 1
                if attempt == 0:  # nothing was sent: safe to retry once, with jitter
                    await asyncio.sleep(random.uniform(0.05, 0.15))
                    continue
                raise CoreUnavailable("core-unreachable", str(exc)) from None
            except CoreUnavailable:
                conn.active -= 1
                raise
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
                    self._close_later(conn.client)
            return
        core.probe_failures = 0
        core.probe_successes += 1
        core.healthy = r.status_code == 200
        rtt = time.perf_counter() - t
        core.rtt_s = rtt if core.rtt_s is None else 0.8 * core.rtt_s + 0.2 * rtt
        if not core.alive and core.probe_successes >= self.probe_successes:
            core.mark_up()

    def _close_later(self, client: httpx.AsyncClient) -> None:
        """Close a client in the background, bounded: its peer may be frozen."""

        async def close() -> None:
            await asyncio.sleep(0.1)  # let the requests on it see ``down`` and reset first
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.aclose(), 5.0)

        task = asyncio.create_task(close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def probe_forever(self, interval_s: float) -> None:
        """Probe every core on its own schedule (one frozen core does not slow the rest)."""

        async def loop(core: Core) -> None:
            while True:
                with contextlib.suppress(Exception):
                    await self.probe_one(core)
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


class _ResetIfAbandoned:
    """httpx trace hook: a request abandoned before its response headers (the client left,
    the first-byte deadline passed, the core was found frozen) gets its HTTP/2 stream reset.

    httpcore 1.0 forgets such a stream without telling the core (see edge/h2_cancel.py), so
    the core would go on answering nobody: a JSON answer's headers only come with the whole
    answer. Every step is guarded; without the internals the old behaviour remains.
    """

    _STEPS = (
        "http2.send_request_headers.failed",
        "http2.send_request_body.failed",
        "http2.receive_response_headers.failed",
    )

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.stream_id: int | None = None
        self.request: Any = None  # httpcore's request (its write timeout)

    async def __call__(self, name: str, info: dict[str, Any]) -> None:
        if name == "http2.send_request_headers.started":
            self.stream_id, self.request = info.get("stream_id"), info.get("request")
        elif name in self._STEPS and isinstance(info.get("exception"), asyncio.CancelledError):
            await self._reset()

    async def _reset(self) -> None:
        stream_id = self.stream_id
        try:
            pool: Any = getattr(self.client, "_transport", None)
            for pooled in getattr(getattr(pool, "_pool", None), "connections", []):
                conn: Any = getattr(pooled, "_connection", None)
                if conn is None or stream_id not in getattr(conn, "_events", {}):
                    continue
                h2_stream = conn._h2_state.streams.get(stream_id)
                if h2_stream is not None and not h2_stream.closed:
                    conn._h2_state.reset_stream(stream_id, error_code=h2.errors.ErrorCodes.CANCEL)
                    await asyncio.shield(conn._write_outgoing_data(self.request))
                return
        except Exception as exc:  # never let cleanup fail the request path
            log.debug("could not reset HTTP/2 stream %s: %r", stream_id, exc)


async def _first_byte(
    send: Awaitable[httpx.Response], down: asyncio.Event, deadline_s: float
) -> httpx.Response:
    """``send``'s response headers, or CoreUnavailable when the deadline passes or the core
    is found down first (a frozen core would otherwise hold the request to the deadline)."""
    task = asyncio.ensure_future(send)
    dead: asyncio.Future[Any] = asyncio.ensure_future(down.wait())
    try:
        done, _ = await asyncio.wait(
            {task, dead}, timeout=deadline_s, return_when=asyncio.FIRST_COMPLETED
        )
    except BaseException:
        _abandon(task)
        raise
    finally:
        dead.cancel()
    if task in done:
        return task.result()
    _abandon(task)
    if down.is_set():
        raise CoreUnavailable("core-down", "its health probe failed while we waited")
    raise CoreUnavailable("core-timeout", f"no first byte in {deadline_s:g}s")


def _abandon(task: asyncio.Future[httpx.Response]) -> None:
    """Stop waiting for ``task``; close its response if it came anyway."""

    def close_late(done: asyncio.Future[httpx.Response]) -> None:
        if not done.cancelled() and done.exception() is None:
            late = asyncio.ensure_future(close_early(done.result()))
            _LATE.add(late)
            late.add_done_callback(_LATE.discard)

    task.add_done_callback(close_late)
    task.cancel()


_LATE: set[asyncio.Future[None]] = set()  # closes in flight (a strong reference)


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
