"""The transport contract: what every Transport must do, written against the Protocol only.

Parametrized over the transports under test; add ``"kafka"`` to ``TRANSPORTS`` (and a
branch in the ``transport`` fixture) to run the same tests against a real broker. Only
Protocol methods are used here: topics are made with the admin client, records with a
producer, and everything is observed through consumers. Group tests poll members
concurrently until a condition holds (a real broker needs several polls to rebalance);
nothing sleeps.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import AsyncExitStack
from typing import Any, Protocol

import pytest

from aiostreams.errors import ConfigError, ProducerFencedError
from aiostreams.transport.base import (
    Consumer,
    IsolationLevel,
    Producer,
    TopicSpec,
    Transport,
    read_topic_ids,
)
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

TRANSPORTS = ["memory", pytest.param("kafka", marks=pytest.mark.kafka)]
CONVERGE_WITHIN = 60.0
"""Seconds a group gets to settle; a real broker's first rebalance takes a few."""


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> Transport:
    if request.param == "memory":
        return MemoryTransport(MemoryBroker())
    if request.param == "kafka":
        from aiostreams.transport.kafka import KafkaTransport

        # Short heartbeats: members learn of a rebalance within half a second.
        return KafkaTransport(
            request.getfixturevalue("kafka_bootstrap"), heartbeat_interval=0.5,
            session_timeout=10.0,
        )
    raise NotImplementedError(request.param)


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Names unique to this test run, readable in broker logs: ``<prefix>-<test>-<hex>``."""
    test = request.node.originalname.removeprefix("test_")[:40].replace("_", "-")
    return lambda prefix: f"{prefix}-{test}-{uuid.uuid4().hex[:8]}"


async def make_topic(transport: Transport, name: str, partitions: int = 1) -> str:
    admin = transport.admin()
    await admin.start()
    try:
        await admin.create_topics([TopicSpec(name, partitions)])
    finally:
        await admin.stop()
    return name


@pytest.fixture
async def clients() -> AsyncIterator[AsyncExitStack]:
    """Started clients are stopped here at the end of the test, last started first."""
    async with AsyncExitStack() as stack:
        yield stack


class MakeProducer(Protocol):
    async def __call__(self, *, transactional_id: str | None = None) -> Producer: ...


class MakeConsumer(Protocol):
    async def __call__(self, group_id: str | None = None, **options: Any) -> Consumer: ...


@pytest.fixture
def make_producer(transport: Transport, clients: AsyncExitStack) -> MakeProducer:
    async def make(*, transactional_id: str | None = None) -> Producer:
        producer = transport.producer(transactional_id=transactional_id)
        await producer.start()
        clients.push_async_callback(producer.stop)
        return producer

    return make


@pytest.fixture
def make_consumer(transport: Transport, clients: AsyncExitStack) -> MakeConsumer:
    async def make(group_id: str | None = None, **options: Any) -> Consumer:
        consumer = transport.consumer(group_id, **options)
        await consumer.start()
        clients.push_async_callback(consumer.stop)
        return consumer

    return make


class RecordingListener:
    """Records rebalance callbacks in a log shared by every member of a test."""

    def __init__(self, name: str, log: list[tuple[str, str, frozenset[TopicPartition]]]):
        self.name = name
        self.log = log
        self.owned: set[TopicPartition] = set()

    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        self.log.append((self.name, "revoked", frozenset(revoked)))
        self.owned -= set(revoked)

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        self.log.append((self.name, "assigned", frozenset(assigned)))
        self.owned |= set(assigned)


async def produce(producer: Producer, records: Sequence[OutgoingRecord]) -> None:
    await producer.send_batch(records)
    await producer.flush()


async def poll_until(
    consumers: Sequence[Consumer],
    done: Callable[[dict[int, list[RawRecord]]], bool],
    *,
    poll_timeout: float = 0.1,
) -> dict[int, list[RawRecord]]:
    """Poll every consumer concurrently, round after round, until ``done(records so far)``."""
    seen: dict[int, list[RawRecord]] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + CONVERGE_WITHIN
    while not done(seen):
        assert time.monotonic() < deadline, f"no convergence within {CONVERGE_WITHIN}s: {seen}"
        batches = await asyncio.gather(*(c.getmany(poll_timeout) for c in consumers))
        for index, batch in enumerate(batches):
            for records in batch.values():
                seen[index].extend(records)
    return seen


def values(records: Sequence[RawRecord]) -> list[bytes | None]:
    return [r.value for r in records]


# -- admin ------------------------------------------------------------------------------


async def test_created_topic_is_listed_with_its_partition_count(
    transport: Transport, unique: Callable[[str], str]
) -> None:
    topic = await make_topic(transport, unique("t"), partitions=3)
    admin = transport.admin()
    await admin.start()
    try:
        assert await admin.partitions_for(topic) == 3
        assert topic in await admin.list_topics()
        assert await admin.partitions_for(unique("missing")) is None
    finally:
        await admin.stop()


async def test_creating_an_existing_topic_leaves_it_as_it_is(
    transport: Transport, unique: Callable[[str], str]
) -> None:
    topic = await make_topic(transport, unique("t"), partitions=2)
    await make_topic(transport, topic, partitions=5)
    admin = transport.admin()
    await admin.start()
    try:
        assert await admin.partitions_for(topic) == 2
    finally:
        await admin.stop()


async def test_deleted_topic_is_no_longer_listed(
    transport: Transport, unique: Callable[[str], str]
) -> None:
    topic = await make_topic(transport, unique("t"))
    admin = transport.admin()
    await admin.start()
    try:
        await admin.delete_topics([topic])
        assert topic not in await admin.list_topics()
    finally:
        await admin.stop()


# -- producing and reading --------------------------------------------------------------


async def test_offsets_start_at_zero_and_follow_send_order(
    transport: Transport, unique: Callable[[str], str],
    make_producer: MakeProducer, make_consumer: MakeConsumer,
) -> None:
    topic = await make_topic(transport, unique("t"), partitions=2)
    producer = await make_producer()
    sent = [OutgoingRecord(topic, None, b"v%d" % i, partition=1) for i in range(5)]
    await produce(producer, sent)
    consumer = await make_consumer()
    consumer.assign([TopicPartition(topic, 1)])

    got = (await poll_until([consumer], lambda seen: len(seen[0]) >= 5))[0]

    assert [r.offset for r in got] == [0, 1, 2, 3, 4]
    assert values(got) == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    assert {r.tp for r in got} == {TopicPartition(topic, 1)}


async def test_keyed_records_land_on_the_partition_partition_for_names(
    transport: Transport, unique: Callable[[str], str],
    make_producer: MakeProducer, make_consumer: MakeConsumer,
) -> None:
    topic = await make_topic(transport, unique("t"), partitions=4)
    producer = await make_producer()
    keys = [b"key-%d" % i for i in range(20)]
    await produce(producer, [OutgoingRecord(topic, k, k) for k in keys])
    consumer = await make_consumer()
    consumer.assign([TopicPartition(topic, p) for p in range(4)])

    got = (await poll_until([consumer], lambda seen: len(seen[0]) >= 20))[0]

    assert sorted(r.key for r in got if r.key is not None) == sorted(keys)
    for record in got:
        assert record.partition == producer.partition_for(topic, record.key, 4)


async def test_fields_round_trip_and_timestamp_defaults_to_send_time(
    transport: Transport, unique: Callable[[str], str],
    make_producer: MakeProducer, make_consumer: MakeConsumer,
) -> None:
    topic = await make_topic(transport, unique("t"))
    producer = await make_producer()
    before = time.time()
    await produce(producer, [
        OutgoingRecord(topic, None, None),
        OutgoingRecord(topic, b"k", b"v", timestamp=1_700_000_000.5,
                       headers=(("h", b"1"), ("h", b"2"))),
    ])
    after = time.time()
    consumer = await make_consumer()
    consumer.assign([TopicPartition(topic, 0)])

    first, second = (await poll_until([consumer], lambda seen: len(seen[0]) >= 2))[0]

    assert (first.key, first.value, first.headers) == (None, None, ())
    assert before - 1 <= first.timestamp <= after + 1  # Kafka stores milliseconds
    assert (second.key, second.value) == (b"k", b"v")
    assert second.timestamp == pytest.approx(1_700_000_000.5, abs=0.001)
    assert second.headers == (("h", b"1"), ("h", b"2"))


async def test_getmany_returns_nothing_once_the_timeout_passes(
    transport: Transport, unique: Callable[[str], str], make_consumer: MakeConsumer
) -> None:
    topic = await make_topic(transport, unique("t"))
    consumer = await make_consumer()
    consumer.assign([TopicPartition(topic, 0)])

    assert await consumer.getmany(0.05) == {}


async def test_waiting_getmany_returns_a_record_appended_meanwhile(
    transport: Transport, unique: Callable[[str], str],
    make_producer: MakeProducer, make_consumer: MakeConsumer,
) -> None:
    topic = await make_topic(transport, unique("t"))
    tp = TopicPartition(topic, 0)
    consumer = await make_consumer()
    consumer.assign([tp])
    await consumer.position(tp)  # resolve the start offset before anything is appended
    producer = await make_producer()

    waiting = asyncio.create_task(consumer.getmany(CONVERGE_WITHIN))
    await produce(producer, [OutgoingRecord(topic, None, b"hello")])

    assert values((await waiting)[tp]) == [b"hello"]


async def test_no_record_is_returned_twice_and_max_records_caps_a_call(
    transport: Transport, unique: Callable[[str], str],
    make_producer: MakeProducer, make_consumer: MakeConsumer,
) -> None:
    topic = await make_topic(transport, unique("t"), partitions=3)
    producer = await make_producer()
    await produce(producer, [OutgoingRecord(topic, b"%d" % i, b"%d" % i) for i in range(60)])
    consumer = await make_consumer()
    consumer.assign([TopicPartition(topic, p) for p in range(3)])

    got: list[RawRecord] = []
    while len(got) < 60:
        batch = await consumer.getmany(CONVERGE_WITHIN, max_records=7)
        assert 0 < sum(map(len, batch.values())) <= 7
        for tp, records in batch.items():
            assert all(r.tp == tp for r in records)
            got.extend(records)

    assert len({(r.partition, r.offset) for r in got}) == 60
    assert await consumer.getmany(0.05) == {}


async def test_position_seek_and_offset_bounds(
    transport: Transport, unique: Callable[[str], str],
    make_producer: MakeProducer, make_consumer: MakeConsumer,
) -> None:
    topic = await make_topic(transport, unique("t"))
    tp = TopicPartition(topic, 0)
    producer = await make_producer()
    await produce(producer, [OutgoingRecord(topic, None, b"%d" % i) for i in range(4)])
    consumer = await make_consumer()
    consumer.assign([tp])

    await poll_until([consumer], lambda seen: len(seen[0]) >= 4)
    assert await consumer.position(tp) == 4
    assert await consumer.end_offsets([tp]) == {tp: 4}
    assert await consumer.beginning_offsets([tp]) == {tp: 0}

    consumer.seek(tp, 2)
    again = (await poll_until([consumer], lambda seen: len(seen[0]) >= 2))[0]
    assert [r.offset for r in again] == [2, 3]


async def test_paused_partition_returns_nothing_until_resumed(
    transport: Transport, unique: Callable[[str], str],
    make_producer: MakeProducer, make_consumer: MakeConsumer,
) -> None:
    topic = await make_topic(transport, unique("t"), partitions=2)
    paused, running = TopicPartition(topic, 0), TopicPartition(topic, 1)
    producer = await make_producer()
    await produce(producer, [
        OutgoingRecord(topic, None, b"p", partition=0),
        OutgoingRecord(topic, None, b"r", partition=1),
    ])
    consumer = await make_consumer()
    consumer.assign([paused, running])
    consumer.pause([paused])

    first = (await poll_until([consumer], lambda seen: len(seen[0]) >= 1))[0]
    assert await consumer.getmany(0.05) == {}
    consumer.resume([paused])
    second = (await poll_until([consumer], lambda seen: len(seen[0]) >= 1))[0]

    assert values(first) == [b"r"]
    assert values(second) == [b"p"]


# -- consumer groups --------------------------------------------------------------------


async def test_single_member_is_assigned_every_partition_and_reads_them(
    transport: Transport, unique: Callable[[str], str],
    make_producer: MakeProducer, make_consumer: MakeConsumer,
) -> None:
    topic = await make_topic(transport, unique("t"), partitions=3)
    producer = await make_producer()
    await produce(producer, [OutgoingRecord(topic, None, b"x", partition=p) for p in range(3)])
    consumer = await make_consumer(unique("g"))
    log: list[tuple[str, str, frozenset[TopicPartition]]] = []
    consumer.subscribe([topic], RecordingListener("a", log))

    got = (await poll_until([consumer], lambda seen: len(seen[0]) >= 3))[0]

    every = {TopicPartition(topic, p) for p in range(3)}
    assert consumer.assignment() == every
    assert {r.tp for r in got} == every


async def test_an_assigned_member_owns_its_assignment_in_a_later_generation_than_before(
    transport: Transport, unique: Callable[[str], str], make_consumer: MakeConsumer,
) -> None:
    topic = await make_topic(transport, unique("t"), partitions=2)
    group = unique("g")
    first = await make_consumer(group)
    first.subscribe([topic], RecordingListener("a", []))
    await poll_until([first], lambda _: len(first.assignment()) == 2)
    assert first.owns_assignment()
    before = first.generation
    assert before >= 0
    second = await make_consumer(group)
    second.subscribe([topic], RecordingListener("b", []))
    await poll_until([first, second], lambda _: len(second.assignment()) == 1
                     and len(first.assignment()) == 1)
    assert second.owns_assignment() and first.owns_assignment()
    assert second.generation > before  # a later owner holds a later generation


async def test_a_member_without_a_group_always_owns_its_assignment(
    transport: Transport, unique: Callable[[str], str], make_consumer: MakeConsumer,
) -> None:
    topic = await make_topic(transport, unique("t"))
    consumer = await make_consumer()
    consumer.assign([TopicPartition(topic, 0)])
    assert consumer.owns_assignment()
    assert consumer.generation == -1


async def test_members_split_partitions_disjointly_and_hand_over_after_revoking(
    transport: Transport, unique: Callable[[str], str], make_consumer: MakeConsumer
) -> None:
    topic = await make_topic(transport, unique("t"), partitions=4)
    group = unique("g")
    log: list[tuple[str, str, frozenset[TopicPartition]]] = []
    a = await make_consumer(group)
    a.subscribe([topic], RecordingListener("a", log))
    every = frozenset(TopicPartition(topic, p) for p in range(4))
    await poll_until([a], lambda _: a.assignment() == every)

    b = await make_consumer(group)
    b.subscribe([topic], RecordingListener("b", log))
    await poll_until(
        [a, b],
        lambda _: bool(a.assignment()) and bool(b.assignment())
        and a.assignment() | b.assignment() == every,
    )

    assert not a.assignment() & b.assignment()
    for tp in b.assignment():  # b got tp only after a's on_partitions_revoked reported it
        revoked_at = next(i for i, (who, what, tps) in enumerate(log)
                          if who == "a" and what == "revoked" and tp in tps)
        assigned_at = next(i for i, (who, what, tps) in enumerate(log)
                           if who == "b" and what == "assigned" and tp in tps)
        assert revoked_at < assigned_at


async def test_stopped_member_revokes_all_and_the_rest_take_over(
    transport: Transport, unique: Callable[[str], str], make_consumer: MakeConsumer
) -> None:
    topic = await make_topic(transport, unique("t"), partitions=2)
    group = unique("g")
    log: list[tuple[str, str, frozenset[TopicPartition]]] = []
    a, b = await make_consumer(group), await make_consumer(group)
    a.subscribe([topic], RecordingListener("a", log))
    b.subscribe([topic], RecordingListener("b", log))
    await poll_until([a, b], lambda _: bool(a.assignment()) and bool(b.assignment()))
    b_had, mark = b.assignment(), len(log)

    await b.stop()

    revoked_by_stop = {
        tp for who, what, tps in log[mark:] if who == "b" and what == "revoked" for tp in tps
    }
    assert revoked_by_stop == b_had
    every = frozenset(TopicPartition(topic, p) for p in range(2))
    await poll_until([a], lambda _: a.assignment() == every)


async def test_new_member_resumes_from_the_committed_offset(
    transport: Transport, unique: Callable[[str], str],
    make_producer: MakeProducer, make_consumer: MakeConsumer,
) -> None:
    topic = await make_topic(transport, unique("t"))
    tp = TopicPartition(topic, 0)
    group = unique("g")
    producer = await make_producer()
    await produce(producer, [OutgoingRecord(topic, None, b"%d" % i) for i in range(6)])
    first = await make_consumer(group)
    first.subscribe([topic], RecordingListener("first", []))
    await poll_until([first], lambda seen: len(seen[0]) >= 6)
    await first.commit({tp: 4})
    assert await first.committed(tp) == 4
    await first.stop()

    second = await make_consumer(group)
    second.subscribe([topic], RecordingListener("second", []))
    got = (await poll_until([second], lambda seen: len(seen[0]) >= 2))[0]

    assert [r.offset for r in got] == [4, 5]


async def test_latest_reset_starts_at_the_end_without_a_committed_offset(
    transport: Transport, unique: Callable[[str], str],
    make_producer: MakeProducer, make_consumer: MakeConsumer,
) -> None:
    topic = await make_topic(transport, unique("t"))
    tp = TopicPartition(topic, 0)
    producer = await make_producer()
    await produce(producer, [OutgoingRecord(topic, None, b"old")])
    consumer = await make_consumer(unique("g"), auto_offset_reset="latest")
    consumer.subscribe([topic], RecordingListener("a", []))
    await poll_until([consumer], lambda _: consumer.assignment() == {tp})
    assert await consumer.position(tp) == 1
    assert await consumer.committed(tp) is None

    await produce(producer, [OutgoingRecord(topic, None, b"new")])
    got = (await poll_until([consumer], lambda seen: len(seen[0]) >= 1))[0]

    assert values(got) == [b"new"]


# -- transactions -----------------------------------------------------------------------


async def test_read_committed_sees_committed_transactions_only_with_their_offsets(
    transport: Transport, unique: Callable[[str], str],
    make_producer: MakeProducer, make_consumer: MakeConsumer,
) -> None:
    topic = await make_topic(transport, unique("t"))
    source = TopicPartition(topic, 0)
    group = unique("g")
    producer = await make_producer(transactional_id=unique("tx"))
    assert producer.transactional

    await producer.begin_transaction()
    await producer.send_batch([OutgoingRecord(topic, None, b"aborted")])
    await producer.send_offsets_to_transaction({source: 7}, group)
    await producer.abort_transaction()
    await producer.begin_transaction()
    await producer.send_batch([OutgoingRecord(topic, None, b"committed")])
    await producer.send_offsets_to_transaction({source: 3}, group)
    await producer.commit_transaction()

    reader = await make_consumer(isolation_level=IsolationLevel.READ_COMMITTED)
    reader.assign([source])
    got = (await poll_until([reader], lambda seen: b"committed" in values(seen[0])))[0]
    assert values(got) == [b"committed"]
    member = await make_consumer(group)
    assert await member.committed(source) == 3


async def test_a_newer_transactional_producer_fences_the_older_one(
    transport: Transport, unique: Callable[[str], str], make_producer: MakeProducer
) -> None:
    topic = await make_topic(transport, unique("t"))
    transactional_id = unique("tx")
    old = await make_producer(transactional_id=transactional_id)
    await old.begin_transaction()
    await old.send_batch([OutgoingRecord(topic, None, b"zombie")])

    new = await make_producer(transactional_id=transactional_id)

    with pytest.raises(ProducerFencedError):
        await old.commit_transaction()
    await new.begin_transaction()
    await new.send_batch([OutgoingRecord(topic, None, b"fresh")])
    await new.commit_transaction()


@pytest.mark.parametrize(("options", "named"), [
    ({"group_instance_id": "w1"}, "group_instance_id"),
    ({"max_poll_records": 0}, "max_poll_records"),
    ({"auto_offset_reset": "middle"}, "auto_offset_reset"),
])
def test_bad_consumer_options_are_rejected_naming_them(transport: Transport,
                                                       options: dict[str, Any],
                                                       named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        transport.consumer(None, **options)


async def test_a_topic_deleted_and_created_again_has_a_new_id(
        transport: Transport, unique: Callable[[str], str]) -> None:
    topic, absent = unique("incarnated"), unique("absent")
    await make_topic(transport, topic)
    first = await read_topic_ids(transport, [topic, absent])
    assert first[absent] is None
    assert isinstance(first[topic], str) and len(first[topic] or "") == 22  # 16 bytes
    assert await read_topic_ids(transport, [topic]) == {topic: first[topic]}  # stable
    admin = transport.admin()
    await admin.start()
    try:
        await admin.delete_topics([topic])
        assert (await admin.topic_ids([topic]))[topic] is None
        await admin.create_topics([TopicSpec(topic, 1)])
        second = (await admin.topic_ids([topic]))[topic]
    finally:
        await admin.stop()
    assert second is not None and second != first[topic]
