"""One JSON access-log line per request, edge and core (pure ASGI: no BaseHTTPMiddleware).

The line is written when the response has been sent (for a stream: after its last byte) to
the ``edgecore.access`` logger, as the bare JSON object (its own handler, not the process's
``time level name:`` format):

    {"ts": "...", "service": "edge", "request_id": "...", "trace_id": "...",
     "method": "POST", "path": "/v1/chat/completions", "status": 200,
     "tenant": "t-1f0c...", "tier": "core", "cache": "miss", "degraded": null,
     "ttft_ms": 812.4, "duration_ms": 1630.2}

``tenant`` is a hash of the tenant's name (not its key): lines can be grouped by tenant
without naming it. Prompts and answers are never written here; the edge's ``log_prompts``
setting (off by default) writes a separate, redacted line for those who opt in.
``ttft_ms`` is the time to the first content token of a stream (null for JSON answers).

The app fills the request's record: the edge through its ``Meta`` (which registers itself as
the record's ``source``), the core with ``note()``. Probes and scrapes (``/healthz``,
``/readyz``, ``/metrics``) are not logged.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import json
import logging
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("edgecore.access")

SKIP = frozenset({"/healthz", "/readyz", "/metrics"})

_current: contextvars.ContextVar[AccessRecord | None] = contextvars.ContextVar(
    "edgecore_access", default=None
)


@functools.lru_cache(maxsize=4096)  # a line per request, from a few tenants
def hash_tenant(name: str | None) -> str | None:
    if not name:
        return None
    return "t-" + hashlib.blake2b(name.encode(), digest_size=8).hexdigest()


@dataclass
class AccessRecord:
    method: str
    path: str
    started: float  # perf_counter at arrival
    status: int = 0
    request_id: str | None = None
    source: Any = None  # an object with request_id, tenant, tier, cache, first_token_s, ...
    fields: dict[str, Any] = field(default_factory=dict)

    def line(self, service: str, trace_id: str | None) -> dict[str, Any]:
        src = self.source
        ttft = getattr(src, "first_token_s", None) if src is not None else None
        ttft = self.fields.pop("ttft_s", ttft)
        out: dict[str, Any] = {
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "service": service,
            "request_id": getattr(src, "request_id", None) or self.request_id,
            "trace_id": trace_id,
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "tenant": hash_tenant(getattr(src, "tenant", None)),
            "tier": getattr(src, "tier", None),
            "cache": getattr(src, "cache", None),
            "degraded": getattr(src, "degraded", None),
        }
        tenant = self.fields.pop("tenant", None)
        if tenant is not None:
            out["tenant"] = hash_tenant(tenant)
        out.update(self.fields)
        out["ttft_ms"] = round(ttft * 1000.0, 2) if ttft is not None else None
        out["duration_ms"] = round((time.perf_counter() - self.started) * 1000.0, 2)
        return out


def current() -> AccessRecord | None:
    """The record of the request being handled (None outside the access-log middleware)."""
    return _current.get()


def note(**fields: Any) -> None:
    """Add facts to this request's line (``tenant`` is hashed; ``ttft_s`` becomes ttft_ms)."""
    record = _current.get()
    if record is not None:
        record.fields.update(fields)


def _install_handler() -> None:
    """Bare JSON lines on stderr, unless a handler was configured for this logger."""
    if log.level == logging.NOTSET:
        log.setLevel(logging.INFO)
    if log.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.propagate = False


class AccessLog:
    """Pure ASGI middleware: one JSON line per HTTP request once its response is done."""

    def __init__(self, app: ASGIApp, service: str, skip: frozenset[str] = SKIP) -> None:
        self.app = app
        self.service = service
        self.skip = skip
        _install_handler()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.skip:
            await self.app(scope, receive, send)
            return
        record = AccessRecord(scope["method"], scope["path"], time.perf_counter())
        for name, value in scope.get("headers", ()):
            if name == b"x-request-id":
                record.request_id = value.decode("latin-1")
        token = _current.set(record)

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                record.status = int(message["status"])
                for name, value in message.get("headers", ()):
                    if name.lower() == b"x-request-id":
                        record.request_id = value.decode("latin-1")
            await send(message)

        span = trace.get_current_span().get_span_context()
        trace_id = format(span.trace_id, "032x") if span.is_valid else None
        try:
            await self.app(scope, receive, sending)
        except BaseException:
            record.status = record.status or 500
            raise
        finally:
            _current.reset(token)
            if record.status == 0:  # the client left before any response
                record.status = 499
            try:
                log.info(json.dumps(record.line(self.service, trace_id), separators=(",", ":")))
            except Exception:  # a log line must never fail the request
                logging.getLogger("edgecore").exception("access log line failed")
