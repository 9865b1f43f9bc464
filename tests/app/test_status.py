"""``app.status()``: read-only views of a running app, its worker and its tasks."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from appkit import create_topic, produce, unique

from aiostreams import App, AppState, AppStatus, Processor, Record, TaskStatus
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition


class HeldUpper(Processor[str, str]):
    """Holds every record until ``release`` is set: records stay in flight meanwhile."""

    release = asyncio.Event()

    async def process(self, record: Record[str, str]) -> None:
        await self.release.wait()
        self.context.forward(record.with_value(record.value.upper()))


def make_app(transport: MemoryTransport, src: str, dst: str) -> App:
    app = App("status", transport=transport, commit_interval_ms=20, max_in_flight=8)
    app.topic(src, key=str, value=str)
    app.topic(dst, key=str, value=str, partitions=1)
    app.topology.add_source("src", src).add_processor("upper", HeldUpper, "src").add_sink(
        "sink", dst, "upper")
    return app


async def test_status_before_start_names_the_app_and_no_worker() -> None:
    app = App("idle", broker="memory://")
    assert app.status() == AppStatus("idle", AppState.CREATED, None, ())


async def test_status_shows_in_flight_records_then_the_committed_offsets() -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    src, dst = unique("in"), unique("out")
    await create_topic(transport, src, 2)
    await produce(transport, src, [(f"k{i}".encode(), b"v") for i in range(6)])
    HeldUpper.release = asyncio.Event()
    app = make_app(transport, src, dst)
    seen_in_flight = asyncio.Event()

    async with app:
        while not seen_in_flight.is_set():  # each commit is a point to look again
            status = app.status()
            if sum(t.in_flight for t in status.tasks) == 6:
                seen_in_flight.set()
            else:
                await app.inspect().worker.next_commit()  # type: ignore[union-attr]  # internal
        assert status.state is AppState.RUNNING
        assert [t.task_id for t in status.tasks] == ["0_0", "0_1"]
        assert {tp for t in status.tasks for tp in t.partitions} == {
            TopicPartition(src, 0), TopicPartition(src, 1)}
        assert all(t.state == "running" and t.max_in_flight == 8 for t in status.tasks)
        assert all(t.oldest_unretired_timestamp is not None for t in status.tasks)
        HeldUpper.release.set()
        await app.wait_until_caught_up(timeout=30)
        done = app.status()
    assert done.worker is not None and done.worker.failure is None
    ends = {TopicPartition(src, p): broker.end_offset(TopicPartition(src, p)) for p in (0, 1)}
    assert dict(done.worker.committed) == ends
    assert {tp: o for t in done.tasks for tp, o in t.committable.items()} == ends
    assert sum(t.counters["records_in"] for t in done.tasks) == 6
    assert all(t.in_flight == 0 and t.oldest_unretired_timestamp is None for t in done.tasks)
    assert app.status().state is AppState.STOPPED and app.status().tasks == ()
    assert app.status().worker.state is AppState.STOPPED  # type: ignore[union-attr]


async def test_views_are_frozen_and_hold_copies() -> None:
    task = TaskStatus("0_0", (TopicPartition("t", 0),), "running", 0, 8, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.in_flight = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        task.committable[TopicPartition("t", 0)] = 1  # type: ignore[index]


def test_a_task_view_refuses_offsets_of_partitions_it_does_not_own() -> None:
    with pytest.raises(ValueError, match="does not own"):
        TaskStatus("0_0", (TopicPartition("t", 0),), "running", 0, 8, 0,
                   committable={TopicPartition("t", 1): 5})
