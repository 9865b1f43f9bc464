"""The topics an app creates for itself carry Kafka Streams' configs, on a real broker, and
repartition topics are purged once their records are committed (they never expire by
time, so reprocessing old data through ``group_by`` loses nothing)."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from appkit import create_topic, produce

import aiostreams as ais
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition

pytestmark = pytest.mark.kafka


async def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [response] = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)])
        [(_, _, _, _, entries)] = response.resources
        return {name: value for name, value, *_ in entries}
    finally:
        await admin.close()


async def beginning_offsets(transport: KafkaTransport, topic: str,
                            partitions: int) -> dict[int, int]:
    consumer = transport.consumer(None)
    await consumer.start()
    try:
        starts = await consumer.beginning_offsets(
            [TopicPartition(topic, p) for p in range(partitions)])
        return {tp.partition: offset for tp, offset in starts.items()}
    finally:
        await consumer.stop()


async def test_repartition_and_changelog_topics_get_kafka_streams_configs_and_are_purged(
        kafka_bootstrap: str, topic_name: Any) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 2)
    await produce(transport, src, [(f"k{i}".encode(), f"w{i % 7}".encode())
                                   for i in range(700)])
    app = ais.App(group, broker=f"kafka://{kafka_bootstrap}", commit_interval_ms=100,
                  repartition_purge_interval_ms=0)
    words = app.topic(src, key=str, value=str)
    counts = app.topic(dst, key=str, value=int, partitions=2)
    (app.stream(words).group_by(lambda _k, word: word, name="by-word")
     .count(materialized="counts").to_stream().to(counts))
    async with app:
        await app.wait_until_caught_up(timeout=120)
        assert app.inspect().worker is not None  # internal: forces a commit now
        await app.inspect().worker.commit()
        repartition = f"{group}-by-word-repartition"
        changelog = app.inspect().worker.changelog_topic("counts")
        purged = await beginning_offsets(transport, repartition, 2)
    assert sum(purged.values()) == 700, purged  # everything consumed was deleted

    config = await topic_configs(kafka_bootstrap, repartition)
    assert {k: config[k] for k in ("cleanup.policy", "retention.ms", "segment.bytes",
                                   "message.timestamp.type")} == {
        "cleanup.policy": "delete", "retention.ms": "-1", "segment.bytes": "52428800",
        "message.timestamp.type": "CreateTime"}
    config = await topic_configs(kafka_bootstrap, changelog)
    assert (config["cleanup.policy"], config["message.timestamp.type"]) == (
        "compact", "CreateTime")
