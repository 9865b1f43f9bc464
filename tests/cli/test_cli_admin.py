"""Topic and group administration against a real Kafka broker: ``topics delete``,
``groups`` (members, lag per partition) and ``groups reset`` (refused while the group has
members)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from clikit import cli

pytestmark = pytest.mark.kafka

T0 = 1_700_000_000_000  # ms: record i of a partition has timestamp T0 + 1000 * i


async def committed(bootstrap: str, group: str) -> dict[int, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items()}


async def topic_with_records(bootstrap: str, topic: str, per_partition: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for p in range(2):
            for i in range(per_partition):
                await producer.send_and_wait(topic, b"v", key=b"k", partition=p,
                                             timestamp_ms=T0 + 1000 * i)
    finally:
        await producer.stop()


@pytest.fixture
async def member(kafka_bootstrap: str, topic_name: Callable[[str], str]
                 ) -> AsyncIterator[tuple[str, str, AIOKafkaConsumer]]:
    """A group with one member that committed offsets 4 and 7 of a 10 + 10 record topic."""
    topic, group = topic_name("admin-t"), topic_name("admin-g")
    await topic_with_records(kafka_bootstrap, topic, 10)
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, group_id=group,
                                client_id="the-member", enable_auto_commit=False)
    await consumer.start()
    try:
        while not consumer.assignment():  # each call awaits the broker: the join
            await consumer.getmany(timeout_ms=500)
        await consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(4, ""),
                               TopicPartition(topic, 1): OffsetAndMetadata(7, "")})
        yield topic, group, consumer
    finally:
        await consumer.stop()


async def run(*args: str) -> tuple[int, str, str]:
    done = await asyncio.to_thread(cli, *args)  # the member keeps its heartbeat meanwhile
    return done.returncode, done.stdout, done.stderr


async def test_groups_show_members_and_lag_per_partition(
        kafka_bootstrap: str, member: tuple[str, str, AIOKafkaConsumer]) -> None:
    topic, group, _ = member
    code, out, err = await run("groups", "show", group, "--broker",
                               f"kafka://{kafka_bootstrap}")
    assert code == 0, err
    assert f"group {group!r}: Stable, 1 member(s), lag 9" in out
    assert re.search(rf"member \S+ \(client 'the-member' on 127\.0\.0\.1\): "
                     rf"{topic}\[0\], {topic}\[1\]", out), out
    assert re.search(rf"{topic}\s+0\s+4\s+10\s+6$", out, re.M), out
    assert re.search(rf"{topic}\s+1\s+7\s+10\s+3$", out, re.M), out
    code, out, err = await run("groups", "--broker", f"kafka://{kafka_bootstrap}")
    assert code == 0 and f"group {group!r}: Stable" in out, err


async def test_groups_reset_is_refused_while_the_group_has_members(
        kafka_bootstrap: str, member: tuple[str, str, AIOKafkaConsumer]) -> None:
    _, group, _ = member
    code, _, err = await run("groups", "reset", group, "--to-earliest", "--broker",
                             f"kafka://{kafka_bootstrap}")
    assert code == 1
    assert f"group {group!r} has 1 member(s)" in err and "['the-member']" in err
    assert "nothing was changed" in err
    assert await committed(kafka_bootstrap, group) == {0: 4, 1: 7}


async def test_groups_reset_moves_offsets_once_the_group_is_empty(
        kafka_bootstrap: str, member: tuple[str, str, AIOKafkaConsumer]) -> None:
    topic, group, consumer = member
    await consumer.stop()  # leaves the group
    broker = ("--broker", f"kafka://{kafka_bootstrap}")
    code, out, err = await run("groups", "reset", group, "--shift", "-5", "--dry-run", *broker)
    assert code == 0, err
    assert f"{topic}[0]: 4 -> 0" in out and f"{topic}[1]: 7 -> 2" in out  # clamped at 0
    assert await committed(kafka_bootstrap, group) == {0: 4, 1: 7}  # a dry run
    for args, expected in ((("--shift", "5"), {0: 9, 1: 10}),  # clamped at the end
                           (("--to-earliest",), {0: 0, 1: 0}),
                           (("--to-datetime", "2023-11-14T22:13:23.5Z"), {0: 4, 1: 4}),
                           (("--to-datetime", "2023-11-14T23:13:23.5+01:00"), {0: 4, 1: 4}),
                           (("--to-datetime", "2030-01-01T00:00:00"), {0: 10, 1: 10})):
        code, out, err = await run("groups", "reset", group, *args, *broker)
        assert code == 0, err
        assert f"reset group {group!r}: 2 partition(s)" in out
        assert await committed(kafka_bootstrap, group) == expected, args
    code, _, err = await run("groups", "reset", group, "--to-datetime", "yesterday", *broker)
    assert code == 2 and "not an ISO 8601 time" in err


def test_topics_delete_deletes_and_refuses_unknown_names(
        kafka_bootstrap: str, topic_name: Callable[[str], str]) -> None:
    broker = ("--broker", f"kafka://{kafka_bootstrap}")
    keep, gone, never = topic_name("keep"), topic_name("gone"), topic_name("never")
    for name in (keep, gone):
        assert cli("topics", "create", name, "--partitions", "1", *broker).returncode == 0
    refused = cli("topics", "delete", gone, never, *broker)
    assert refused.returncode == 1
    assert f"no topic(s) ['{never}']" in refused.stderr and "nothing was deleted" in \
        refused.stderr
    deleted = cli("topics", "delete", gone, never, "--if-exists", *broker)
    assert deleted.returncode == 0, deleted.stderr
    assert f"deleted topic {gone!r}" in deleted.stdout
    listed = cli("topics", "list", *broker).stdout
    assert keep in listed and gone not in listed


def test_groups_need_a_kafka_broker() -> None:
    done = cli("groups", "--broker", "memory://x")
    assert done.returncode == 2 and "need a Kafka broker" in done.stderr
