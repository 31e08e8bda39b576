"""Logging a background loop's failures without flooding the log.

A loop that polls every few seconds (engine discovery, health probes, metrics polls) and
fails the same way each time would write the same traceback thousands of times an hour; one
stuck on a zero interval wrote seven million lines. ``RepeatLog`` logs a failure in full the
first time, then only how many times it repeated, at most once per ``every_s``; a new kind of
failure, or a recovery, is logged at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


def signature(exc: BaseException) -> str:
    """What makes two failures 'the same': their type and message."""
    return f"{type(exc).__qualname__}: {exc}"


class RepeatLog:
    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        every_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.what = what
        self.every_s = every_s
        self.clock = clock
        self.last: str | None = None  # signature of the failure now repeating
        self.repeats = 0  # times it repeated since it was last logged
        self.total = 0  # times it happened in this run of failures
        self.reported_at = 0.0

    def failed(self, exc: BaseException, *, level: int = logging.ERROR, trace: bool = True) -> None:
        """Record one failure; log it if it is new, or the repeat count if one is due."""
        now, sig = self.clock(), signature(exc)
        if sig != self.last:
            self._flush(now)
            self.last, self.repeats, self.total, self.reported_at = sig, 0, 1, now
            self.logger.log(level, "%s: %s", self.what, sig, exc_info=exc if trace else None)
            return
        self.repeats += 1
        self.total += 1
        if now - self.reported_at >= self.every_s:
            self._flush(now)

    def succeeded(self) -> None:
        """The loop worked again: say how long the failure went on, once."""
        if self.last is None:
            return
        self._flush(self.clock())
        self.logger.warning("%s: recovered after %d failure(s)", self.what, self.total)
        self.last, self.total = None, 0

    def _flush(self, now: float) -> None:
        if self.repeats:
            self.logger.warning(
                "%s: the same failure %d more time(s) in %.0fs (%s)",
                self.what, self.repeats, now - self.reported_at, self.last,
            )  # fmt: skip
        self.repeats, self.reported_at = 0, now
