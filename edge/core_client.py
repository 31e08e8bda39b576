"""The edge's connection to its regional core: HTTP/2 over one pooled httpx client.

``http://`` URLs use prior-knowledge h2c (no upgrade round trip); ``https://`` negotiates h2
by ALPN. Every wait has a deadline: connect, first byte, and idle time between chunks.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from shared.errors import ApiError


class CoreUnavailable(Exception):
    """The core could not be reached or did not answer in time (nothing was sent back)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class CoreClient:
    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout_s: float,
        first_byte_timeout_s: float,
        idle_timeout_s: float,
    ) -> None:
        tls = base_url.startswith("https://")
        self.first_byte_timeout_s = first_byte_timeout_s
        # A non-streamed answer arrives in one piece after generation: its read wait is the
        # first-byte deadline, not the idle one.
        self._unary_timeout = httpx.Timeout(first_byte_timeout_s, connect=connect_timeout_s)
        self.client = httpx.AsyncClient(
            base_url=base_url,
            http1=tls,  # with TLS, ALPN may still fall back to 1.1; without, h2c only
            http2=True,
            timeout=httpx.Timeout(
                idle_timeout_s, connect=connect_timeout_s, pool=connect_timeout_s
            ),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def send(
        self, payload: dict[str, Any], *, request_id: str, stream: bool
    ) -> httpx.Response:
        """POST a chat completion; returns once response headers arrive.

        With ``stream=True`` the body is left open for the caller to iterate and close.
        Raises CoreUnavailable for transport failures and 503s, ApiError for other errors.
        """
        request = self.client.build_request(
            "POST",
            "/v1/chat/completions",
            json=payload,
            headers={"x-request-id": request_id},
            timeout=httpx.USE_CLIENT_DEFAULT if stream else self._unary_timeout,
        )
        try:
            response = await asyncio.wait_for(
                self.client.send(request, stream=stream), self.first_byte_timeout_s
            )
        except TimeoutError:
            raise CoreUnavailable("core-timeout", "no first byte in time") from None
        except httpx.ConnectError as exc:
            raise CoreUnavailable("core-unreachable", str(exc)) from None
        except httpx.HTTPError as exc:
            raise CoreUnavailable("core-error", repr(exc)) from None
        if response.status_code < 400:
            return response
        body = await response.aread()
        await response.aclose()
        if response.status_code in (429, 503):
            reason = "core-saturated" if response.status_code == 429 else "core-unavailable"
            raise CoreUnavailable(reason, f"HTTP {response.status_code}")
        raise _relay_error(response.status_code, body)


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
