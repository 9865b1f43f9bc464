"""Every public wait returns or raises when the worker stops: a wait never outlives the
failure or the stop that ends the worker (a batch run once hung in ``wait_until_caught_up``
after the fetch loop failed on a sink's error)."""

from __future__ import annotations

import asyncio

import pytest
from appkit import create_topic, produce, unique
from test_external_sink import RecordingSink

from aiostreams import App, TaskFailedError
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

BOUND = 10.0  # fails a hang; nothing here waits for time to pass


class FilesUnreachable(Exception):
    """What a sink raises when its storage is gone (not a transport error: nothing to ride
    out; not an ``OSError``, whose subclass ``TimeoutError`` a hang would raise)."""


class FailingSink(RecordingSink):
    """Its flush fails as a lost disk does."""

    async def flush(self) -> None:
        raise FilesUnreachable("the sink's files are unreachable")


async def sink_app(name: str) -> tuple[App, MemoryBroker, str]:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    src = unique("in")
    await create_topic(transport, src, 1)
    sink = FailingSink(broker, name, TopicPartition(src, 0), batch=1)
    app = App(name, transport=transport, commit_interval_ms=20)
    app.topic(src, key=str, value=str)
    app.topology.add_source("src", src).add_external_sink("files", sink, "src")
    return app, broker, src


async def test_wait_until_caught_up_raises_the_failure_when_the_fetch_loop_fails() -> None:
    app, _, src = await sink_app("caught-up-fails")
    await app.start()
    try:
        await produce(app.transport, src, [(b"k", b"v")])
        with pytest.raises(TaskFailedError, match="unreachable"):
            async with asyncio.timeout(BOUND):
                await app.wait_until_caught_up()
    finally:
        await app.stop()


async def test_wait_raises_the_failure_when_the_fetch_loop_fails(
        caplog: pytest.LogCaptureFixture) -> None:
    app, _, src = await sink_app("wait-fails")
    await app.start()
    await produce(app.transport, src, [(b"k", b"v")])
    with pytest.raises(TaskFailedError, match="unreachable"):
        async with asyncio.timeout(BOUND):
            await app.wait()
    # the stop's closing commit failed on the sink: said as that, not as a lost group
    closing = [r.getMessage() for r in caplog.records
               if "closing them without committing" in r.getMessage()]
    assert closing and all("could not commit as they closed" in m and "unreachable" in m
                           and "group moved" not in m for m in closing), closing


async def test_wait_until_caught_up_ends_when_a_stop_is_requested_while_it_waits() -> None:
    """A stop asked for (a signal, ``request_stop``) while the app is behind: the wait says
    the app stopped before it caught up, instead of waiting for commits that will not come."""
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    src = unique("in")
    await create_topic(transport, src, 1)
    app = App("caught-up-stopped", transport=transport, commit_interval_ms=20)
    app.topic(src, key=str, value=str)
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(value: str) -> str:
        started.set()
        await release.wait()
        return value

    out = app.topic(unique("out"), key=str, value=str)
    app.stream(src).map_values_async(slow).to(out)
    await app.start()
    try:
        await produce(transport, src, [(b"k", b"v")])
        waiting = asyncio.ensure_future(app.wait_until_caught_up())
        await started.wait()
        app.request_stop()
        with pytest.raises(RuntimeError, match="stop"):
            async with asyncio.timeout(BOUND):
                await waiting
    finally:
        release.set()
        await app.stop()
