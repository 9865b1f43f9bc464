"""Restore in the background (issue 23, item 6): while one task of a worker restores a large
changelog, the worker's other tasks keep fetching, processing and committing; the restoring
task's records wait until its stores are whole; commits never carry its offsets meanwhile;
a revocation cancels its restore; a failed restore fails the task, saying which store.

On the memory broker with the real worker. A restore is made to last as long as the test
needs by a store whose flush *during the restore* waits for a gate (the restorer flushes
every ``RESTORE_FLUSH_EVERY`` records and at the end): what happens meanwhile is then
ordered by events, not by timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from aiostreams import Processor, Record
from aiostreams.engine.restore import RESTORE_FLUSH_EVERY
from aiostreams.engine.task import StreamTask, TaskSettings, TaskState
from aiostreams.engine.worker import CommitRecord, Worker, WorkerConfig
from aiostreams.errors import TaskFailedError
from aiostreams.runtime.clock import LoopClock
from aiostreams.serde import LongSerde, StrSerde
from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.state.store_spec import changelog_topic
from aiostreams.topic import Topic
from aiostreams.topology.topology import StoreSpec, Topology
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, TopicPartition

APP = "restoring"
CHANGELOG = changelog_topic(APP, "counts")
A = TopicPartition("in", 0)  # its task restores a large changelog
B = TopicPartition("in", 1)  # its task has nothing to restore
BOUND = 30.0  # seconds: a bound that makes a broken build fail instead of hang, not a wait


@dataclass
class RestoreProbe:
    """What the gated stores share with the test."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: asyncio.Event = field(default_factory=asyncio.Event)  # a restore is at the gate
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)  # ...and was cut off
    fail_with: Exception | None = None
    restored: int = 0
    events: list[str] = field(default_factory=list)


class GatedRestoreStore(InMemoryKeyValueStore):
    """An in-memory store whose flush of restored records waits for the probe's gate."""

    def __init__(self, probe: RestoreProbe) -> None:
        super().__init__("counts", StrSerde(), LongSerde())
        self.probe = probe
        self.unflushed = 0

    def restore(self, key: bytes | None, value: bytes | None) -> None:
        super().restore(key, value)
        self.unflushed += 1
        self.probe.restored += 1

    async def flush(self) -> None:
        if self.unflushed:
            self.probe.events.append("restore waits")
            self.probe.waiting.set()
            try:
                await self.probe.gate.wait()
            except asyncio.CancelledError:
                self.probe.cancelled.set()
                raise
            if self.probe.fail_with is not None:
                raise self.probe.fail_with
            self.unflushed = 0


class Count(Processor[str, str]):
    def __init__(self, probe: RestoreProbe) -> None:
        self.probe = probe

    async def process(self, record: Record[str, str]) -> None:
        self.probe.events.append(f"process {record.key}")
        store = self.context.store("counts")
        count = (await store.get(record.key) or 0) + 1
        store.put(record.key, count)
        self.context.forward(record.with_value(f"{record.key}={count}"))


def add_counting(topology: Topology, probe: RestoreProbe,
                 counter: type[Count] | None = None) -> Topology:
    """``in`` -> ``counter`` (a :class:`Count`) with the gated ``counts`` store -> ``out``."""
    processor = counter or Count
    return (topology.add_source("src", Topic("in", StrSerde(), StrSerde()))
            .add_processor("count", lambda: processor(probe), "src")
            .add_store(StoreSpec("counts", lambda: GatedRestoreStore(probe)), "count")
            .add_sink("sink", Topic("out", StrSerde(), StrSerde()), "count"))


@dataclass
class Run:
    """A started worker on the counting topology, its probe and the commits it made."""

    worker: Worker
    probe: RestoreProbe
    commits: list[CommitRecord]

    async def committed_at_least(self, tp: TopicPartition, offset: int) -> None:
        while not any(c.offsets.get(tp, -1) >= offset for c in self.commits):
            await self.worker.next_commit()


