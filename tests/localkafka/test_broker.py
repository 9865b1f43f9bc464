"""The local broker's lifecycle: start, restart and kill keep the address and the data.

These start brokers of their own (a few seconds each), apart from the session's.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

import pytest

from aiostreams.localkafka import BrokerState, LocalKafka, LocalKafkaError
from aiostreams.transport.base import TopicSpec
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition


def test_an_unstarted_broker_has_no_address_and_cannot_restart() -> None:
    kafka = LocalKafka()
    with pytest.raises(LocalKafkaError, match="start"):
        _ = kafka.bootstrap
    with pytest.raises(LocalKafkaError, match="start"):
        kafka.restart()
    kafka.stop()  # idempotent, even before a start
    assert kafka.state is BrokerState.CLOSED


@pytest.mark.kafka
def test_a_broker_that_cannot_bind_fails_with_its_log_and_leaves_nothing() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        kafka = LocalKafka(port=taken.getsockname()[1])
        with pytest.raises(LocalKafkaError, match="exited") as raised:
            kafka.start(timeout=60)

    assert "Address already in use" in str(raised.value)  # the log tail says why
    assert kafka.state is BrokerState.CLOSED


async def produce_and_read_back(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    """Append ``values`` to ``topic`` (creating it) and return everything it holds."""
    transport = KafkaTransport(bootstrap, connect_timeout=30.0)
    admin = transport.admin()
    await admin.start()
    await admin.create_topics([TopicSpec(topic, 1)])
    await admin.stop()
    producer = transport.producer()
    await producer.start()
    try:
        await producer.send_batch([OutgoingRecord(topic, None, v) for v in values])
        await producer.flush()
    finally:
        await producer.stop()
    consumer = transport.consumer(None)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        got: list[RawRecord] = []
        deadline = time.monotonic() + 30
        while len(got) < end:
            assert time.monotonic() < deadline, f"read {len(got)} of {end} records"
            for records in (await consumer.getmany(1.0)).values():
                got.extend(records)
        return [r.value for r in got if r.value is not None]
    finally:
        await consumer.stop()


@pytest.mark.kafka
@pytest.mark.chaos
@pytest.mark.timeout(240)
@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "sigkill"])
async def test_restart_keeps_the_address_and_the_records(
    crash: bool, topic_name: Callable[[str], str]
) -> None:
    kafka = LocalKafka()
    await asyncio.to_thread(kafka.start)
    try:
        address, topic = kafka.bootstrap, topic_name("t")
        assert await produce_and_read_back(address, topic, [b"before"]) == [b"before"]

        if crash:
            kafka.kill()
            assert kafka.state is BrokerState.DOWN
        await asyncio.to_thread(kafka.restart)

        assert kafka.state is BrokerState.RUNNING
        assert kafka.bootstrap == address
        assert await produce_and_read_back(address, topic, [b"after"]) == [b"before", b"after"]
    finally:
        await asyncio.to_thread(kafka.stop)
    assert kafka.state is BrokerState.CLOSED
