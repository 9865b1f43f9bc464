"""Against a real Kafka broker: topic and group administration (``topics delete``,
``groups`` with members and lag per partition, ``groups reset``, refused while the group
has members), and interactive queries across ``run --workers 2``."""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import AsyncIterator, Callable

import aiohttp
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from clikit import Running, cli, free_port_run, topic_with_records

pytestmark = pytest.mark.kafka



async def committed(bootstrap: str, group: str) -> dict[int, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items()}


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
    assert f"group {group!r}: Stable, 1 member(s), lag 9, protocol classic" in out
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


async def test_groups_reset_of_named_topics_moves_their_partitions_and_refuses_unknown_ones(
        kafka_bootstrap: str, topic_name: Callable[[str], str],
        member: tuple[str, str, AIOKafkaConsumer]) -> None:
    topic, group, consumer = member
    await consumer.stop()  # leaves the group
    broker = ("--broker", f"kafka://{kafka_bootstrap}")
    code, out, err = await run("groups", "reset", group, "--topic", topic, "--to-earliest",
                               *broker)
    assert code == 0, err
    assert f"{topic}[0]: 4 -> 0" in out and f"{topic}[1]: 7 -> 0" in out
    assert await committed(kafka_bootstrap, group) == {0: 0, 1: 0}
    never = topic_name("never")
    code, _, err = await run("groups", "reset", group, "--topic", never, "--to-earliest",
                             *broker)
    assert code == 1 and f"topic {never!r} does not exist" in err, err
    assert "unexpected" not in err


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


def test_run_workers_answer_store_queries_for_keys_the_other_worker_owns(
        kafka_bootstrap: str, topic_name: Callable[[str], str]) -> None:
    """Interactive queries with ``--workers 2``: each worker's metrics server answers the
    keys of its partitions and redirects (307) the others to the owning worker."""
    url = f"kafka://{kafka_bootstrap}"
    prefix = topic_name("q")
    port = free_port_run(2)
    running = Running("run", "query_counts:app", "--workers", "2", "--broker", url,
                      "--metrics-port", str(port), QUERY_PREFIX=prefix)
    try:
        owners: dict[str, str] = {}
        while len(set(owners.values())) < 2:  # until each worker owns one partition
            match = running.expect(r"\[worker (\d)\] INFO aiostreams\.worker: assigned "
                                   rf"({re.escape(prefix)}-words-\d)\s*$", timeout=90)
            owners[match.group(2)] = match.group(1)
        keys = [f"k{i}" for i in range(10)]
        asyncio.run(produce_words(kafka_bootstrap, f"{prefix}-words", keys * 3))
        asyncio.run(read_updates(kafka_bootstrap, f"{prefix}-counts", len(keys) * 3))
        redirected = asyncio.run(query_all(port, keys, expected=3))
        running.signal(signal.SIGTERM)
        code, stderr = running.finish(timeout=90)
    finally:
        if running.proc.poll() is None:  # a failed assertion: stop the workers too
            running.signal(signal.SIGTERM)
            running.proc.wait(timeout=90)
        running.kill()
    assert code == 0, stderr
    assert 0 < redirected[0] < len(keys) and redirected[0] + redirected[1] == len(keys)


async def produce_words(bootstrap: str, topic: str, keys: list[str]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for key in keys:
            await producer.send_and_wait(topic, b"w", key=key.encode())
    finally:
        await producer.stop()


async def read_updates(bootstrap: str, topic: str, count: int) -> None:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        seen = 0
        async with asyncio.timeout(60):
            while seen < count:
                batches = await consumer.getmany(timeout_ms=1000)
                seen += sum(len(b) for b in batches.values())
    finally:
        await consumer.stop()


async def query_all(port: int, keys: list[str], expected: int) -> list[int]:
    """Asks both workers for every key; returns how many each redirected."""
    redirected = [0, 0]
    async with aiohttp.ClientSession() as session:
        for worker in (0, 1):
            for key in keys:
                url = f"http://127.0.0.1:{port + worker}/stores/counts/{key}"
                async with session.get(url) as response:
                    body = await response.json()
                    assert response.status == 200, body
                    assert body["value"] == expected
                    if response.history:
                        assert response.history[0].status == 307
                        assert body["worker"] == f"http://127.0.0.1:{port + 1 - worker}"
                        redirected[worker] += 1
                    else:
                        assert body["worker"] == f"http://127.0.0.1:{port + worker}"
    return redirected