@asynccontextmanager
async def running(broker: MemoryBroker, *, gate_open: bool, counter: type[Count] | None = None,
                  fail_with: Exception | None = None, **config: Any) -> AsyncIterator[Run]:
    """A worker (committing every 10 ms) on the counting topology, started, its restores'
    gate open or not; within :data:`BOUND` seconds; on exit the gate opens and it stops."""
    probe = RestoreProbe(fail_with=fail_with)
    if gate_open:
        probe.gate.set()
    commits: list[CommitRecord] = []
    topology = add_counting(Topology(), probe, counter)
    worker = Worker(topology.build(), topology.topics, MemoryTransport(broker),
                    WorkerConfig(app_id=APP, task=TaskSettings(), commit_interval=0.01,
                                 **config), LoopClock(), on_commit=commits.append)
    await worker.start()
    try:
        async with asyncio.timeout(BOUND):
            yield Run(worker, probe, commits)
    finally:
        probe.gate.set()
        await worker.stop()


def broker_with_a_large_changelog(size: int) -> MemoryBroker:
    """``in`` (2 partitions), ``out``, and the store's changelog whose partition 0 holds
    ``size`` updates of 100 keys ending with ``k0`` at 1000 (partition 1 is empty)."""
    broker = MemoryBroker()
    broker.create_topic("in", 2)
    broker.create_topic("out", 1)
    broker.create_topic(CHANGELOG, 2)
    longs = LongSerde()
    updates = [(OutgoingRecord(CHANGELOG, f"k{i % 100}".encode(),
                               longs.serialize(CHANGELOG, i)), 0) for i in range(size - 1)]
    updates.append((OutgoingRecord(CHANGELOG, b"k0", longs.serialize(CHANGELOG, 1000)), 0))
    broker.append(updates)
    return broker


def put_input(broker: MemoryBroker, tp: TopicPartition, keys: list[str]) -> None:
    broker.append((OutgoingRecord(tp.topic, k.encode(), k.encode()), tp.partition)
                  for k in keys)


def outputs(broker: MemoryBroker) -> list[str]:
    return [r.value.decode() for r in broker.records("out", 0) if r.value is not None]


async def test_other_tasks_fetch_process_and_commit_while_one_restores_a_large_changelog(
        ) -> None:
    # the restore flushes part-way (twice: the second waits for the first, held at the gate)
    size = 2 * RESTORE_FLUSH_EVERY + 10_000
    broker = broker_with_a_large_changelog(size)
    put_input(broker, A, ["k0", "k0"])  # waits for the restore: counts continue from 1000
    put_input(broker, B, ["b1", "b2", "b1"])
    async with running(broker, gate_open=False) as run:
        await run.probe.waiting.wait()  # A is restoring, held part-way
        await run.committed_at_least(B, 3)
        # while A restores: B's records were processed and committed ...
        task_a = run.worker.tasks["0_0"]
        assert task_a.state is TaskState.RESTORING
        assert run.probe.restored < size
        assert outputs(broker) == ["b1=1", "b2=1", "b1=2"]
        # ... and no commit carried an offset of A's partition
        assert all(A not in c.offsets for c in run.commits)
        # more of B's input flows while A is still held
        put_input(broker, B, ["b2"])
        await run.committed_at_least(B, 4)
        assert task_a.state is TaskState.RESTORING
        assert outputs(broker)[-1] == "b2=2"
        run.probe.gate.set()
        await run.committed_at_least(A, 2)
        assert run.probe.restored == size
        assert run.worker.tasks["0_0"].state is TaskState.RUNNING
        # A's records waited for the whole changelog: its counts go on from the restored 1000
        assert [o for o in outputs(broker) if o.startswith("k0")] == ["k0=1001", "k0=1002"]
    assert run.worker.failure is None


async def test_the_restore_lets_other_tasks_run_between_its_fetches(
        ) -> None:
    size = RESTORE_FLUSH_EVERY - 5_000  # one flush, at the end: only fetches before it
    broker = broker_with_a_large_changelog(size)
    put_input(broker, B, ["b1"])
    async with running(broker, gate_open=True) as run:
        await run.probe.waiting.wait()
        await run.committed_at_least(B, 1)
    # B's record was processed while A's changelog was still being read
    assert run.probe.events.index("process b1") < run.probe.events.index("restore waits")


