"""``shared.streaming.EventStreamResponse``: streamed while listening for the client's
disconnect (one watcher task instead of Starlette's task group), its first event carrying
late headers, and its cleanup always run. Pure ASGI calls, no server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from starlette.background import BackgroundTask

from shared.streaming import EventStreamResponse

SCOPE = {"type": "http", "asgi": {"spec_version": "2.1"}}


def run(test: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(10):
            await test()

    asyncio.run(bounded())


class Client:
    """An ASGI peer: records what was sent; ``leave()`` sends the disconnect."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        await asyncio.sleep(0)  # a real server's send yields to the loop

    def leave(self) -> None:
        self.gone.set()


def endless(closed: asyncio.Event) -> AsyncIterator[bytes]:
    async def events() -> AsyncIterator[bytes]:
        try:
            while True:
                yield b"data: {}\n\n"
                await asyncio.sleep(0.005)
        finally:
            closed.set()

    return events()


def test_a_client_that_leaves_stops_the_stream_quietly_and_the_cleanup_runs() -> None:
    async def test() -> None:
        client, closed, released, background = Client(), asyncio.Event(), [], []

        async def on_close() -> None:
            released.append(True)

        async def after() -> None:
            background.append(True)

        response = EventStreamResponse(endless(closed), on_close=on_close)
        response.background = BackgroundTask(after)
        serving = asyncio.ensure_future(response(SCOPE, client.receive, client.send))
        await asyncio.sleep(0.03)
        client.leave()
        await serving  # returns normally: a client leaving is no error
        assert closed.is_set() and released == [True] and background == [True]

    run(test)


def test_a_cancel_from_outside_still_propagates_after_the_cleanup() -> None:
    """A server shutting down cancels the task: that cancel is not mistaken for the client."""

    async def test() -> None:
        client, closed = Client(), asyncio.Event()
        serving = asyncio.ensure_future(
            EventStreamResponse(endless(closed))(SCOPE, client.receive, client.send)
        )
        await asyncio.sleep(0.02)
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serving
        assert closed.is_set()

    run(test)


def test_a_disconnect_after_the_end_cancels_nothing() -> None:
    """The disconnect that follows a finished stream (the client closing) must not cancel
    the background work that runs after it."""

    async def test() -> None:
        client, done = Client(), []

        async def events() -> AsyncIterator[bytes]:
            yield b"data: [DONE]\n\n"
            client.leave()  # the client closes as soon as it has read the end

        async def after() -> None:
            await asyncio.sleep(0.02)  # an await the late cancel would hit
            done.append(True)

        response = EventStreamResponse(events())
        response.background = BackgroundTask(after)
        await response(SCOPE, client.receive, client.send)
        assert done == [True]
        assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}

    run(test)


def test_late_headers_go_out_with_the_first_event() -> None:
    async def test() -> None:
        client, opened = Client(), []

        async def events() -> AsyncIterator[bytes]:
            yield b"data: 1\n\n"
            yield b"data: 2\n\n"

        def opening() -> dict[str, str]:
            opened.append(len(client.sent))  # nothing was sent before the first event
            return {"x-late": "yes"}

        await EventStreamResponse(events(), opening=opening)(SCOPE, client.receive, client.send)
        start, *bodies = client.sent
        assert opened == [0] and (b"x-late", b"yes") in start["headers"]
        assert [b["body"] for b in bodies] == [b"data: 1\n\n", b"data: 2\n\n", b""]

    run(test)
