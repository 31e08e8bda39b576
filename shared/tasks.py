"""Stopping background tasks without losing the caller's own cancellation.

The usual ``task.cancel(); with suppress(CancelledError): await task`` swallows a cancel
aimed at the *caller* while it waits (a shutdown that is itself being cancelled would carry
on as if nothing happened). ``asyncio.wait`` never raises the awaited task's outcome and
never cancels it, so the caller's cancel is the only CancelledError that can come out.

No code here uses ``asyncio.wait_for``: on Python 3.11 it drops a cancel that lands as the
awaited call completes (CPython gh-86296); ``asyncio.timeout`` does not.
``tests/shared/test_cancellation.py`` keeps it that way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("edgecore.tasks")


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any] | None]) -> None:
    """Cancel ``tasks`` and wait until every one has ended; log those that failed.

    A cancel of the caller while it waits propagates (the tasks are still cancelled)."""
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    if not live:
        return
    await asyncio.wait(live)
    for task in live:
        if not task.cancelled() and task.exception() is not None:
            log.warning("background task %s ended with %r", _name(task), task.exception())


def _name(task: asyncio.Future[Any]) -> str:
    return task.get_name() if isinstance(task, asyncio.Task) else repr(task)
