"""``shared.race.batches``: the keepalive/idle/stop loop every relayed token goes through.

Fakes with explicit hand-offs (no timing asserted: the intervals only need to be long or
short against a loop step).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from shared.race import batches


class Source:
    """An async iterator fed by the test: ``send`` a chunk, ``end`` it or ``fail`` it."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.reads = 0
        self.closed = asyncio.Event()

    def send(self, chunk: Any) -> None:
        self.queue.put_nowait(chunk)

    async def chunks(self) -> AsyncIterator[Any]:
        try:
            while True:
                self.reads += 1
                item = await self.queue.get()
                if item is StopAsyncIteration:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self.closed.set()


def run(test: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(10):  # a hang fails the test instead of blocking CI
            await test()

    asyncio.run(bounded())


def test_chunks_pass_in_order_and_the_stream_ends() -> None:
    async def test() -> None:
        source = Source()
        for chunk in (b"a", b"b", b"c", StopAsyncIteration):
            source.send(chunk)
        read = [c async for batch in batches(source.chunks(), 60) for c in batch or ()]
        assert read == [b"a", b"b", b"c"]

    run(test)


def test_a_silent_source_yields_none_each_interval_and_the_read_goes_on() -> None:
    async def test() -> None:
        source = Source()
        stream = batches(source.chunks(), 0.02)
        assert await anext(stream) is None
        assert await anext(stream) is None
        source.send(b"late")  # the same pending read receives it: nothing lost
        assert await anext(stream) == [b"late"]
        source.send(StopAsyncIteration)
        with pytest.raises(StopAsyncIteration):
            await anext(stream)

    run(test)


def test_time_spent_by_a_slow_reader_is_not_silence() -> None:
    """Only waiting counts: a reader that took long over its last chunk finds the next one
    there, not a None (an idle deadline must not blame the source for the client)."""

    async def test() -> None:
        source = Source()
        stream = batches(source.chunks(), 0.05)
        source.send(b"one")
        assert await anext(stream) == [b"one"]
        source.send(b"two")
        await asyncio.sleep(0.2)  # the reader is busy elsewhere for 4 intervals
        assert await anext(stream) == [b"two"]
        await stream.aclose()

    run(test)


def test_stop_ends_a_waiting_reader_but_a_chunk_already_there_wins() -> None:
    async def test() -> None:
        source, stop = Source(), asyncio.Event()
        stream = batches(source.chunks(), None, stop, lambda: RuntimeError("stopped"))
        source.send(b"first")
        assert await anext(stream) == [b"first"]
        source.send(b"there")
        await asyncio.sleep(0.01)  # read ahead into the queue
        stop.set()
        assert await anext(stream) == [b"there"]
        with pytest.raises(RuntimeError, match="stopped"):
            await anext(stream)
        # Waiting when the stop comes, without ``stopped``: the stream just ends.
        source2, stop2 = Source(), asyncio.Event()
        stream2 = batches(source2.chunks(), None, stop2)
        pending = asyncio.ensure_future(anext(stream2))
        await asyncio.sleep(0.01)
        stop2.set()
        with pytest.raises(StopAsyncIteration):
            await pending

    run(test)


def test_a_failing_source_raises_in_the_reader() -> None:
    async def test() -> None:
        source = Source()
        source.send(b"a")
        source.send(ValueError("broken"))
        stream = batches(source.chunks(), 60)
        assert await anext(stream) == [b"a"]
        with pytest.raises(ValueError, match="broken"):
            await anext(stream)

    run(test)


def test_closing_early_stops_the_pending_read() -> None:
    async def test() -> None:
        source = Source()
        stream = batches(source.chunks(), 60)
        source.send(b"a")
        assert await anext(stream) == [b"a"]
        await stream.aclose()  # the client left
        async with asyncio.timeout(1):
            await source.closed.wait()  # the read behind it was cancelled, the source closed
        await asyncio.sleep(0)
        assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    run(test)


def test_a_cancelled_reader_propagates_the_cancel() -> None:
    async def test() -> None:
        source = Source()

        async def consume() -> None:
            async for _ in batches(source.chunks(), 60):
                pass

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        async with asyncio.timeout(1):
            await source.closed.wait()

    run(test)


def test_chunks_that_arrived_together_come_out_as_one_batch() -> None:
    """A relay writes what piled up once: the edge's per-chunk send path is its main cost."""

    async def test() -> None:
        source = Source()
        stream = batches(source.chunks(), 60)
        source.send(b"a")
        assert await anext(stream) == [b"a"]
        for chunk in (b"b", b"c", b"d"):
            source.send(chunk)
        await asyncio.sleep(0.01)  # the consumer was busy (sending) meanwhile
        assert await anext(stream) == [b"b", b"c", b"d"]
        source.send(StopAsyncIteration)
        with pytest.raises(StopAsyncIteration):
            await anext(stream)

    run(test)


def test_read_ahead_is_bounded() -> None:
    """A consumer that falls behind (a slow client) holds the source back: the reader waits
    after ``ahead`` chunks instead of reading the whole answer into memory."""

    async def test() -> None:
        source = Source()
        for i in range(10):
            source.send(i)
        stream = batches(source.chunks(), 60, ahead=3)
        assert await anext(stream) == [0, 1, 2]
        await asyncio.sleep(0.01)
        assert source.reads == 6  # three more read ahead, and the reader parked behind them
        assert await anext(stream) == [3, 4, 5]
        await stream.aclose()

    run(test)


def test_silence_past_idle_s_raises_stalled_after_the_keepalives() -> None:
    async def test() -> None:
        source = Source()
        stream = batches(source.chunks(), 0.02, idle_s=0.07, stalled=lambda: TimeoutError("idle"))
        source.send(b"a")
        assert await anext(stream) == [b"a"]
        assert await anext(stream) is None  # keepalives while silent ...
        assert await anext(stream) is None
        with pytest.raises(TimeoutError, match="idle"):  # ... until the idle deadline
            async for batch in stream:
                assert batch is None
        async with asyncio.timeout(1):
            await source.closed.wait()

    run(test)
