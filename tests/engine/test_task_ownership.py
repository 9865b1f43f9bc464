"""A task's state has one owner at a time (on the memory broker, with the real worker).

A worker the group dropped - here expelled as a session timeout would, while it still had
records in flight - sends none of their outputs or changelog records once it resumes, writes
no checkpoint, closes its tasks and rejoins; the worker that took the tasks over never
shares its files (a locked directory: it works from a private copy), and the final state is
exactly the input's, both with one state directory for both workers (one host) and with one
each (two hosts).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Unpack

import pytest

from aiostreams import Processor, Record
from aiostreams.engine.task import TaskSettings
from aiostreams.engine.worker import Worker, WorkerConfig
from aiostreams.runtime.clock import LoopClock
from aiostreams.serde import LongSerde, StrSerde
from aiostreams.state.owner_epoch import EpochFence, record_epoch
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.state.store_spec import changelog_topic
from aiostreams.state.task_directory import held_elsewhere
from aiostreams.topic import Topic
from aiostreams.topology.topology import StoreSpec, Topology
from aiostreams.transport.base import ConsumerOptions, ConsumerSettings
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.transport.memory_consumer import MemoryConsumer
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

APP = "owners"
CHANGELOG = changelog_topic(APP, "counts")
KEYS = [f"k{i}" for i in range(8)]
BOUND = 30.0  # seconds: makes a broken build fail instead of hang; not a wait


@dataclass
class Gate:
    open: asyncio.Event = field(default_factory=asyncio.Event)
    entered: int = 0
    left: int = 0


OPEN = Gate()
OPEN.open.set()


class Count(Processor[str, str]):
    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    async def process(self, record: Record[str, str]) -> None:
        store = self.context.store("counts")
        count = (await store.get(record.key) or 0) + 1  # read before the wait: in flight
        self.gate.entered += 1
        await self.gate.open.wait()
        self.gate.left += 1
        store.put(record.key, count)
        self.context.forward(record.with_value(f"{record.key}={count}"))


class FreezableConsumer(MemoryConsumer):
    """A group member whose polls wait while :attr:`thawed` is clear: the fetch loop of a
    frozen process, which learns nothing of the group until it resumes."""

    thawed: asyncio.Event

    async def getmany(self, timeout: float, max_records: int | None = None
                      ) -> dict[TopicPartition, list[RawRecord]]:
        await self.thawed.wait()
        return await super().getmany(timeout, max_records)


class FreezableTransport(MemoryTransport):
    def __init__(self, broker: MemoryBroker, thawed: asyncio.Event) -> None:
        super().__init__(broker)
        self.thawed = thawed

    def consumer(self, group_id: str | None = None, *,
                 options: ConsumerOptions | None = None,
                 **settings: Unpack[ConsumerSettings]) -> MemoryConsumer:
        consumer = FreezableConsumer(self.broker, ConsumerOptions.of(group_id, options,
                                                                     settings))
        consumer.thawed = self.thawed
        return consumer


def worker(broker: MemoryBroker, gates: list[Gate], state_dir: Path,
           thawed: asyncio.Event | None = None) -> Worker:
    """A worker counting ``in`` into a SQLite store; each processor it makes waits at the
    next of ``gates`` (at an open one once they run out)."""
    def count() -> Count:
        return Count(gates.pop(0) if gates else OPEN)

    transport = (MemoryTransport(broker) if thawed is None
                 else FreezableTransport(broker, thawed))
    topology = (Topology().add_source("src", Topic("in", StrSerde(), StrSerde()))
                .add_processor("count", count, "src")
                .add_store(StoreSpec("counts", lambda: SQLiteKeyValueStore(
                    "counts", StrSerde(), LongSerde())), "count")
                .add_sink("sink", Topic("out", StrSerde(), StrSerde()), "count"))
    return Worker(topology.build(), topology.topics, transport,
                  WorkerConfig(app_id=APP, task=TaskSettings(), commit_interval=0.01,
                               state_dir=state_dir), LoopClock())


def consumer(w: Worker) -> MemoryConsumer:
    c = w._consumer
    assert isinstance(c, MemoryConsumer)
    return c


async def until(w: Worker, done: object) -> None:
    """Wait commit by commit (every 10 ms) until ``done()`` holds."""
    while not done():  # type: ignore[operator]
        await w.next_commit()


PARTITIONS = [TopicPartition("in", 0), TopicPartition("in", 1)]


def committed(broker: MemoryBroker, tp: TopicPartition) -> int:
    return broker.committed(APP, tp) or 0


@pytest.mark.parametrize("hosts", ["one-host", "two-hosts"])
async def test_a_dropped_worker_sends_nothing_of_its_in_flight_records_and_state_stays_exact(
        tmp_path: Path, hosts: str) -> None:
    broker = MemoryBroker()
    broker.create_topic("in", 2)
    broker.create_topic("out", 2)
    inputs = [k for _ in range(5) for k in KEYS]
    broker.append((OutgoingRecord("in", k.encode(), b"x"), i % 2)
                  for i, k in enumerate(inputs))
    gate_a = Gate()  # a's first two tasks wait here; every other processor runs at once
    thawed = asyncio.Event()
    thawed.set()
    a = worker(broker, [gate_a, gate_a], tmp_path / "a", thawed)
    b = worker(broker, [], tmp_path / ("a" if hosts == "one-host" else "b"))
    await a.start()
    try:
        async with asyncio.timeout(BOUND):
            await until(a, lambda: gate_a.entered >= 2)  # its tasks have work in flight
            thawed.clear()  # a freezes ...
            epoch_a = next(iter(a.tasks.values())).owner_epoch
            member = consumer(a).member_id
            assert member is not None
            broker.group(APP).expel(member)  # ... past its session timeout
            await b.start()
            await until(b, lambda: all(committed(broker, p) == broker.end_offset(p)
                                       for p in PARTITIONS))
            if hosts == "one-host":  # b never shared a's files: a still holds them
                assert all(held_elsewhere(tmp_path / "a", t) for t in a.tasks)
            seen = {p: broker.end_offset(TopicPartition(CHANGELOG, p)) for p in range(2)}
            gate_a.open.set()  # a resumes: its in-flight records retire at once ...
            for _ in range(10_000):  # ... let them retire (and the sender see them):
                if not any(t.in_flight for t in a.tasks.values()):
                    break
                await asyncio.sleep(0)  # loop turns, not time
            assert not any(t.in_flight for t in a.tasks.values())
            thawed.set()  # ... and then its fetch loop learns it was dropped
            broker.append([(OutgoingRecord("in", b"k0", b"x"), 0)])
            await until(b, lambda: consumer(a).member_id not in (None, member)
                        and all(committed(broker, p) == broker.end_offset(p)
                                for p in PARTITIONS))
    finally:
        gate_a.open.set()
        thawed.set()
        await a.stop()
        await b.stop()
    assert a.failure is None and b.failure is None
    # its later tasks hold a later generation: any record of epoch_a after b took over is
    # one the dropped worker sent after it lost the task
    stale = [r for p in range(2) for r in broker.records(CHANGELOG, p)
             if r.offset >= seen[p] and record_epoch(r.headers) == epoch_a]
    assert stale == [], "the dropped worker sent changelog records of tasks it had lost"
    firsts = [r.value for p in range(2) for r in broker.records("out", p)
              if r.value is not None and r.value.endswith(b"=1")]
    assert sorted(firsts) == sorted(f"{k}=1".encode() for k in KEYS), "outputs of lost tasks"
    final: dict[str, int] = {}
    for p in range(2):
        fence = EpochFence()
        for r in fence.admitted(broker.records(CHANGELOG, p)):
            assert r.key is not None and r.value is not None
            final[r.key.decode()] = LongSerde().deserialize(CHANGELOG, r.value)
    assert final == Counter([*inputs, "k0"])
