"""Kafka-specific behaviour of the ``kafka://`` transport, against a real broker.

What every transport must do is in ``test_transport_contract.py``; here is what only a real
Kafka shows: connection failures, transaction markers and the last stable offset, and
byte-compatibility of partitioning with the Java client.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack

import pytest

from aiostreams.errors import BrokerUnavailableError, ConfigError, UnknownTopicError
from aiostreams.localkafka import LocalKafka
from aiostreams.transport.base import Consumer, IsolationLevel, TopicSpec
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

pytestmark = pytest.mark.kafka

Names = Callable[[str], str]


@pytest.fixture
def transport(kafka_bootstrap: str) -> KafkaTransport:
    return KafkaTransport(kafka_bootstrap, heartbeat_interval=0.5, session_timeout=10.0)


@pytest.fixture
async def clients() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


async def create_topic(transport: KafkaTransport, name: str, partitions: int = 1) -> str:
    admin = transport.admin()
    await admin.start()
    try:
        await admin.create_topics([TopicSpec(name, partitions)])
    finally:
        await admin.stop()
    return name


async def read_until(
    consumer: Consumer, done: Callable[[list[RawRecord]], bool], within: float = 30.0
) -> list[RawRecord]:
    """Records from ``consumer`` until ``done(records)``; each getmany returns as soon as
    records arrive, the deadline only bounds a broken run."""
    got: list[RawRecord] = []
    deadline = time.monotonic() + within
    while not done(got):
        assert time.monotonic() < deadline, f"gave up after {within} s with {got}"
        for records in (await consumer.getmany(0.5)).values():
            got.extend(records)
    return got


def free_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound and released at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- connecting -------------------------------------------------------------------------


@pytest.mark.parametrize("client", ["producer", "consumer", "admin"])
async def test_unreachable_broker_raises_broker_unavailable_after_the_connect_timeout(
    client: str,
) -> None:
    address = f"127.0.0.1:{free_port()}"
    transport = KafkaTransport(address, connect_timeout=1.0)
    start: Callable[[], Awaitable[None]] = {
        "producer": lambda: transport.producer().start(),
        "consumer": lambda: transport.consumer("g").start(),
        "admin": lambda: transport.admin().start(),
    }[client]

    began = time.monotonic()
    with pytest.raises(BrokerUnavailableError) as raised:
        await start()
    waited = time.monotonic() - began

    assert 0.5 <= waited < 5.0  # it retried for about connect_timeout, then gave up
    assert address in str(raised.value)
    assert "advertised.listeners" in str(raised.value)  # and says what to check


def test_misspelt_option_is_refused_with_the_accepted_names() -> None:
    with pytest.raises(ConfigError, match="connect_timeout"):
        KafkaTransport("127.0.0.1:9092", conect_timeout=1.0)


def test_url_names_every_bootstrap_server() -> None:
    transport = KafkaTransport.from_url("kafka://b1:9092,b2:9093")
    assert transport.url == "kafka://b1:9092,b2:9093"
    with pytest.raises(ConfigError, match="host:port"):
        KafkaTransport.from_url("kafka://b1")


# -- unknown topics ---------------------------------------------------------------------


async def test_sending_to_a_missing_topic_names_it(
    transport: KafkaTransport, topic_name: Names, clients: AsyncExitStack
) -> None:
    producer = transport.producer()
    await producer.start()
    clients.push_async_callback(producer.stop)
    missing = topic_name("missing")

    with pytest.raises(UnknownTopicError, match=missing):
        await producer.send_batch([OutgoingRecord(missing, b"k", b"v")])


async def test_subscribing_to_a_missing_topic_names_it_at_the_next_getmany(
    transport: KafkaTransport, topic_name: Names, clients: AsyncExitStack
) -> None:
    consumer = transport.consumer(topic_name("g"))
    await consumer.start()
    clients.push_async_callback(consumer.stop)
    missing = topic_name("missing")
    consumer.subscribe([missing], _IgnoringListener())

    with pytest.raises(UnknownTopicError, match=missing):
        await consumer.getmany(0.1)


class _IgnoringListener:
    async def on_partitions_revoked(self, revoked: object) -> None:
        pass

    async def on_partitions_assigned(self, assigned: object) -> None:
        pass


# -- rebalance callbacks ----------------------------------------------------------------


class _FailingListener:
    """Records which task ran each callback; ``on_partitions_assigned`` raises."""

    def __init__(self) -> None:
        self.ran_in: list[asyncio.Task[object] | None] = []

    async def on_partitions_revoked(self, revoked: object) -> None:
        self.ran_in.append(asyncio.current_task())

    async def on_partitions_assigned(self, assigned: object) -> None:
        self.ran_in.append(asyncio.current_task())
        raise RuntimeError("boom in on_partitions_assigned")


async def test_rebalance_callbacks_run_inside_getmany_and_their_errors_propagate(
    transport: KafkaTransport, topic_name: Names, clients: AsyncExitStack
) -> None:
    topic = await create_topic(transport, topic_name("t"))
    consumer = transport.consumer(topic_name("g"))
    await consumer.start()
    clients.push_async_callback(consumer.stop)
    listener = _FailingListener()
    consumer.subscribe([topic], listener)

    deadline = time.monotonic() + 30
    with pytest.raises(RuntimeError, match="boom"):  # aiokafka would log and swallow it
        while True:
            assert time.monotonic() < deadline, "the group never assigned the partition"
            await consumer.getmany(0.5)

    assert listener.ran_in == [asyncio.current_task()]
    assert consumer.assignment() == {TopicPartition(topic, 0)}  # assigned all the same


class _CommittingMember:
    """A group member that commits what it has read when partitions are revoked."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.read: list[RawRecord] = []
        self.next_offsets: dict[TopicPartition, int] = {}

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        done = {tp: self.next_offsets.pop(tp) for tp in revoked if tp in self.next_offsets}
        await self.consumer.commit(done)  # inside getmany, before the group moves them

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        pass

    async def poll(self) -> None:
        for tp, records in (await self.consumer.getmany(0.2)).items():
            self.read.extend(records)
            self.next_offsets[tp] = records[-1].offset + 1


