"""Server-sent events framing for OpenAI streams: pure encode and an incremental decoder."""

from __future__ import annotations

import codecs
import json
from typing import Any

DONE = b"data: [DONE]\n\n"
KEEPALIVE = b": keepalive\n\n"

# Headers every stream carries: proxies (nginx and friends) must not buffer it.
STREAM_HEADERS = {
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
}


def encode(data: dict[str, Any]) -> bytes:
    """One ``data:`` event holding a JSON object."""
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


class SSEDecoder:
    """Incremental decoder: feed raw bytes in any split, get complete ``data`` payloads.

    Comment lines (``: ...``) and fields other than ``data`` are ignored; multi-line data is
    joined with ``\\n``; CRLF and CR line endings are accepted, as the SSE spec requires.
    """

    def __init__(self) -> None:
        self._buf = ""
        self._data: list[str] = []
        self._pending_cr = False
        # Incremental: a multi-byte character split across network chunks stays whole.
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, chunk: bytes | str) -> list[str]:
        text = self._utf8.decode(chunk) if isinstance(chunk, bytes) else chunk
        if not text:  # an empty read (or half a character) must not forget a pending CR
            return []
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF split across chunks
        self._pending_cr = text.endswith("\r")
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        # One split per chunk, not a slice of the buffer per line: this runs for every
        # chunk a relay forwards.
        lines = (self._buf + text).split("\n")
        self._buf = lines.pop()  # an unfinished line waits for the next chunk
        events: list[str] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
            elif line.startswith("data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(" ") else value)
            elif line == "data":
                self._data.append("")
            # comments (":...") and other fields are ignored
        return events

    def close(self) -> list[str]:
        """Flush an event left without its closing blank line (a cut stream)."""
        tail = self.feed("\n\n") if self._buf or self._data else []
        return tail
