"""The restorer and the checkpoint: a restore cut short never leaves a checkpoint that
vouches for more than the store file holds, and no checkpoint is taken of a restoring task.

Real SQLite files under a temporary state dir, the memory broker's changelog.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from aiostreams import Processor, Record
from aiostreams.engine.restore import Restorer
from aiostreams.engine.task import StreamTask, TaskSettings, TaskState
from aiostreams.runtime.clock import LoopClock
from aiostreams.serde import LongSerde, StrSerde
from aiostreams.state.changelog_mark import ChangelogMark
from aiostreams.state.checkpoint import Checkpoint
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.topic import Topic
from aiostreams.topology.topology import StoreSpec, Topology
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, TopicPartition

CHANGELOG = "app-counts-changelog"
TP = TopicPartition(CHANGELOG, 0)


class GatedSQLiteStore(SQLiteKeyValueStore):
    """A SQLite store whose flush waits for ``gate`` (when one is given)."""

    def __init__(self, gate: asyncio.Event | None, waiting: asyncio.Event) -> None:
        super().__init__("counts", StrSerde(), LongSerde())
        self.gate = gate
        self.waiting = waiting

    async def flush(self, mark: ChangelogMark | None = None) -> None:
        if self.gate is not None:
            self.waiting.set()
            await self.gate.wait()
        await super().flush(mark)


class Noop(Processor[str, str]):
    def process(self, record: Record[str, str]) -> None:
        pass


def make_task(state_dir: Path, gate: asyncio.Event | None,
              waiting: asyncio.Event) -> StreamTask:
    topology = (Topology().add_source("src", Topic("in", StrSerde(), StrSerde()))
                .add_processor("p", Noop, "src")
                .add_store(StoreSpec("counts", lambda: GatedSQLiteStore(gate, waiting)), "p"))
    sub = topology.build()[0]
    return StreamTask("0_0", sub, [TopicPartition("in", 0)], TaskSettings(),
                      topics=topology.topics, clock=LoopClock(),
                      emit=lambda records: None, on_failed=lambda task, error: None,
                      state_dir=state_dir, changelog_topics={"counts": CHANGELOG})


def changelog_of_ten_keys() -> MemoryBroker:
    broker = MemoryBroker()
    broker.create_topic("in", 1)
    broker.create_topic(CHANGELOG, 1)
    longs = LongSerde()
    broker.append((OutgoingRecord(CHANGELOG, f"k{i}".encode(), longs.serialize(CHANGELOG, i)),
                   0) for i in range(10))
    return broker


async def contents(task: StreamTask) -> dict[str, int]:
    store = task.stores["counts"]
    return {k: v async for k, v in store.range(None, None)}


async def test_a_restore_from_scratch_cut_short_leaves_no_checkpoint_for_that_store(
        tmp_path: Path) -> None:
    broker = changelog_of_ten_keys()
    restorer = Restorer(MemoryTransport(broker), exactly_once=False, state_dir=tmp_path)
    # an earlier run's checkpoint, but the store file is gone: replay from offset 0
    Checkpoint(tmp_path / "0_0" / ".checkpoint").write({TP: 5})
    waiting = asyncio.Event()
    cut = make_task(tmp_path, asyncio.Event(), waiting)  # its gate never opens
    await cut.open_stores()
    replay = asyncio.create_task(restorer.restore(cut))
    await waiting.wait()
    replay.cancel()
    with pytest.raises(asyncio.CancelledError):
        await replay
    await cut.close()
    assert Checkpoint(tmp_path / "0_0" / ".checkpoint").read() == {}
    # the next owner (same files) replays everything, not from the stale offset 5
    again = make_task(tmp_path, None, asyncio.Event())
    await again.open_stores()
    await restorer.restore(again)
    try:
        assert await contents(again) == {f"k{i}": i for i in range(10)}
    finally:
        await again.close()


async def test_no_checkpoint_is_taken_of_a_task_that_is_restoring(tmp_path: Path) -> None:
    broker = changelog_of_ten_keys()
    transport = MemoryTransport(broker)
    restorer = Restorer(transport, exactly_once=False, state_dir=tmp_path)
    task = make_task(tmp_path, None, asyncio.Event())
    await task.open_stores()
    assert task.state is TaskState.RESTORING
    consumer = transport.consumer(None)
    await consumer.start()
    try:
        with pytest.raises(AssertionError, match="restoring"):
            await restorer.changelog_marks([task], consumer)
        await restorer.restore(task)
        await task.initialize()
        assert await restorer.changelog_marks([task], consumer) == {"0_0": {TP: 10}}
    finally:
        await consumer.stop()
        await task.close()
