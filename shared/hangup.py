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
"""

from __future__ import annotations

import logging

from hypercorn.asyncio import run as hypercorn_run
from hypercorn.asyncio.tcp_server import TCPServer
from hypercorn.events import Event, Updated

log = logging.getLogger("edgecore.serve")


class EndOnHangup(TCPServer):
    _hung_up = False

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
