"""The command line against a real Kafka broker: topics, tail, dlq replay, and ``run
--workers`` sharing partitions in one consumer group."""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaProducer
from clikit import Running, cli

from aiostreams.commands.reader import Start, TopicReader
from aiostreams.engine.failure import dead_letter_record
from aiostreams.transport import transport_for_url
from aiostreams.transport.base import TopicSpec
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

pytestmark = pytest.mark.kafka


def order(i: int) -> bytes:
    item = "poison" if i % 10 == 7 else f"item{i}"
    return json.dumps({"id": f"o{i}", "item": item, "amount": float(i)}).encode()


async def produce(url: str, records: list[OutgoingRecord]) -> None:
    producer = transport_for_url(url).producer()
    await producer.start()
    try:
        await producer.send_batch(records)
        await producer.flush()
    finally:
        await producer.stop()


async def create(url: str, topic: str, partitions: int) -> None:
    admin = transport_for_url(url).admin()
    await admin.start()
    try:
        await admin.create_topics([TopicSpec(topic, partitions)])
    finally:
        await admin.stop()


async def read(url: str, topic: str, count: int) -> list[RawRecord]:
    async with asyncio.timeout(60):
        async with TopicReader(transport_for_url(url), topic) as reader:
            await reader.seek(Start.BEGINNING)
            return [r async for r in reader.records(follow=True, limit=count)]


async def committed(url: str, group: str, tps: list[TopicPartition]) -> dict[TopicPartition,
                                                                             int | None]:
    consumer = transport_for_url(url).consumer(group)
    await consumer.start()
    try:
        consumer.assign(tps)
        return {tp: await consumer.committed(tp) for tp in tps}
    finally:
        await consumer.stop()


def test_topics_create_list_describe(kafka_bootstrap: str,
                                     topic_name: Callable[[str], str]) -> None:
    url = f"kafka://{kafka_bootstrap}"
    topic = topic_name("cli-topic")
    created = cli("topics", "create", topic, "--partitions", "3", "--topic-config",
                  "cleanup.policy=compact", "--broker", url)
    assert created.returncode == 0, created.stderr
    listed = cli("topics", "list", "--broker", url)
    assert listed.returncode == 0, listed.stderr
    assert re.search(rf"^{re.escape(topic)}\s+3 partition\(s\)$", listed.stdout, re.M)
    asyncio.run(produce(url, [OutgoingRecord(topic, b"k", b"v", partition=1)]))
    described = cli("topics", "describe", topic, "--broker", url)
    assert described.returncode == 0, described.stderr
    assert f"topic {topic!r} on {url}: 3 partition(s), 1 record(s)" in described.stdout
    again = cli("topics", "create", topic, "--partitions", "3", "--broker", url)
    assert again.returncode == 1
    assert "exists already" in again.stderr


def test_tail_follows_records_produced_after_it_started(
        kafka_bootstrap: str, topic_name: Callable[[str], str]) -> None:
    url = f"kafka://{kafka_bootstrap}"
    topic = topic_name("cli-tail")
    asyncio.run(create(url, topic, 2))
    asyncio.run(produce(url, [OutgoingRecord(topic, b"old", b"before")]))
    tail = Running("tail", topic, "--broker", url, "--limit", "2")
    try:
        tail.expect(r"tailing .* from the end \(2 partition\(s\)\)")
        asyncio.run(produce(url, [OutgoingRecord(topic, b"a", b"one", partition=0),
                                  OutgoingRecord(topic, b"b", b"two", partition=1)]))
        code, stderr = tail.finish()
    finally:
        tail.kill()
    assert code == 0, stderr
    lines = sorted(tail.stdout)
    assert len(lines) == 2
    assert 'key="a" value="one"' in lines[0] and 'key="b" value="two"' in lines[1]


def test_dlq_replay_sends_dead_letters_back_once(kafka_bootstrap: str,
                                                 topic_name: Callable[[str], str]) -> None:
    url = f"kafka://{kafka_bootstrap}"
    dlq, origin = topic_name("cli-dlq"), topic_name("cli-origin")
    asyncio.run(create(url, dlq, 1))
    asyncio.run(create(url, origin, 2))
    letters = []
    for i in range(3):
        raw = RawRecord(origin, i % 2, 40 + i, 1_700_000_000.0 + i, f"k{i}".encode(),
                        order(i), ())
        letters.append(dead_letter_record(raw, ValueError("downstream 503"), topic=dlq,
                                          attempts=5, processor="enrich"))
    asyncio.run(produce(url, letters))
    shown = cli("dlq", "show", dlq, "--broker", url)
    assert shown.returncode == 0, shown.stderr
    assert f"  origin     {origin}[1]@41" in shown.stdout
    assert "  exception  ValueError: downstream 503" in shown.stdout
    replay = cli("dlq", "replay", dlq, "--broker", url)
    assert replay.returncode == 0, replay.stderr
    assert f"replayed 3 dead letter(s) from {dlq!r} (3 to {origin!r})" in replay.stdout
    back = asyncio.run(read(url, origin, 3))
    assert sorted((r.key, r.value) for r in back) == [(f"k{i}".encode(), order(i))
                                                      for i in range(3)]
    again = cli("dlq", "replay", dlq, "--broker", url)
    assert "replayed 0 dead letter(s)" in again.stdout


