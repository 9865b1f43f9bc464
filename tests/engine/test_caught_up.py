"""The caught-up probe behind ``App.wait_until_caught_up``: its answer must not depend on
how fast the broker answers a fetch."""

from __future__ import annotations

from collections.abc import Collection
from typing import Unpack

import pytest
from appkit import create_topic, produce, unique

from aiostreams.engine.caught_up import CaughtUpProbe
from aiostreams.topology.topology import Topology
from aiostreams.transport.base import ConsumerOptions, ConsumerSettings
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.transport.memory_consumer import MemoryConsumer
from aiostreams.types import RawRecord, TopicPartition


class LateFetchConsumer(MemoryConsumer):
    """A reader whose first ``late`` fetches come back empty, as a fetch does when the
    broker's answer arrives after ``getmany`` stopped waiting."""

    late = 3

    async def getmany(self, timeout: float, max_records: int | None = None
                      ) -> dict[TopicPartition, list[RawRecord]]:
        if self.late:
            self.late -= 1
            return {}
        return await super().getmany(timeout, max_records)


class LateFetchTransport(MemoryTransport):
    def consumer(self, group_id: str | None = None, *,
                 options: ConsumerOptions | None = None,
                 **settings: Unpack[ConsumerSettings]) -> MemoryConsumer:
        return LateFetchConsumer(self.broker, ConsumerOptions.of(group_id, options, settings))


async def probe_answer(transport: MemoryTransport, group: str, topic: str) -> bool:
    topology = Topology().add_source("src", topic).add_sink("sink", "out", "src")
    probe = CaughtUpProbe(transport, group, topology.build(), read_committed=False)
    await probe.start()
    try:
        return await probe.caught_up()
    finally:
        await probe.stop()


def commit(broker: MemoryBroker, group: str, offsets: Collection[tuple[TopicPartition, int]]
           ) -> None:
    for tp, offset in offsets:
        broker.group(group).commit({tp: offset})


async def test_a_late_fetch_does_not_make_unprocessed_records_look_processed() -> None:
    broker = MemoryBroker()
    transport = LateFetchTransport(broker)
    topic, group = unique("in"), unique("group")
    await create_topic(transport, topic, 1)
    await produce(transport, topic, [(b"k", b"v%d" % i) for i in range(10)])
    commit(broker, group, [(TopicPartition(topic, 0), 4)])  # 6 records not processed yet
    assert await probe_answer(transport, group, topic) is False


async def test_everything_committed_is_caught_up() -> None:
    broker = MemoryBroker()
    transport = LateFetchTransport(broker)
    topic, group = unique("in"), unique("group")
    await create_topic(transport, topic, 2)
    await produce(transport, topic, [(b"k%d" % i, b"v") for i in range(10)])
    commit(broker, group, [(TopicPartition(topic, p), broker.end_offset(TopicPartition(topic, p)))
                           for p in range(2)])
    assert await probe_answer(transport, group, topic) is True


async def test_records_deleted_below_the_group_offset_are_not_reset_by_the_probe(
        caplog: pytest.LogCaptureFixture) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic, group = unique("in"), unique("group")
    await create_topic(transport, topic, 1)
    await produce(transport, topic, [(None, b"%d" % i) for i in range(10)])
    tp = TopicPartition(topic, 0)
    commit(broker, group, [(tp, 3)])
    broker.delete_records({tp: 6})

    assert not await probe_answer(transport, group, topic)  # records 6..9 wait
    assert [r for r in caplog.records if r.name == "aiostreams.offset_reset"] == []
