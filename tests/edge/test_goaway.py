"""A core that closes its HTTP/2 connection with GOAWAY before answering loses no request.

A GOAWAY names the last stream the server processed; later streams were never seen, so the
edge may send them again. Servers and proxies rotate connections this way (nginx's
keepalive_requests, Envoy's max_requests_per_connection). The server here is h2 on a raw
socket: every connection's first request gets GOAWAY(last_stream_id=0); the next
connection's are answered.
"""

from __future__ import annotations

import asyncio

import h2.config
import h2.connection
import h2.events

from edge.upstream.breaker import State
from edge.upstream.pool import CorePool, Timeouts


class GoawayFirst:
    def __init__(self) -> None:
        self.connections = 0
        self.answered = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        rotate = self.connections % 2 == 1  # odd connections: GOAWAY at the first request
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        try:
            while data := await reader.read(65536):
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived) and rotate:
                        conn.close_connection(last_stream_id=0)  # nothing was processed
                        writer.write(conn.data_to_send())
                        await writer.drain()
                        writer.close()
                        return
                    if isinstance(event, h2.events.StreamEnded):
                        sid = event.stream_id
                        conn.send_headers(sid, [(":status", "200"),
                                                ("content-type", "text/event-stream")])  # fmt: skip
                        conn.send_data(sid, b"data: [DONE]\n\n", end_stream=True)
                        self.answered += 1
                    if isinstance(event, h2.events.DataReceived):
                        conn.acknowledge_received_data(
                            event.flow_controlled_length, event.stream_id
                        )
                writer.write(conn.data_to_send())
                await writer.drain()
        finally:
            writer.close()


def test_a_goaway_before_the_first_byte_is_retried_on_a_fresh_connection() -> None:
    server = GoawayFirst()

    async def main() -> tuple[int, State]:
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        timeouts = Timeouts(connect_s=2, first_byte_s=5, idle_s=5)
        pool = CorePool([(f"http://127.0.0.1:{port}", 0)], timeouts=timeouts, max_connections=1)
        ok = 0
        try:
            for i in range(6):
                payload = {"model": "m", "stream": True, "messages": []}
                upstream = await pool.send(payload, request_id=f"r{i}", stream=True)
                body = b"".join([c async for c in upstream.chunks()])
                assert body == b"data: [DONE]\n\n"
                await upstream.close()
                ok += 1
            return ok, pool.cores[0].breaker.state
        finally:
            await pool.aclose()
            listener.close()

    ok, breaker = asyncio.run(main())
    assert ok == 6 and breaker is State.CLOSED
    assert server.connections >= 2  # the GOAWAY happened, and a fresh connection answered
