"""The local broker's lifecycle: start, restart and kill keep the address and the data.

These start brokers of their own (a few seconds each), apart from the session's.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

import pytest

from aiostreams import App
from aiostreams.localkafka import RELEASES, BrokerState, LocalKafka, LocalKafkaError, kafka_release
from aiostreams.localkafka import broker as broker_module
from aiostreams.localkafka.__main__ import broker_variables
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
def test_a_taken_port_is_refused_before_a_broker_starts_and_leaves_nothing() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        kafka = LocalKafka(port=port)
        with pytest.raises(LocalKafkaError, match=rf"port {port} on 127.0.0.1 is taken by "
                                                  "another process") as raised:
            kafka.start(timeout=60)

    assert "Address already in use" in str(raised.value)
    assert "broker's" not in str(raised.value)  # refused up front: no broker log to show
    assert kafka.state is BrokerState.NEW  # nothing started, nothing on disk


@pytest.mark.kafka
def test_a_broker_whose_port_another_broker_answers_is_not_declared_ready(
        kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The port was free when checked, then another broker took it: that broker answers
    metadata requests, but this one's JVM dies. Start must fail, not hand out the other
    broker's address."""
    other_port = int(kafka_bootstrap.rsplit(":", 1)[1])
    real_free_ports = broker_module._free_ports
    monkeypatch.setattr(broker_module, "_free_ports",
                        lambda port: (other_port, real_free_ports(None)[1]))
    kafka = LocalKafka(port=other_port)
    with pytest.raises(LocalKafkaError, match="exited") as raised:
        kafka.start(timeout=90)
    assert "Address already in use" in str(raised.value)  # its own log says why
    assert kafka.state is BrokerState.CLOSED


def test_localkafka_run_prints_the_variable_apps_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    words = broker_variables("127.0.0.1:9092").split()
    assert words[0] == "export"
    assert "AIOSTREAMS_KAFKA=127.0.0.1:9092" in words  # what the test suite reads
    name, value = words[1].split("=", 1)
    monkeypatch.setenv(name, value)
    assert App("pasted").settings.broker == "kafka://127.0.0.1:9092"  # what apps read


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


@pytest.mark.kafka
@pytest.mark.timeout(240)
async def test_the_release_the_session_does_not_run_starts_and_serves(
        topic_name: Callable[[str], str]) -> None:
    """The session's broker proves its release; this proves the other (3.9 logs through
    log4j 1, 4.x through log4j 2: a wrong logging option and the broker never looks
    started)."""
    others = [v for v in RELEASES if v != kafka_release().version]
    for version in others:
        kafka = LocalKafka(version=version)
        await asyncio.to_thread(kafka.start, 120.0)
        try:
            assert (await produce_and_read_back(kafka.bootstrap, topic_name("t"), [b"x"])
                    == [b"x"])
        finally:
            await asyncio.to_thread(kafka.stop)