async def test_committing_in_on_partitions_revoked_hands_over_without_duplicates(
    transport: KafkaTransport, topic_name: Names, clients: AsyncExitStack
) -> None:
    topic, group = await create_topic(transport, topic_name("t"), partitions=4), topic_name("g")
    producer = transport.producer()
    await producer.start()
    clients.push_async_callback(producer.stop)
    await producer.send_batch([OutgoingRecord(topic, b"%d" % i, b"%d" % i) for i in range(400)])
    await producer.flush()
    members = []
    for _ in range(2):
        consumer = transport.consumer(group, max_poll_records=10)
        await consumer.start()
        clients.push_async_callback(consumer.stop)
        members.append(_CommittingMember(consumer))
    first, second = members

    first.consumer.subscribe([topic], first)
    deadline = time.monotonic() + 30
    while len(first.read) < 100:  # the first member alone reads a part of the topic
        assert time.monotonic() < deadline
        await first.poll()
    second.consumer.subscribe([topic], second)
    while len(first.read) + len(second.read) < 400 or not second.read:
        assert time.monotonic() < deadline, (len(first.read), len(second.read))
        await asyncio.gather(first.poll(), second.poll())

    positions = [(r.partition, r.offset) for r in first.read + second.read]
    assert len(positions) == len(set(positions)) == 400  # each record read exactly once


async def test_pause_and_resume_keep_what_was_fetched_and_deliver_everything_once(
    transport: KafkaTransport, topic_name: Names, clients: AsyncExitStack
) -> None:
    """Back-pressure toggles pause on and off all the time. aiokafka, paused itself, drops
    the records it has fetched for the partition and fetches them again on resume (a
    megabyte a time: wasted fetches, input gaps and, measured, a heap that grew by hundreds
    of megabytes); the consumer pauses by leaving the partition out of its fetches instead,
    so aiokafka never holds a pause, and every record still arrives once, in order."""
    topic = await create_topic(transport, topic_name("t"), partitions=2)
    producer = transport.producer()
    await producer.start()
    clients.push_async_callback(producer.stop)
    await producer.send_batch([OutgoingRecord(topic, None, b"%d" % i, partition=i % 2)
                               for i in range(4000)])
    await producer.flush()
    consumer = transport.consumer(None, max_poll_records=100)
    await consumer.start()
    clients.push_async_callback(consumer.stop)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer.assign([tp0, tp1])
    got: dict[TopicPartition, list[int]] = {tp0: [], tp1: []}
    deadline = time.monotonic() + 60
    round_ = 0
    while len(got[tp0]) + len(got[tp1]) < 4000:
        assert time.monotonic() < deadline, {tp: len(v) for tp, v in got.items()}
        paused = tp0 if round_ % 2 else tp1
        consumer.pause([paused])
        batch = await consumer.getmany(0.5)
        assert paused not in batch  # a paused partition returns nothing
        assert not consumer._consumer.paused()  # type: ignore[union-attr]  # aiokafka never pauses
        consumer.resume([paused])
        for tp, records in batch.items():
            got[tp].extend(int(r.value or b"") for r in records)
        round_ += 1
    assert got[tp0] == list(range(0, 4000, 2))
    assert got[tp1] == list(range(1, 4000, 2))


