"""Interop: what aiostreams writes to Kafka is what another client reads."""

from __future__ import annotations

import asyncio

import pytest
from appkit import create_topic, produce, read_exactly

import aiostreams as ais
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.transport.partitioner import default_partition

pytestmark = [
    pytest.mark.kafka,
    # kafka-python 3.0 still calls importlib.resources.read_text (its problem, not ours)
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]


class Order(ais.Processor[str, dict]):  # type: ignore[type-arg]
    def process(self, record: ais.Record[str, dict]) -> None:  # type: ignore[type-arg]
        self.context.forward(record.with_value({**record.value, "seen": True}))


def read_with_kafka_python(bootstrap: str, topic: str,
                           count: int) -> list[tuple[int, bytes, bytes]]:
    from kafka import KafkaConsumer  # kafka-python: an independent client implementation

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=10_000)
    got: list[tuple[int, bytes, bytes]] = []
    try:
        for message in consumer:
            got.append((message.partition, message.key, message.value))
            if len(got) >= count:
                break
    finally:
        consumer.close()
    return got


async def test_output_is_readable_by_kafka_python_in_murmur2_partitions(
        kafka_bootstrap: str, topic_name) -> None:  # type: ignore[no-untyped-def]
    transport = KafkaTransport(kafka_bootstrap)
    src, dst = topic_name("in"), topic_name("out")
    await create_topic(transport, src, 3)
    await create_topic(transport, dst, 5)  # a different count: the sink repartitions by key
    items = [(f"order-{i}".encode(), b'{"id": %d, "amount": %d.5}' % (i, i)) for i in range(200)]
    await produce(transport, src, items)
    app = ais.App(topic_name("app"), broker=f"kafka://{kafka_bootstrap}")
    app.topic(src, key=str, value=dict)
    app.topic(dst, key=str, value=dict)
    app.topology.add_source("src", src).add_processor("o", Order, "src").add_sink("k", dst, "o")
    async with app:
        await read_exactly(transport, dst, len(items))
    got = await asyncio.get_running_loop().run_in_executor(
        None, read_with_kafka_python, kafka_bootstrap, dst, len(items))
    assert len(got) == len(items)
    import json

    for partition, key, value in got:
        assert partition == default_partition(key, 5, counter=iter(()))
        body = json.loads(value)
        assert body["seen"] is True
        assert key == f"order-{body['id']}".encode()