async def produce_in_transactions(bootstrap: str, records: list[OutgoingRecord]) -> None:
    """One transaction per record: each commit marker takes an offset of its own."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap,
                                transactional_id=f"dlq-markers-{records[0].topic}")
    await producer.start()
    try:
        for r in records:
            async with producer.transaction():
                await producer.send_and_wait(r.topic, r.value, key=r.key,
                                             headers=list(r.headers))
    finally:
        await producer.stop()


def test_dlq_show_counts_records_not_the_offsets_transaction_markers_take(
        kafka_bootstrap: str, topic_name: Callable[[str], str]) -> None:
    url = f"kafka://{kafka_bootstrap}"
    dlq = topic_name("cli-dlq-txn")
    asyncio.run(create(url, dlq, 1))
    letters = [dead_letter_record(RawRecord("orders", 0, i, 1_700_000_000.0, b"k", order(i),
                                            ()), ValueError("bad"), topic=dlq, attempts=1,
                                  processor="p") for i in range(3)]
    asyncio.run(produce_in_transactions(kafka_bootstrap, letters))
    shown = cli("dlq", "show", dlq, "--broker", url)
    assert shown.returncode == 0, shown.stderr
    # offsets 0..5: three records, three commit markers
    assert shown.stdout.splitlines()[-1] == f"3 dead letter(s) shown; 3 record(s) in {dlq!r}"


def test_run_workers_share_the_partitions_of_one_consumer_group(
        kafka_bootstrap: str, topic_name: Callable[[str], str]) -> None:
    url = f"kafka://{kafka_bootstrap}"
    prefix = topic_name("w")
    orders, upper = f"{prefix}-orders", f"{prefix}-orders-upper"
    asyncio.run(create(url, orders, 2))
    running = Running("run", "cli_demo:app", "--workers", "2", "--broker", url,
                      DEMO_PREFIX=prefix)
    try:
        owners: dict[str, str] = {}
        while len(set(owners.values())) < 2:  # until each worker owns one partition
            match = running.expect(r"\[worker (\d)\] INFO aiostreams\.worker: assigned "
                                   rf"({re.escape(orders)}-\d)\s*$", timeout=90)
            owners[match.group(2)] = match.group(1)
        records = [OutgoingRecord(orders, f"c{i % 5}".encode(), order(i), 1.0 + i)
                   for i in range(40)]
        asyncio.run(produce(url, records))
        out = asyncio.run(read(url, upper, 36))  # 4 of 40 are poison: dead-lettered
        assert len(out) == 36
        running.signal(signal.SIGINT)
        code, stderr = running.finish(timeout=90)
    finally:
        running.kill()
    assert code == 130, stderr  # Ctrl-C, after a graceful stop
    counts = [int(n) for n in re.findall(r"\[worker \d\]: app 'cli-\S+' stopped: (\d+) "
                                         r"record\(s\) in", stderr)]
    assert len(counts) == 2 and all(n > 0 for n in counts) and sum(counts) == 40, stderr
    tps = [TopicPartition(orders, p) for p in (0, 1)]
    offsets = asyncio.run(committed(url, f"cli-{prefix}", tps))  # the group committed all
    assert sum(offset or 0 for offset in offsets.values()) == 40


async def test_reading_a_transactional_topic_to_its_end_ends(
        kafka_bootstrap: str, topic_name: Callable[[str], str]) -> None:
    """The last readable record is followed by a commit marker (and an aborted transaction):
    a read without ``follow`` must still stop at the end, with positions past the markers."""
    url = f"kafka://{kafka_bootstrap}"
    topic = topic_name("tx-topic")
    await create(url, topic, 1)
    producer = transport_for_url(url).producer(transactional_id=topic_name("tx"))
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_batch([OutgoingRecord(topic, None, b"r%d" % i) for i in range(3)])
        await producer.commit_transaction()
        await producer.begin_transaction()
        await producer.send_batch([OutgoingRecord(topic, None, b"aborted")])
        await producer.abort_transaction()
    finally:
        await producer.stop()
    async with asyncio.timeout(60):
        async with TopicReader(transport_for_url(url), topic) as reader:
            await reader.seek(Start.BEGINNING)
            values = [r.value async for r in reader.records(follow=False)]
            ends = await reader.end_offsets()
    assert values == [b"r0", b"r1", b"r2", b"aborted"]  # the CLI reads uncommitted
    assert reader.positions == ends
