"""Startup/shutdown hooks and resources: their order relative to the consumer, the stores
and the last commit, on the memory broker."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from collections.abc import AsyncIterator

import pytest

from aiostreams import App
from aiostreams.lifecycle.resources import ResourceClosedError
from aiostreams.testing import settle


def make_app(**settings: object) -> App:
    return App("hooks", broker=f"memory://hooks-{uuid.uuid4().hex[:8]}",
               commit_interval_ms=20, **settings)


async def test_startup_runs_before_any_record_and_shutdown_after_the_drain_and_commit() -> None:
    app = make_app()
    events: list[str] = []
    src = app.topic("in", key=str, value=str, partitions=1)
    dst = app.topic("out", key=str, value=str, partitions=1)
    for i in range(5):
        await app.send(src, f"k{i}", f"v{i}")
    entered, gate = asyncio.Event(), asyncio.Event()

    @contextlib.asynccontextmanager
    async def connection() -> AsyncIterator[str]:
        events.append("open")
        yield "conn"
        events.append("close")

    conn = app.resource("conn", connection)

    @app.on_startup
    async def started() -> None:
        events.append(f"startup committed={app.commit_log == []}")

    async def step(value: str) -> str:
        events.append("record")
        if events.count("record") == 5:
            entered.set()
        await gate.wait()  # in flight when the stop begins
        events.append("done")
        return f"{value}/{conn.value}"

    @app.on_shutdown
    async def stopping() -> None:
        events.append(f"shutdown sees {conn.value}")  # still open
        await app.send(dst, "bye", "from shutdown")

    app.on_commit(lambda commit: events.append(f"commit {max(commit.offsets.values())}"))
    app.stream(src).map_values_async(step).to(dst)
    await app.start()
    await entered.wait()
    stopping_task = asyncio.create_task(app.stop())
    gate.set()  # the in-flight records finish while the app stops: the drain
    await stopping_task
    assert events[:2] == ["open", "startup committed=True"]
    assert events[2:7] == ["record"] * 5
    assert events[7:] == ["done"] * 5 + ["commit 5", "shutdown sees conn", "close"]
    async with app.consumer(dst) as records:
        values = [r.value for r in await records.read_to_end()]
    assert values == [f"v{i}/conn" for i in range(5)] + ["from shutdown"]
    with pytest.raises(ResourceClosedError, match="resource 'conn' is not open"):
        _ = conn.value


async def test_a_failing_startup_hook_stops_the_start_and_closes_what_was_opened() -> None:
    app = make_app()
    closed: list[str] = []
    shutdown: list[str] = []

    @contextlib.asynccontextmanager
    async def first() -> AsyncIterator[int]:
        yield 1
        closed.append("first")

    app.resource("first", first)

    @app.on_startup
    async def broken() -> None:
        raise RuntimeError("no database")

    @app.on_shutdown
    async def never() -> None:
        shutdown.append("ran")

    src = app.topic("in", key=str, value=str, partitions=1)
    app.stream(src).to(app.topic("out", key=str, value=str))
    with pytest.raises(RuntimeError, match="no database"):
        await app.start()
    assert closed == ["first"] and shutdown == []
    assert app.status().worker is None  # the consumer never joined
    assert app.state.value == "stopped"


async def test_every_shutdown_step_runs_and_the_first_error_is_raised() -> None:
    app = make_app()
    ran: list[str] = []

    @app.on_shutdown
    async def fails() -> None:
        ran.append("fails")
        raise ValueError("first")

    @app.on_shutdown
    async def second() -> None:
        ran.append("second")

    async def value() -> str:
        return "v"

    handle = app.resource("plain", value)
    src = app.topic("in", key=str, value=str, partitions=1)
    app.stream(src).to(app.topic("out", key=str, value=str))
    await app.start()
    assert app.resource_value("plain") == "v" and handle.is_open
    with pytest.raises(ValueError, match="first"):
        await app.stop()
    assert ran == ["fails", "second"] and not handle.is_open


def test_hooks_must_be_async_and_resources_named_once() -> None:
    app = make_app()
    with pytest.raises(TypeError, match="async function"):
        app.on_startup(lambda: None)  # type: ignore[arg-type, return-value]
    app.resource("x", dict)
    with pytest.raises(ValueError, match="'x' is declared already"):
        app.resource("x", dict)


async def test_a_test_driver_runs_steps_that_use_resources_inside_app_lifecycle() -> None:
    from aiostreams.testing.driver import TopologyTestDriver

    app = make_app()
    log: list[str] = []

    @contextlib.asynccontextmanager
    async def suffix() -> AsyncIterator[str]:
        log.append("open")
        yield "!"
        log.append("close")

    handle = app.resource("suffix", suffix)

    async def shout(value: str) -> str:
        return value.upper() + handle.value

    src = app.topic("in", key=str, value=str, partitions=1)
    app.stream(src).map_values_async(shout).to(app.topic("out", key=str, value=str))
    async with app.lifecycle(), TopologyTestDriver(app) as driver:
        driver.pipe_input("in", "k", "hi")
        await driver.process_all()
        assert [r.value for r in driver.read_output("out")] == ["HI!"]
    assert log == ["open", "close"]


async def test_a_sigterm_while_the_app_starts_stops_it_gracefully_once_started() -> None:
    app = make_app()
    src = app.topic("in", key=str, value=str, partitions=1)
    dst = app.topic("out", key=str, value=str, partitions=1)
    await app.send(src, "k", "v")
    app.stream(src).to(dst)
    shut_down = asyncio.Event()

    @app.on_startup
    async def signalled_during_start() -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # before start() returns
        await settle()  # the handler runs now, before the worker exists to be told

    @app.on_shutdown
    async def stopping() -> None:
        shut_down.set()

    # without the handler in place during start, the default action would end the process
    await asyncio.wait_for(app.run_async(), 30)
    assert shut_down.is_set()
    assert app.state.value == "stopped"
