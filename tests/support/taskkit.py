"""Factories for engine tests: a task over a topology, driven without any broker.

Imported by the engine tests; ``make_task`` is re-exported as a fixture by conftest.py."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from aiostreams import Processor, Record
from aiostreams.engine.task import StreamTask, TaskSettings
from aiostreams.errors import TaskFailedError
from aiostreams.policies import Ordering
from aiostreams.runtime.clock import ManualClock
from aiostreams.serde import StrSerde
from aiostreams.testing import Sequencer
from aiostreams.topic import Topic
from aiostreams.topology.topology import Topology
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition


@dataclass
class TaskHarness:
    task: StreamTask
    clock: ManualClock
    outputs: list[OutgoingRecord] = field(default_factory=list)
    failures: list[TaskFailedError] = field(default_factory=list)
    pauses: list[tuple[TopicPartition, bool]] = field(default_factory=list)

    def values(self, topic: str = "out") -> list[str]:
        return [o.value.decode() for o in self.outputs if o.topic == topic and o.value]


def raw(topic: str, partition: int, offset: int, key: str | None, value: str,
        timestamp: float | None = None) -> RawRecord:
    return RawRecord(topic, partition, offset, float(offset) if timestamp is None else timestamp,
                     key.encode() if key is not None else None, value.encode())


def feed(task: StreamTask, tp: TopicPartition, records: Sequence[RawRecord]) -> None:
    """What the worker does with a fetched batch: enqueue it, then pump."""
    task.enqueue(tp, records)
    task.pump()


def str_topic(name: str) -> Topic:
    return Topic(name, StrSerde(), StrSerde())


MakeTask = Callable[..., TaskHarness]


@pytest.fixture
def make_task() -> MakeTask:
    def make(
        topology: Topology,
        partitions: list[TopicPartition] | None = None,
        *,
        max_in_flight: int = 16,
        ordering: str = "key",
        max_task_idle: float = 0.0,
        max_buffered: int = 1000,
        has_unfetched: Any = None,
        **settings: Any,
    ) -> TaskHarness:
        sub = topology.build()[0]
        tps = partitions or [TopicPartition(t, 0) for t in sub.source_topics]
        clock = ManualClock()
        harness: TaskHarness
        task = StreamTask(
            "0_0", sub, tps,
            TaskSettings(max_in_flight=max_in_flight, ordering=Ordering.parse(ordering),
                         max_task_idle=max_task_idle, max_buffered_per_partition=max_buffered,
                         **settings),
            topics=topology.topics, clock=clock,
            emit=lambda recs: harness.outputs.extend(recs),
            on_failed=lambda t, e: harness.failures.append(e),
            on_pause=lambda tp, p: harness.pauses.append((tp, p)),
            has_unfetched=has_unfetched,
        )
        harness = TaskHarness(task, clock)
        return harness

    return make


class GatedUpper(Processor[str, str]):
    """Upper-cases each value once the test releases its gate (``seq.release(value)``)."""

    def __init__(self, seq: Sequencer) -> None:
        self.seq = seq

    async def process(self, record: Record[str, str]) -> None:
        await self.seq.wait(record.value)
        self.context.forward(record.with_value(record.value.upper()))


def gated_topology(seq: Sequencer) -> Topology:
    """``in`` -> :class:`GatedUpper` -> ``out``."""
    return (Topology().add_source("src", str_topic("in"))
            .add_processor("gated", lambda: GatedUpper(seq), "src")
            .add_sink("sink", str_topic("out"), "gated"))


class QuietListener:
    """A rebalance listener that does nothing: for a consumer whose test drives the task
    itself (assignment is only the consumer's bookkeeping there)."""

    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        pass

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        pass
