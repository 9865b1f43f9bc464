"""A Kafka group keeps co-partitioned topics together: a task reads partition *p* of each
of its sub-topology's topics (a join's two sides), so the member given ``a-p`` must be given
``b-p`` too, whatever the member and partition counts. (aiokafka's default, round-robin,
dealt ``a-2`` and ``b-2`` to different members of three with four partitions each.) And
members joining together form the group: one assignor is offered, never two (the count is
checked in ``test_kafka_assignor.py``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import AsyncExitStack

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from aiostreams.engine.outage import retriable
from aiostreams.errors import GroupProtocolError
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
    for _ in range(3):  # all at once, as `aiostreams run --workers 3` starts them
        consumer = transport.consumer(group)
        await consumer.start()
        clients.push_async_callback(consumer.stop)
        consumer.subscribe([a, b], _Member())
        members.append(consumer)
    # bounds a broken run; the group forms within seconds (with two protocols listed,
    # aiokafka 0.14's extra JoinGroup kept three members rebalancing past 40 s, 4 of 5)
    deadline = time.monotonic() + 60
    while not settled(members):
        assert time.monotonic() < deadline, [sorted(m.assignment()) for m in members]
        await asyncio.gather(*(m.getmany(0.2) for m in members))

    for member in members:
        topics_of: dict[int, set[str]] = {}
        for tp in member.assignment():
            topics_of.setdefault(tp.partition, set()).add(tp.topic)
        assert all(topics == {a, b} for topics in topics_of.values()), \
            sorted(member.assignment())


class _StateAware(RangePartitionAssignor):  # type: ignore[misc]  # untyped base
    """What the previous version's members with standbys offered (by name: the broker
    refuses a join on the name alone)."""

    name = "aiostreams-state-aware"


@pytest.mark.parametrize("older", [RoundRobinPartitionAssignor, RangePartitionAssignor,
                                   _StateAware], ids=lambda a: a.name)
async def test_a_worker_refused_by_a_group_of_older_members_says_to_stop_them(
        kafka_bootstrap: str, topic_name: Callable[[str], str], clients: AsyncExitStack,
        older: type[AbstractPartitionAssignor]) -> None:
    """Members of older versions offer round-robin, ``range`` (no standbys) or
    ``aiostreams-state-aware``; this one offers ``aiostreams`` alone (two protocols would
    make every join two rebalances under aiokafka 0.14), so the broker refuses it - with an
    error that says what to do (a one-time upgrade), not a retried transport failure."""
    transport = KafkaTransport(kafka_bootstrap, heartbeat_interval=0.5, session_timeout=10.0)
    topic, group = topic_name("t"), topic_name("g")
    admin = transport.admin()
    await admin.start()
    try:
        await admin.create_topics([TopicSpec(topic, 2)])
    finally:
        await admin.stop()
    old = AIOKafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, group_id=group,
                           partition_assignment_strategy=(older,))
    await old.start()
    clients.push_async_callback(old.stop)
    async with asyncio.timeout(60):  # bounds a broken run; the group answers sooner
        while not old.assignment():
            await old.getmany(timeout_ms=200)
    newer = transport.consumer(group)
    await newer.start()
    clients.push_async_callback(newer.stop)
    newer.subscribe([topic], _Member())
    with pytest.raises(GroupProtocolError, match="stop every older member of the group, "
                       "then start this worker") as refused:
        async with asyncio.timeout(60):
            while True:
                await newer.getmany(0.2)
    assert not retriable(refused.value)  # the worker stops, it does not retry for ever

