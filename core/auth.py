"""Who may call the core: edges with the shared bearer token (``/v1/*``), operators with the
admin key (``/admin/*``). Probes (``/healthz``, ``/readyz``) and ``/metrics`` stay open for
load balancers and Prometheus; the network policy limits who reaches them.

A pure ASGI middleware (no BaseHTTPMiddleware): nothing is buffered, streams pass as they
are. mTLS is the transport's job (Hypercorn's ``ca_certs`` + ``verify_mode``,
``shared/serve.py``); the token still applies on top of it.
"""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Receive, Scope, Send

from shared.errors import error_body


def bearer(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else None
    return None


def token_ok(given: bytes | None, expected: bytes) -> bool:
    # Constant time: the comparison must not tell an attacker how much of a guess was right.
    return given is not None and hmac.compare_digest(given, expected)


class CoreAuth:
    def __init__(self, app: ASGIApp, token: str | None, admin_key: str | None) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.admin_key = admin_key.encode() if admin_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        given = bearer(scope["headers"])
        if path.startswith("/admin"):
            if self.admin_key is None:
                await _reply(send, 404, "no admin API: EDGECORE_CORE_ADMIN_KEY is not set",
                             "not_found")  # fmt: skip
                return
            if not token_ok(given, self.admin_key):
                await _reply(send, 401, "admin key missing or wrong", "invalid_admin_key")
                return
        elif path.startswith("/v1/") and self.token is not None:
            if not token_ok(given, self.token):
                await _reply(send, 401, "edge token missing or wrong", "invalid_api_key")
                return
        await self.app(scope, receive, send)


async def _reply(send: Send, status: int, message: str, code: str) -> None:
    body = json.dumps(error_body(status, message, code=code)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="edgecore-core"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
