"""The output channel (retired outputs waiting for the producer, and their transaction) and
the output router (task id -> channel, the sender), on the memory broker."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.engine.output_channel import OutputChannel
from aiostreams.engine.output_router import OutputRouter
from aiostreams.errors import ProducerFencedError, UnknownTopicError
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.testing import settle
from aiostreams.transport.base import IsolationLevel, Producer
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, TopicPartition

OUT = TopicPartition("out", 0)


def out(*values: str) -> list[OutgoingRecord]:
    return [OutgoingRecord("out", b"k", v.encode(), partition=0) for v in values]


def landed(broker: MemoryBroker) -> list[str]:
    return [r.value.decode() for r in broker.records("out", 0) if r.value is not None]


@given(st.lists(st.lists(st.text(max_size=3), max_size=4), max_size=6))
def test_take_hands_over_everything_added_in_order_and_empties_the_outbox(
        batches: list[list[str]]) -> None:
    channel = OutputChannel(MemoryTransport(MemoryBroker()).producer(), transactional=False,
                            name="test")
    for batch in batches:
        channel.add(out(*batch))
    assert [r.value for r in channel.take()] == [v.encode() for b in batches for v in b]
    assert not channel.pending and channel.take() == []


async def test_after_a_failed_send_nothing_more_goes_out() -> None:
    broker = MemoryBroker()
    producer = MemoryTransport(broker).producer()
    await producer.start()
    channel = OutputChannel(producer, transactional=False, name="test")
    with pytest.raises(UnknownTopicError):
        await channel.send(out("a"))  # the topic does not exist yet
    assert isinstance(channel.error, UnknownTopicError)
    broker.create_topic("out", 1)
    with pytest.raises(UnknownTopicError):
        await channel.send(out("b"))  # would now land, but must not overtake "a"
    assert landed(broker) == []


async def test_a_transactional_send_opens_a_transaction_invisible_until_committed() -> None:
    broker = MemoryBroker()
    broker.create_topic("out", 1)
    transport = MemoryTransport(broker)
    producer = transport.producer(transactional_id="app-0_0")
    await producer.start()
    channel = OutputChannel(producer, transactional=True, name="test")
    channel.add(out("a", "b"))
    await channel.send_pending()
    assert channel.in_transaction
    reader = transport.consumer(None, isolation_level=IsolationLevel.READ_COMMITTED)
    await reader.start()
    assert (await reader.end_offsets([OUT]))[OUT] == 0
    await producer.commit_transaction()
    assert (await reader.end_offsets([OUT]))[OUT] > 0
    assert landed(broker) == ["a", "b"]
    await reader.stop()


async def test_a_fenced_channel_keeps_the_fence_as_its_error() -> None:
    broker = MemoryBroker()
    broker.create_topic("out", 1)
    transport = MemoryTransport(broker)
    old = transport.producer(transactional_id="app-0_0")
    await old.start()
    channel = OutputChannel(old, transactional=True, name="old owner")
    await transport.producer(transactional_id="app-0_0").start()  # the new owner fences
    with pytest.raises(ProducerFencedError):
        await channel.send(out("a"))
    assert isinstance(channel.error, ProducerFencedError)
    assert landed(broker) == []


class _GatedProducer:
    """A real memory producer whose sends wait for ``gate`` (a slow broker)."""

    def __init__(self, inner: Producer) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.sending = asyncio.Event()

    async def send_batch(self, records: Sequence[OutgoingRecord]) -> None:
        self.sending.set()
        await self.gate.wait()
        await self.inner.send_batch(records)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


class _ListSink:
    name = "list"

    def __init__(self, backlog: int) -> None:
        self.records: list[ExternalRecord] = []
        self._backlog = backlog

    def add(self, record: ExternalRecord) -> None:
        self.records.append(record)

    @property
    def backlogged(self) -> bool:
        return len(self.records) >= self._backlog


def router(broker: MemoryBroker, *, exactly_once: bool = False, backlog: int = 10
           ) -> tuple[OutputRouter, _ListSink, list[str]]:
    """A router over ``broker`` with one list sink; the list records commit requests."""
    sink = _ListSink(backlog)
    requests: list[str] = []
    routes = OutputRouter(MemoryTransport(broker), app_id="app", client_id="t",
                          exactly_once=exactly_once,
                          sinks={"list": sink},  # type: ignore[dict-item]
                          request_commit=lambda: requests.append("commit"))
    return routes, sink, requests


async def test_under_exactly_once_each_task_sends_through_a_producer_of_its_own() -> None:
    broker = MemoryBroker()
    broker.create_topic("out", 1)
    routes, _, _ = router(broker, exactly_once=True)
    await routes.start()
    await routes.open("0_0")
    await routes.open("0_1")
    routes.emit("0_0", list(out("a")))
    routes.emit("0_1", list(out("b", "c")))
    assert routes.channel_of("0_0") is not routes.channel_of("0_1")
    assert [r.value for r in routes.channel_of("0_1").take()] == [b"b", b"c"]
    assert routes.channel_of("0_1").producer.transactional
    await routes.close("0_0")
    assert len(routes.channels()) == 1
    await routes.stop(lambda: 1.0)


async def test_external_records_go_to_their_sink_and_a_backlog_asks_for_a_commit() -> None:
    broker = MemoryBroker()
    routes, sink, requests = router(broker, backlog=2)
    await routes.start()
    record = ExternalRecord("list", TopicPartition("in", 0), 0, "k", "v", 0.0)
    routes.emit("0_0", [record])
    assert sink.records == [record] and requests == []
    assert not routes.channel_of("0_0").pending  # nothing for Kafka
    routes.emit("0_0", [record])
    assert requests == ["commit"]
    await routes.stop(lambda: 1.0)


async def gated_sender(broker: MemoryBroker) -> tuple[
        OutputRouter, OutputChannel, _GatedProducer, asyncio.Task[None]]:
    """A started router for task 0_0 on ``broker`` (topic "out" made here) whose channel's
    sends wait for ``gated.gate``, and its send loop running."""
    broker.create_topic("out", 1)
    routes, _, _ = router(broker)
    await routes.start()
    channel = routes.channel_of("0_0")
    gated = _GatedProducer(channel.producer)
    channel.producer = gated  # type: ignore[assignment]
    return routes, channel, gated, asyncio.create_task(routes.send_loop())


async def test_cancelling_the_sender_mid_send_still_lands_the_batch() -> None:
    broker = MemoryBroker()
    routes, channel, gated, sender = await gated_sender(broker)
    routes.emit("0_0", list(out("a", "b")))
    await gated.sending.wait()
    sender.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sender
    gated.gate.set()
    async with channel.lock:  # what a commit does next: wait for the send under way
        pass
    assert landed(broker) == ["a", "b"] and not channel.pending
    await routes.stop(lambda: 1.0)


async def test_a_commit_waiting_for_the_sender_comes_in_after_the_batch_under_way() -> None:
    broker = MemoryBroker()
    routes, channel, gated, sender = await gated_sender(broker)
    routes.emit("0_0", list(out("a")))
    await gated.sending.wait()  # "a" is under way
    routes.emit("0_0", list(out("b")))  # retired while "a" is sent
    taken: list[bytes | None] = []

    async def commit() -> None:  # what a commit does: take the outbox under the lock
        async with channel.lock:
            taken.extend(r.value for r in channel.take())

    committing = asyncio.create_task(commit())
    await settle()  # the commit waits for the lock
    gated.gate.set()
    await committing
    assert taken == [b"b"]  # after "a", before the sender could take "b" too
    assert landed(broker) == ["a"]
    sender.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sender
    await routes.stop(lambda: 1.0)
