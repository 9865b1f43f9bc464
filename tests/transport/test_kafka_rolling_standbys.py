"""A rolling change of ``num_standby_replicas`` on a real broker: three members, restarted
one at a time from 0 standbys to 1 and back to 0. Every member offers aiostreams' one
group protocol, so at every step the group forms (no ``GroupProtocolError``, no storm: the
generation stops rising), partition *p* of the two co-partitioned topics stays on one
member, and the members asking for standbys get them: each task has one on another member
that asks, wherever there is one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import AsyncExitStack

import pytest

from aiostreams.transport.base import TopicSpec
from aiostreams.transport.group_placement import PlacementReport, StandbyAssignment
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.transport.kafka_consumer import KafkaConsumer
from aiostreams.transport.task_placement import PlacementSettings
from aiostreams.types import TopicPartition

pytestmark = pytest.mark.kafka

PARTITIONS = 4
TASKS = {f"0_{p}" for p in range(PARTITIONS)}
STEP_REBALANCES = 6
"""A restart is a leave and a join (two rebalances, or one when they meet); a storm is
hundreds (aiokafka 0.14 with two assignors listed: generation 190-320 after 40 s)."""
QUIET = 0.6
"""Seconds the generation must then stay put (longer than the heartbeat interval, 0.5 s:
a rebalance the broker began reaches every member at its next heartbeat)."""


class _Plain:
    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        pass

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        pass


class _Keeper(_Plain):
    """A member with one standby asked for, on a host of its own; its task group is the
    two topics, co-partitioned, and stateful."""

    def __init__(self, host: str, topics: tuple[str, str]) -> None:
        self._host, self._topics = host, topics
        self.standbys: StandbyAssignment | None = None

    def placement_report(self) -> PlacementReport:
        return PlacementReport(host=self._host, worker=0, task_groups={"0": self._topics},
                               stateful_groups=frozenset({"0"}),
                               settings=PlacementSettings(num_standby_replicas=1))

    async def on_standbys_assigned(self, assignment: StandbyAssignment) -> None:
        self.standbys = assignment


class _Slot:
    """One of the three members, as it is configured now."""

    def __init__(self, consumer: KafkaConsumer, listener: _Plain) -> None:
        self.consumer, self.listener = consumer, listener

    def tasks(self) -> set[str]:
        return {f"0_{tp.partition}" for tp in self.consumer.assignment()}


def _standbys_expected(slots: list[_Slot]) -> bool:
    """Each keeper was told its standbys: every task has one, on a keeper other than its
    active, where there is such a keeper; nobody else has one."""
    told = {i: s.listener.standbys for i, s in enumerate(slots)
            if isinstance(s.listener, _Keeper)}
    if any(standbys is None for standbys in told.values()):
        return False
    active_of = {t: i for i, s in enumerate(slots) for t in s.tasks()}
    for task in TASKS:
        on = [i for i, standbys in told.items()
              if standbys is not None and task in standbys.standby]
        others = [i for i in told if i != active_of.get(task)]
        if len(on) != min(1, len(others)) or active_of.get(task) in on:
            return False
    return True


def _settled(slots: list[_Slot]) -> bool:
    members = [s.consumer for s in slots]
    assigned = [tp for m in members for tp in m.assignment()]
    return (len(assigned) == len(set(assigned)) == 2 * PARTITIONS
            and all(m.assignment() for m in members)
            and len({m.generation for m in members}) == 1
            and _standbys_expected(slots))


def _whole(slots: list[_Slot], topics: tuple[str, str]) -> None:
    for slot in slots:
        held = slot.consumer.assignment()
        for tp in held:
            assert {TopicPartition(t, tp.partition) for t in topics} <= held, sorted(held)


async def _poll(slots: list[_Slot]) -> None:
    await asyncio.gather(*(s.consumer.getmany(0.2) for s in slots))


@pytest.fixture
async def clients() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


async def test_a_rolling_change_of_standbys_from_0_to_1_and_back_forms_the_group_each_step(
        kafka_bootstrap: str, topic_name: Callable[[str], str], clients: AsyncExitStack
        ) -> None:
    transport = KafkaTransport(kafka_bootstrap, heartbeat_interval=0.5, session_timeout=10.0)
    topics = (topic_name("a"), topic_name("b"))
    group = topic_name("g")
    admin = transport.admin()
    await admin.start()
    try:
        await admin.create_topics([TopicSpec(t, PARTITIONS) for t in topics])
    finally:
        await admin.stop()

    async def member(index: int, standbys: bool) -> _Slot:
        consumer = transport.consumer(group, client_id=f"member-{index}",
                                      state_aware_assignment=standbys)
        await consumer.start()
        clients.push_async_callback(consumer.stop)
        listener = _Keeper(f"host-{index}", topics) if standbys else _Plain()
        consumer.subscribe(list(topics), listener)
        return _Slot(consumer, listener)

    slots = [await member(i, standbys=False) for i in range(3)]
    steps = [(i, True) for i in range(3)] + [(i, False) for i in range(3)]
    generation = -1
    for index, standbys in [(None, False), *steps]:
        if index is not None:
            await slots[index].consumer.stop()
            slots[index] = await member(index, standbys)
        deadline = time.monotonic() + 60  # bounds a broken run; a step takes seconds
        while not _settled(slots):
            assert time.monotonic() < deadline, \
                [(sorted(map(str, s.consumer.assignment())), s.consumer.generation)
                 for s in slots]
            await _poll(slots)
        _whole(slots, topics)
        now = slots[0].consumer.generation
        assert generation < now <= generation + STEP_REBALANCES or index is None, \
            (generation, now)
        quiet_until = time.monotonic() + QUIET
        while time.monotonic() < quiet_until:
            await _poll(slots)
        assert [s.consumer.generation for s in slots] == [now] * 3, "still rebalancing"
        generation = now
