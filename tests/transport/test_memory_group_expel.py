"""A memory group drops a member as Kafka drops one whose session expired: its partitions go
to the others at once, its commits are refused, it no longer owns its assignment, and at its
next poll it revokes what it held and joins again."""

from __future__ import annotations

import pytest

from aiostreams.errors import CommitFailedError
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.transport.memory_consumer import MemoryConsumer
from aiostreams.types import TopicPartition


class Listener:
    def __init__(self) -> None:
        self.revoked: list[frozenset[TopicPartition]] = []
        self.assigned: list[frozenset[TopicPartition]] = []

    async def on_partitions_revoked(self, revoked: object) -> None:
        self.revoked.append(frozenset(revoked))  # type: ignore[arg-type]

    async def on_partitions_assigned(self, assigned: object) -> None:
        self.assigned.append(frozenset(assigned))  # type: ignore[arg-type]


async def test_an_expelled_member_loses_ownership_and_rejoins_at_its_next_poll() -> None:
    broker = MemoryBroker()
    broker.create_topic("in", 2)
    consumer = MemoryTransport(broker).consumer("g")
    assert isinstance(consumer, MemoryConsumer)
    listener = Listener()
    await consumer.start()
    try:
        consumer.subscribe(["in"], listener)
        await consumer.getmany(0.0)
        every = frozenset({TopicPartition("in", 0), TopicPartition("in", 1)})
        assert consumer.assignment() == every and consumer.owns_assignment()
        member, generation = consumer.member_id, consumer.generation
        assert member is not None
        broker.group("g").expel(member)
        assert not consumer.owns_assignment()
        with pytest.raises(CommitFailedError, match="dropped this member"):
            await consumer.commit({TopicPartition("in", 0): 0})
        await consumer.getmany(0.0)
        assert listener.revoked == [every]
        assert consumer.member_id not in (None, member)
        assert consumer.owns_assignment() and consumer.assignment() == every
        assert consumer.generation > generation
    finally:
        await consumer.stop()
