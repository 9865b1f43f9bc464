"""A task reads partition *p* of every topic of its sub-topology together; an assignment
that gives a worker one of them without the others (a group member assigning
round-robin, as older versions did) is refused with an error that says what to do, never
run as a join or merge of one side alone."""

from __future__ import annotations

import pytest

from aiostreams import Processor, Record
from aiostreams.engine.task import TaskSettings
from aiostreams.engine.worker import Worker, WorkerConfig
from aiostreams.errors import CoPartitioningError
from aiostreams.runtime.clock import LoopClock
from aiostreams.serde import StrSerde
from aiostreams.topic import Topic
from aiostreams.topology.topology import Topology
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition


class Upper(Processor[str, str]):
    def process(self, record: Record[str, str]) -> None:
        self.context.forward(record.with_value(record.value.upper()))


def merging_worker() -> Worker:
    topology = (Topology()
                .add_source("left", Topic("a", StrSerde(), StrSerde()))
                .add_source("right", Topic("b", StrSerde(), StrSerde()))
                .add_processor("upper", Upper, "left", "right")
                .add_sink("sink", Topic("out", StrSerde(), StrSerde()), "upper"))
    broker = MemoryBroker()
    for topic in ("a", "b", "out"):
        broker.create_topic(topic, 2)
    return Worker(topology.build(), topology.topics, MemoryTransport(broker),
                  WorkerConfig(app_id="merge", task=TaskSettings()), LoopClock())


async def test_a_task_given_one_side_of_its_co_partitioned_topics_is_refused() -> None:
    worker = merging_worker()
    with pytest.raises(CoPartitioningError, match=r"without partition 1 of \['b'\]"):
        await worker.on_partitions_assigned(
            {TopicPartition("a", 0), TopicPartition("b", 0), TopicPartition("a", 1)})
    assert not worker.tasks  # refused before any task of the assignment opened


async def test_a_task_given_every_topic_at_its_partition_opens_with_all_of_them() -> None:
    worker = merging_worker()
    await worker.on_partitions_assigned({TopicPartition("a", 1), TopicPartition("b", 1)})
    try:
        assert set(worker.tasks) == {"0_1"}
        assert set(worker.tasks["0_1"].partitions) == {TopicPartition("a", 1),
                                                       TopicPartition("b", 1)}
    finally:
        await worker.stop()
