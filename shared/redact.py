"""Redaction for the opt-in prompt log: no e-mail addresses, numbers or long texts."""

from __future__ import annotations

import re

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
_NUMBER = re.compile(r"\d[\d -]{3,}\d")  # phone, card and account numbers
_SECRET = re.compile(r"\b(sk|ec|key|tok)[-_][A-Za-z0-9_-]{8,}\b", re.I)


def redact(text: str, limit: int = 200) -> str:
    text = _EMAIL.sub("<email>", text)
    text = _SECRET.sub("<secret>", text)
    text = _NUMBER.sub("<number>", text)
    return text if len(text) <= limit else text[:limit] + f"... (+{len(text) - limit} chars)"
