"""Request-body helpers shared by both services: bounded reads and strict JSON objects."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from starlette.requests import Request

from shared.errors import ApiError


async def read_body(request: Request, limit: int, timeout: float = 30.0) -> bytes:
    """Read the body, refusing (413) as soon as it exceeds ``limit`` bytes, and (408) a
    client that takes longer than ``timeout`` seconds to send it.

    A declared Content-Length over the limit is refused before reading anything.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            too_big = int(declared) > limit
        except ValueError:
            raise ApiError(400, "invalid Content-Length header", code="invalid_header") from None
        if too_big:
            raise ApiError(413, f"request body exceeds {limit} bytes", code="body_too_large")

    async def read() -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, f"request body exceeds {limit} bytes", code="body_too_large")
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        async with asyncio.timeout(timeout):
            return await read()
    except TimeoutError:
        raise ApiError(408, "request body not received in time", code="body_timeout") from None


def json_object(body: bytes) -> dict[str, Any]:
    """Decode a UTF-8 JSON object or raise a 400 that says what is wrong."""
    if not body:
        raise ApiError(400, "request body is empty; expected a JSON object", code="invalid_json")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "request body is not valid UTF-8", code="invalid_encoding") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ApiError(
            400,
            f"request body is not valid JSON: {exc.msg} at position {exc.pos}",
            code="invalid_json",
        ) from None
    if not isinstance(data, dict):
        raise ApiError(400, "request body must be a JSON object", code="invalid_json")
    # JSON may escape lone UTF-16 surrogates ("\ud800") that no UTF-8 text can hold; they
    # would fail later, deep in a tokenizer. The regex keeps the full check off the hot path.
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(
                400,
                "request body contains an invalid unicode escape (lone surrogate)",
                code="invalid_encoding",
            ) from None
    return data


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def request_id(request: Request, generated: str) -> str:
    """The client's ``x-request-id`` if it is short and printable, else ours."""
    given = request.headers.get("x-request-id", "")
    if 0 < len(given) <= 128 and given.isascii() and given.isprintable():
        return given
    return generated