async def test_a_revoked_restoring_task_stops_restoring_and_commits_nothing() -> None:
    broker = broker_with_a_large_changelog(RESTORE_FLUSH_EVERY + 10)
    put_input(broker, A, ["k0"])
    # member ids sort by client id first: the second worker, joining, takes partition 0
    async with running(broker, gate_open=False, client_id="z-first") as first:
        await first.probe.waiting.wait()
        restoring: StreamTask = first.worker.tasks["0_0"]
        # the group moves A's partition to the second worker
        async with running(broker, gate_open=True, client_id="a-second") as second:
            await first.probe.cancelled.wait()
            await second.committed_at_least(A, 1)
            # the first worker's restore was cut off at its gate, which never opened
            assert not first.probe.gate.is_set()
            assert restoring.state is TaskState.CLOSED
            assert "0_0" not in first.worker.tasks
            assert all(A not in c.offsets for c in first.commits)
            # the new owner restored the whole changelog before processing A's record
            assert second.probe.restored == RESTORE_FLUSH_EVERY + 10
            assert outputs(broker) == ["k0=1001"]
    assert first.worker.failure is None and second.worker.failure is None


async def test_a_failed_restore_fails_the_task_naming_the_store_and_changelog() -> None:
    broker = broker_with_a_large_changelog(100)
    put_input(broker, B, ["b1"])
    async with running(broker, gate_open=True, fail_with=OSError("disk full")) as run:
        await run.worker.stop_requested()
    failure = run.worker.failure
    assert isinstance(failure, TaskFailedError)
    message = str(failure)
    assert "0_0" in message and CHANGELOG in message and "counts" in message
    assert "disk full" in message
    assert isinstance(failure.__cause__, OSError)
    assert broker.committed(APP, A) is None


@pytest.mark.parametrize("changelog", [0, 1])
async def test_a_task_with_little_or_nothing_to_restore_runs(changelog: int) -> None:
    if changelog:
        broker = broker_with_a_large_changelog(changelog)
    else:
        broker = MemoryBroker()
        broker.create_topic("in", 2)
        broker.create_topic("out", 1)
    put_input(broker, A, ["k0"])
    async with running(broker, gate_open=True) as run:
        await run.committed_at_least(A, 1)
    assert outputs(broker) == (["k0=1001"] if changelog else ["k0=1"])


class InitFails(Count):
    async def init(self, context: Any) -> None:
        raise RuntimeError("no model file")


async def test_a_processor_init_that_fails_after_the_restore_fails_the_task() -> None:
    broker = broker_with_a_large_changelog(100)
    async with running(broker, gate_open=True, counter=InitFails) as run:
        await run.worker.stop_requested()
    failure = run.worker.failure
    assert isinstance(failure, TaskFailedError)
    assert str(failure).startswith("task 0_") and "no model file" in str(failure)
    assert isinstance(failure.__cause__, RuntimeError)


async def test_wait_until_caught_up_waits_for_a_restoring_task_with_no_new_input() -> None:
    """Caught up means the stores are whole too: a task that restores and has no input left
    must not let ``wait_until_caught_up`` return before its restore ends (an interactive
    query right after it would read a half-restored store)."""
    from aiostreams import App

    broker = broker_with_a_large_changelog(RESTORE_FLUSH_EVERY + 10)
    probe = RestoreProbe()
    app = App(APP, transport=MemoryTransport(broker), commit_interval_ms=10)
    add_counting(app.topology, probe)
    async with app:
        worker = app.inspect().worker
        assert worker is not None
        async with asyncio.timeout(BOUND):
            waiter = asyncio.ensure_future(app.wait_until_caught_up())
            await probe.waiting.wait()  # partition 0's task is held part-way through
            for _ in range(3):  # commits happen; the input topic is fully committed
                await worker.next_commit()
            assert not waiter.done(), ("returned while a task was still restoring",
                                       waiter.exception() if waiter.done() else None)
            probe.gate.set()
            await waiter
        assert worker.stores_ready
        # (the fixture's changelog puts every key on partition 0: read that task's store)
        assert await worker.tasks["0_0"].stores["counts"].get("k0") == 1000
