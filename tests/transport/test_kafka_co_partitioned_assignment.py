"""A Kafka group keeps co-partitioned topics together: a task reads partition *p* of each
of its sub-topology's topics (a join's two sides), so the member given ``a-p`` must be given
``b-p`` too, whatever the member and partition counts. (aiokafka's default, round-robin,
dealt ``a-2`` and ``b-2`` to different members of three with four partitions each.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import AsyncExitStack

import pytest

from aiostreams.transport.base import TopicSpec
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.transport.kafka_consumer import KafkaConsumer
from aiostreams.types import TopicPartition

pytestmark = pytest.mark.kafka

PARTITIONS = 4


class _Member:
    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        pass

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        pass


def settled(members: list[KafkaConsumer]) -> bool:
    """Every member holds its share of one generation, and all partitions are held."""
    assigned = [tp for m in members for tp in m.assignment()]
    return (len(assigned) == len(set(assigned)) == 2 * PARTITIONS
            and all(m.assignment() for m in members)
            and len({m.generation for m in members}) == 1)


@pytest.fixture
async def clients() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


async def test_three_members_get_each_partition_of_two_topics_together(
        kafka_bootstrap: str, topic_name: Callable[[str], str], clients: AsyncExitStack
        ) -> None:
    transport = KafkaTransport(kafka_bootstrap, heartbeat_interval=0.5, session_timeout=10.0)
    a, b, group = topic_name("a"), topic_name("b"), topic_name("g")
    admin = transport.admin()
    await admin.start()
    try:
        await admin.create_topics([TopicSpec(a, PARTITIONS), TopicSpec(b, PARTITIONS)])
    finally:
        await admin.stop()
    members: list[KafkaConsumer] = []
    deadline = time.monotonic() + 90  # bounds a broken run; the group answers sooner
    for _ in range(3):  # one at a time, as workers start
        consumer = transport.consumer(group)
        await consumer.start()
        clients.push_async_callback(consumer.stop)
        consumer.subscribe([a, b], _Member())
        members.append(consumer)
        while not settled(members):
            assert time.monotonic() < deadline, [sorted(m.assignment()) for m in members]
            await asyncio.gather(*(m.getmany(0.2) for m in members))

    for member in members:
        topics_of: dict[int, set[str]] = {}
        for tp in member.assignment():
            topics_of.setdefault(tp.partition, set()).add(tp.topic)
        assert all(topics == {a, b} for topics in topics_of.values()), \
            sorted(member.assignment())
