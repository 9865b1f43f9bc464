"""Behaviour of the memory broker beyond the transport contract."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Collection
from contextlib import AsyncExitStack
from typing import Any

import pytest

from aiostreams.errors import (
    CommitFailedError,
    ConfigError,
    ProducerFencedError,
    TransportError,
    UnknownTopicError,
)
from aiostreams.transport.base import Admin, Consumer, Producer, TopicSpec, Transport
from aiostreams.transport.memory import (
    MemoryBroker,
    MemoryConsumer,
    MemoryProducer,
    MemoryTransport,
)
from aiostreams.transport.memory_broker import Waiter
from aiostreams.types import OutgoingRecord, TopicPartition


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def broker() -> MemoryBroker:
    return MemoryBroker()


@pytest.fixture
def transport(broker: MemoryBroker) -> MemoryTransport:
    return MemoryTransport(broker)


@pytest.fixture
async def clients() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


async def started_consumer(
    transport: MemoryTransport, clients: AsyncExitStack, group_id: str | None = None,
    **options: Any,
) -> MemoryConsumer:
    consumer = transport.consumer(group_id, **options)
    await consumer.start()
    clients.push_async_callback(consumer.stop)
    return consumer


async def started_producer(
    transport: MemoryTransport, clients: AsyncExitStack, transactional_id: str | None = None
) -> MemoryProducer:
    producer = transport.producer(transactional_id=transactional_id)
    await producer.start()
    clients.push_async_callback(producer.stop)
    return producer


class Listener:
    """Records callbacks; ``hold_revoke`` makes on_partitions_revoked block until released."""

    def __init__(self, hold_revoke: bool = False) -> None:
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []
        self.revoking = asyncio.Event()
        self.release = asyncio.Event()
        if not hold_revoke:
            self.release.set()

    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        self.events.append(("revoked", frozenset(revoked)))
        self.revoking.set()
        await self.release.wait()

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        self.events.append(("assigned", frozenset(assigned)))


def tps(topic: str, *partitions: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in partitions)


# -- registry, URLs, protocol -----------------------------------------------------------


def test_named_broker_is_the_same_object_per_name_and_unnamed_ones_are_private() -> None:
    name = unique("b")
    assert MemoryBroker.named(name) is MemoryBroker.named(name)
    assert MemoryBroker.named(name) is not MemoryBroker.named(unique("b"))
    assert MemoryBroker() is not MemoryBroker()
    assert MemoryBroker().name is None


def test_url_resolves_to_the_named_broker_and_bare_scheme_to_default() -> None:
    name = unique("b")
    assert MemoryTransport.from_url(f"memory://{name}").broker is MemoryBroker.named(name)
    assert MemoryTransport.from_url(f"memory://{name}/").url == f"memory://{name}"
    assert MemoryTransport.from_url("memory://").broker is MemoryBroker.named("default")


@pytest.mark.parametrize("url", ["kafka://localhost:9092", "memory://bad name", "memory:/x"])
def test_bad_url_is_a_config_error_naming_the_expected_form(url: str) -> None:
    with pytest.raises(ConfigError, match="memory://"):
        MemoryTransport.from_url(url)


def test_memory_clients_satisfy_the_runtime_protocols(transport: MemoryTransport) -> None:
    assert isinstance(transport, Transport)
    assert isinstance(transport.consumer("g"), Consumer)
    assert isinstance(transport.producer(), Producer)
    assert isinstance(transport.admin(), Admin)


# -- topics and producing ---------------------------------------------------------------


async def test_unknown_topic_error_names_the_topic_and_how_to_create_it(
    transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    producer = await started_producer(transport, clients)
    with pytest.raises(UnknownTopicError) as produced:
        await producer.send_batch([OutgoingRecord("nope", None, b"v")])
    consumer = await started_consumer(transport, clients, "g")
    with pytest.raises(UnknownTopicError) as subscribed:
        consumer.subscribe(["nope"], Listener())

    for error in (produced.value, subscribed.value):
        message = str(error)
        assert "'nope'" in message
        assert "create_topics" in message
        assert "create_topic('nope'" in message
        assert "auto_create_partitions" in message


async def test_auto_create_makes_unknown_topics_on_first_use(clients: AsyncExitStack) -> None:
    broker = MemoryBroker(auto_create_partitions=3)
    producer = await started_producer(MemoryTransport(broker), clients)
    await producer.send_batch([OutgoingRecord("fresh", None, b"v")])
    assert broker.partition_count("fresh") == 3


async def test_send_batch_appends_nothing_if_any_record_is_invalid(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("t", 2)
    producer = await started_producer(transport, clients)
    with pytest.raises(ValueError, match="partition 2 of topic 't' does not exist"):
        await producer.send_batch([
            OutgoingRecord("t", None, b"ok"), OutgoingRecord("t", None, b"bad", partition=2),
        ])
    with pytest.raises(UnknownTopicError):
        await producer.send_batch(
            [OutgoingRecord("t", None, b"ok"), OutgoingRecord("x", None, None)]
        )
    assert broker.records("t") == []


async def test_records_get_dense_offsets_and_the_send_time_by_default(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("t", 1)
    producer = await started_producer(transport, clients)
    before = time.time()
    await producer.send_batch([OutgoingRecord("t", None, b"%d" % i) for i in range(3)])
    await producer.send_batch([OutgoingRecord("t", None, b"3", timestamp=0.0)])

    records = broker.records("t", 0)
    assert [r.offset for r in records] == [0, 1, 2, 3]
    assert all(before <= r.timestamp <= time.time() for r in records[:3])
    assert records[3].timestamp == 0.0
    assert broker.end_offset(TopicPartition("t", 0)) == 4


async def test_admin_leaves_an_existing_topic_and_its_records_alone(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("t", 2)
    producer = await started_producer(transport, clients)
    await producer.send_batch([OutgoingRecord("t", None, b"kept")])
    await transport.admin().create_topics([TopicSpec("t", 5)])
    assert broker.partition_count("t") == 2
    assert [r.value for r in broker.records("t")] == [b"kept"]


async def test_deleting_an_unknown_topic_raises_and_deletes_nothing(broker: MemoryBroker) -> None:
    broker.create_topic("t")
    with pytest.raises(UnknownTopicError, match="missing"):
        await MemoryTransport(broker).admin().delete_topics(["t", "missing"])
    assert broker.topic_names() == ["t"]


# -- getmany ----------------------------------------------------------------------------


async def test_getmany_spreads_max_records_fairly_over_partitions(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("t", 3)
    producer = await started_producer(transport, clients)
    await producer.send_batch(
        [OutgoingRecord("t", None, b"", partition=p) for p in range(3) for _ in range(10)]
    )
    consumer = await started_consumer(transport, clients, max_poll_records=6)
    consumer.assign(tps("t", 0, 1, 2))

    batch = await consumer.getmany(0)
    assert {tp.partition: len(rs) for tp, rs in batch.items()} == {0: 2, 1: 2, 2: 2}
    served: list[int] = []
    for _ in range(3):
        served += [tp.partition for tp in await consumer.getmany(0, max_records=1)]
    assert sorted(served) == [0, 1, 2]  # a different partition first on each call


async def test_waiting_getmany_is_woken_by_an_append_from_another_thread(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("t", 1)
    consumer = await started_consumer(transport, clients)
    consumer.assign(tps("t", 0))
    waiting = asyncio.create_task(consumer.getmany(60))
    await asyncio.sleep(0)  # one turn of the loop: the task is now blocked on its waiter
    assert not waiting.done()

    async def produce_on_its_own_loop() -> None:
        producer = transport.producer()
        await producer.start()
        await producer.send_batch([OutgoingRecord("t", None, b"from a thread")])
        await producer.stop()

    await asyncio.to_thread(asyncio.run, produce_on_its_own_loop())

    batch = await waiting
    assert [r.value for r in batch[TopicPartition("t", 0)]] == [b"from a thread"]


def test_waking_a_waiter_of_a_closed_loop_does_nothing() -> None:
    loop = asyncio.new_event_loop()

    async def make() -> Waiter:
        return Waiter(frozenset({"t"}))

    waiter = loop.run_until_complete(make())
    loop.close()
    waiter.wake()


async def test_stop_wakes_a_waiting_getmany_which_returns_nothing(
    broker: MemoryBroker, transport: MemoryTransport
) -> None:
    broker.create_topic("t", 1)
    consumer = transport.consumer("g")
    await consumer.start()
    consumer.subscribe(["t"], Listener())
    waiting = asyncio.create_task(consumer.getmany(60))
    await asyncio.sleep(0)

    await consumer.stop()

    assert await waiting == {}
    with pytest.raises(TransportError, match="stopped"):
        await consumer.getmany(0)


async def test_getmany_before_start_says_to_start(transport: MemoryTransport) -> None:
    with pytest.raises(TransportError, match=r"consumer\.start\(\)"):
        await transport.consumer(None).getmany(0)


async def test_two_concurrent_getmany_on_one_consumer_are_refused(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("t", 1)
    consumer = await started_consumer(transport, clients)
    consumer.assign(tps("t", 0))
    first = asyncio.create_task(consumer.getmany(0.05))
    await asyncio.sleep(0)
    with pytest.raises(TransportError, match="already running"):
        await consumer.getmany(0)
    assert await first == {}


def test_consumer_options_are_validated(transport: MemoryTransport) -> None:
    with pytest.raises(ConfigError, match="auto_offset_reset"):
        transport.consumer("g", auto_offset_reset="smallest")
    with pytest.raises(ConfigError, match="max_poll_records"):
        transport.consumer("g", max_poll_records=0)


# -- groups -----------------------------------------------------------------------------


async def test_partition_moves_only_after_the_slow_old_owner_finishes_revoking(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("t", 2)
    producer = await started_producer(transport, clients)
    await producer.send_batch([OutgoingRecord("t", None, b"p1", partition=1)])
    slow, fresh = Listener(hold_revoke=True), Listener()
    a = await started_consumer(transport, clients, "g")
    a.subscribe(["t"], slow)
    await a.getmany(0)
    assert a.assignment() == tps("t", 0, 1)
    b = await started_consumer(transport, clients, "g")
    b.subscribe(["t"], fresh)

    revoking = asyncio.create_task(a.getmany(60))
    await slow.revoking.wait()
    assert slow.events[-1] == ("revoked", tps("t", 1))
    await b.getmany(0)
    assert b.assignment() == frozenset()  # a still holds partition 1
    with pytest.raises(CommitFailedError):
        await b.commit({TopicPartition("t", 1): 0})
    await a.commit({TopicPartition("t", 1): 0})  # committing inside on_revoked is allowed

    taking_over = asyncio.create_task(b.getmany(60))
    slow.release.set()
    batch = await taking_over

    assert fresh.events == [("assigned", tps("t", 1))]
    assert [r.value for r in batch[TopicPartition("t", 1)]] == [b"p1"]
    assert a.assignment() == tps("t", 0)
    assert broker.committed("g", TopicPartition("t", 1)) == 0
    revoking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await revoking


async def test_range_assignment_keeps_co_partitioned_topics_together(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("left", 4)
    broker.create_topic("right", 4)
    members = [await started_consumer(transport, clients, "g") for _ in range(3)]
    for member in members:
        member.subscribe(["left", "right"], Listener())
    for _ in range(2):
        await asyncio.gather(*(m.getmany(0) for m in members))

    owned = [sorted(m.assignment()) for m in members]
    assert [[str(tp) for tp in tps_] for tps_ in owned] == [
        ["left-0", "left-1", "right-0", "right-1"],
        ["left-2", "right-2"],
        ["left-3", "right-3"],
    ]


async def test_stop_revokes_everything_and_hands_it_to_the_remaining_member(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("t", 2)
    la, lb = Listener(), Listener()
    a = await started_consumer(transport, clients, "g")
    b = await started_consumer(transport, clients, "g")
    a.subscribe(["t"], la)
    b.subscribe(["t"], lb)
    await asyncio.gather(a.getmany(0), b.getmany(0))
    await asyncio.gather(a.getmany(0), b.getmany(0))
    assert (a.assignment(), b.assignment()) == (tps("t", 0), tps("t", 1))

    await b.stop()
    await a.getmany(0)

    assert lb.events[-1] == ("revoked", tps("t", 1))
    assert la.events[-1] == ("assigned", tps("t", 1))
    assert a.assignment() == tps("t", 0, 1)


async def test_deleting_a_subscribed_topic_revokes_its_partitions(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("t", 2)
    listener = Listener()
    consumer = await started_consumer(transport, clients, "g")
    consumer.subscribe(["t"], listener)
    await consumer.getmany(0)

    broker.delete_topics(["t"])
    await consumer.getmany(0)

    assert listener.events[-1] == ("revoked", tps("t", 0, 1))
    assert consumer.assignment() == frozenset()


async def test_commit_outside_the_assignment_names_the_partition(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("t", 2)
    consumer = await started_consumer(transport, clients, "g")
    consumer.assign(tps("t", 0))
    with pytest.raises(CommitFailedError, match="t-1"):
        await consumer.commit({TopicPartition("t", 1): 5})
    await consumer.commit({TopicPartition("t", 0): 5})
    assert broker.committed("g", TopicPartition("t", 0)) == 5


async def test_commit_without_a_group_says_to_give_one(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("t", 1)
    consumer = await started_consumer(transport, clients)
    consumer.assign(tps("t", 0))
    with pytest.raises(ConfigError, match="group_id"):
        await consumer.commit({TopicPartition("t", 0): 1})


# -- transactions -----------------------------------------------------------------------


async def test_transaction_appends_and_commits_offsets_only_on_commit(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("out", 1)
    source = TopicPartition("in", 0)
    producer = await started_producer(transport, clients, transactional_id="tx")

    await producer.begin_transaction()
    await producer.send_batch(
        [OutgoingRecord("out", None, b"a"), OutgoingRecord("out", None, b"b")]
    )
    await producer.send_offsets_to_transaction({source: 2}, "g")
    assert broker.records("out") == []
    assert broker.committed("g", source) is None
    await producer.commit_transaction()

    assert [r.value for r in broker.records("out")] == [b"a", b"b"]
    assert broker.committed("g", source) == 2


async def test_aborted_transaction_leaves_no_trace(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("out", 1)
    producer = await started_producer(transport, clients, transactional_id="tx")
    await producer.begin_transaction()
    await producer.send_batch([OutgoingRecord("out", None, b"a")])
    await producer.send_offsets_to_transaction({TopicPartition("in", 0): 1}, "g")
    await producer.abort_transaction()

    assert broker.records("out") == []
    assert broker.committed("g", TopicPartition("in", 0)) is None
    assert broker.end_offset(TopicPartition("out", 0)) == 0


async def test_fenced_producer_is_refused_and_its_transaction_dropped(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("out", 1)
    old = await started_producer(transport, clients, transactional_id="tx")
    await old.begin_transaction()
    await old.send_batch([OutgoingRecord("out", None, b"zombie")])

    new = await started_producer(transport, clients, transactional_id="tx")

    with pytest.raises(ProducerFencedError, match="transactional_id 'tx'"):
        await old.send_batch([OutgoingRecord("out", None, b"more")])
    with pytest.raises(ProducerFencedError):
        await old.commit_transaction()
    await new.begin_transaction()
    await new.send_batch([OutgoingRecord("out", None, b"fresh")])
    await new.commit_transaction()
    assert [r.value for r in broker.records("out")] == [b"fresh"]


async def test_transaction_misuse_says_what_to_call(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("out", 1)
    plain = await started_producer(transport, clients)
    with pytest.raises(TransportError, match="transactional_id"):
        await plain.begin_transaction()
    transactional = await started_producer(transport, clients, transactional_id=unique("tx"))
    with pytest.raises(TransportError, match="begin_transaction"):
        await transactional.send_batch([OutgoingRecord("out", None, b"x")])
    await transactional.begin_transaction()
    with pytest.raises(TransportError, match="commit or abort"):
        await transactional.begin_transaction()


async def test_subscribing_before_start_joins_the_group_on_start(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("t", 2)
    listener = Listener()
    consumer = transport.consumer("g")
    consumer.subscribe(["t"], listener)
    await consumer.start()
    clients.push_async_callback(consumer.stop)

    await consumer.getmany(0)

    assert listener.events == [("assigned", tps("t", 0, 1))]


async def test_a_second_live_member_with_the_same_instance_id_is_refused(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("t", 1)
    first = await started_consumer(transport, clients, "g", group_instance_id="pod-0")
    first.subscribe(["t"], Listener())
    second = await started_consumer(transport, clients, "g", group_instance_id="pod-0")
    with pytest.raises(TransportError, match="group_instance_id"):
        second.subscribe(["t"], Listener())
    assert await second.getmany(0) == {}  # left unsubscribed, not half-joined
    second.assign(tps("t", 0))


async def test_cancelled_stop_still_leaves_the_group(
    broker: MemoryBroker, transport: MemoryTransport, clients: AsyncExitStack
) -> None:
    broker.create_topic("t", 2)
    slow = Listener(hold_revoke=True)
    a = await started_consumer(transport, clients, "g")
    a.subscribe(["t"], slow)
    await a.getmany(0)
    b = await started_consumer(transport, clients, "g")
    b.subscribe(["t"], Listener())
    revoking = asyncio.create_task(a.getmany(60))
    await slow.revoking.wait()

    stopping = asyncio.create_task(a.stop())
    await asyncio.sleep(0)  # stop() now waits for the revoke callback getmany is running
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    await b.getmany(0)
    slow.release.set()

    assert b.assignment() == tps("t", 0, 1)
    assert await revoking == {}
    assert a.assignment() == frozenset()


async def test_on_revoked_run_by_stop_may_commit(
    broker: MemoryBroker, transport: MemoryTransport
) -> None:
    broker.create_topic("t", 1)
    consumer = transport.consumer("g")

    class CommitOnRevoke(Listener):
        async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
            await consumer.commit(dict.fromkeys(revoked, 3))

    consumer.subscribe(["t"], CommitOnRevoke())
    await consumer.start()
    await consumer.getmany(0)
    await consumer.stop()

    assert broker.committed("g", TopicPartition("t", 0)) == 3