# -- transactions -----------------------------------------------------------------------


async def test_read_committed_skips_aborted_records_that_read_uncommitted_returns(
    transport: KafkaTransport, topic_name: Names, clients: AsyncExitStack
) -> None:
    topic = await create_topic(transport, topic_name("t"))
    tp = TopicPartition(topic, 0)
    producer = transport.producer(transactional_id=topic_name("tx"))
    await producer.start()
    clients.push_async_callback(producer.stop)

    await producer.begin_transaction()
    await producer.send_batch([OutgoingRecord(topic, None, v) for v in (b"a1", b"a2")])
    await producer.abort_transaction()
    await producer.begin_transaction()
    await producer.send_batch([OutgoingRecord(topic, None, b"c1")])
    await producer.commit_transaction()

    readers = {}
    for level in IsolationLevel:
        reader = transport.consumer(None, isolation_level=level)
        await reader.start()
        clients.push_async_callback(reader.stop)
        reader.assign([tp])
        readers[level] = reader
    committed = await read_until(
        readers[IsolationLevel.READ_COMMITTED], lambda got: any(r.value == b"c1" for r in got)
    )
    everything = await read_until(
        readers[IsolationLevel.READ_UNCOMMITTED], lambda got: any(r.value == b"c1" for r in got)
    )

    assert [r.value for r in committed] == [b"c1"]
    assert [r.value for r in everything] == [b"a1", b"a2", b"c1"]
    # Each transaction ends with a control record: offsets are not dense.
    assert [r.offset for r in everything] == [0, 1, 3]


async def test_open_transaction_holds_back_read_committed_until_it_commits(
    transport: KafkaTransport, topic_name: Names, clients: AsyncExitStack
) -> None:
    topic = await create_topic(transport, topic_name("t"))
    tp = TopicPartition(topic, 0)
    producer = transport.producer(transactional_id=topic_name("tx"))
    await producer.start()
    clients.push_async_callback(producer.stop)
    readers = {}
    for level in IsolationLevel:
        reader = transport.consumer(None, isolation_level=level)
        await reader.start()
        clients.push_async_callback(reader.stop)
        reader.assign([tp])
        readers[level] = reader

    await producer.begin_transaction()
    await producer.send_batch([OutgoingRecord(topic, None, b"pending")])
    await producer.flush()  # in the log, not yet committed

    assert await readers[IsolationLevel.READ_UNCOMMITTED].end_offsets([tp]) == {tp: 1}
    assert await readers[IsolationLevel.READ_COMMITTED].end_offsets([tp]) == {tp: 0}

    await producer.commit_transaction()
    got = await read_until(readers[IsolationLevel.READ_COMMITTED], lambda got: bool(got))
    assert [r.value for r in got] == [b"pending"]
    assert await readers[IsolationLevel.READ_COMMITTED].end_offsets([tp]) == {tp: 2}


# -- interoperability with the Java client ----------------------------------------------


async def test_java_console_producer_puts_keys_where_partition_for_says(
    transport: KafkaTransport, kafka_bootstrap: str, topic_name: Names,
    clients: AsyncExitStack,
) -> None:
    partitions = 7
    topic = await create_topic(transport, topic_name("t"), partitions=partitions)
    keys = [f"key-{i}" for i in range(50)] + ["", "ü-non-ascii", "a" * 300, "21"]
    lines = "".join(f"{key}:value-{i}\n" for i, key in enumerate(keys))
    tools = LocalKafka()  # the session broker's release: 3.9 and 4.x name the class apart
    command = tools.tool_command(
        tools.release.console_producer, "--bootstrap-server", kafka_bootstrap,
        "--topic", topic, "--property", "parse.key=true", "--property", "key.separator=:",
    )
    java = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, stderr = await asyncio.wait_for(java.communicate(lines.encode()), timeout=60)
    finally:
        if java.returncode is None:
            java.kill()
            await java.wait()
    assert java.returncode == 0, stderr.decode()

    producer = transport.producer()
    await producer.start()
    clients.push_async_callback(producer.stop)
    consumer = transport.consumer(None)
    await consumer.start()
    clients.push_async_callback(consumer.stop)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    got = await read_until(consumer, lambda got: len(got) >= len(keys))

    assert sorted(r.key for r in got if r.key is not None) == sorted(k.encode() for k in keys)
    placed = {r.key: r.partition for r in got}
    expected = {
        key: producer.partition_for(topic, key, partitions) for key in placed if key is not None
    }
    assert placed == expected
    assert len(set(placed.values())) > 1  # the keys really were spread
