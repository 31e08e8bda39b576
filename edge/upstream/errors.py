"""How a request to the cores fails: before its first byte (fail over) or mid-stream."""

from __future__ import annotations

import httpx

from shared.errors import ApiError


class CoreUnavailable(Exception):
    """No core could take the request before its first byte (nothing was answered)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason

    def error(self, retry_after_s: int) -> ApiError:
        """The client's answer when nothing can stand in: 503 with Retry-After."""
        return ApiError(
            503,
            f"the core is unavailable ({self.reason}); retry later",
            code="core_unavailable",
            headers={"retry-after": str(retry_after_s)},
        )


class CoreStalled(httpx.ReadTimeout):
    """A stream from a core went silent past its idle deadline, or the core was found
    frozen while the stream waited (an HTTPError: it ends the stream like one)."""
