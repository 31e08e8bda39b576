"""End a server connection when its client hangs up, not a keep-alive timeout later.

Hypercorn 0.18 keeps a connection's socket open after its client closed it while idle: the
read loop ends on EOF, but the keep-alive timer is a task in the connection's task group,
and the group waits for it, so the socket sits in CLOSE_WAIT for ``keep_alive_timeout``
(75 s here; measured: with a 4 s timeout, 21 such sockets went 2.5-4.5 s after their
clients closed them). An edge behind a load balancer or with many short-lived clients would
hold one file descriptor per closed connection for 75 s, and run out at a 1,024 limit.
The timeout itself must stay long: a server behind a balancer keeps idle connections longer
than the balancer does, and the edge's HTTP/2 connections to a core live between bursts.

So once nothing more can be read, the keep-alive timer stops and is never restarted: the
connection ends as soon as the work it still carries has ended (Hypercorn already tells
that work's app the client is gone). Hypercorn's runner builds its
``TCPServer`` by name, so ``install`` swaps in the subclass there; it does so only for the
internals it was written against, and otherwise leaves Hypercorn as it is.

The same connection class also stamps when each read arrived (``received``), before
Hypercorn parses it: the ASGI app's task for a request is spawned while that read is
handled, so it inherits the stamp with its context, and the edge's overhead figure counts
from the bytes' arrival, Hypercorn's parsing and the wait for the event loop included.
"""

from __future__ import annotations

import contextvars
import logging
import time
from typing import Any

from hypercorn.asyncio import run as hypercorn_run
from hypercorn.asyncio.tcp_server import TCPServer
from hypercorn.events import Event, RawData, Updated

log = logging.getLogger("edgecore.serve")

_received: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "edgecore_received", default=None
)


def received() -> float | None:
    """``perf_counter`` when the read that completed this request's headers arrived (for
    most requests their first and only read); None when it was not served through
    ``EndOnHangup`` (an in-process test client, another server)."""
    return _received.get()


class _Stamped:
    """Hypercorn's protocol for one connection, stamping each read before handling it."""

    def __init__(self, protocol: Any) -> None:
        self.protocol = protocol

    async def initiate(self) -> None:
        await self.protocol.initiate()

    async def handle(self, event: Event) -> None:
        if isinstance(event, RawData):
            _received.set(time.perf_counter())
        await self.protocol.handle(event)


class EndOnHangup(TCPServer):
    _hung_up = False

    # ``TCPServer.run`` assigns its protocol here; the app tasks it spawns see the stamp.
    @property
    def protocol(self) -> Any:
        return self._protocol

    @protocol.setter
    def protocol(self, value: Any) -> None:
        self._protocol = _Stamped(value)

    async def _read_data(self) -> None:
        await super()._read_data()  # returns on EOF or a read error
        self._hung_up = True
        await self.idle_task.stop()

    async def protocol_send(self, event: Event) -> None:
        if self._hung_up and isinstance(event, Updated) and event.idle:
            return  # nothing more can arrive: no keep-alive wait
        await super().protocol_send(event)


def _fits(server: type[TCPServer]) -> bool:
    """The internals ``EndOnHangup`` relies on are there (checked, not assumed, per version)."""
    init = getattr(server.__init__, "__code__", None)
    return (
        callable(getattr(server, "_read_data", None))
        and callable(getattr(server, "protocol_send", None))
        and init is not None
        and "idle_task" in init.co_names
        and "protocol" in getattr(server.run, "__code__", init).co_names
    )


def install() -> bool:
    """Use ``EndOnHangup`` for every connection Hypercorn's asyncio runner accepts.

    Idempotent; returns whether it is in place."""
    current = getattr(hypercorn_run, "TCPServer", None)
    if current is EndOnHangup:
        return True
    if current is not TCPServer or not _fits(TCPServer):
        log.warning("hypercorn's TCPServer is not the one edgecore patches: closed idle "
                    "connections stay open until keep_alive_timeout")  # fmt: skip
        return False
    hypercorn_run.TCPServer = EndOnHangup  # type: ignore[attr-defined]
    return True
