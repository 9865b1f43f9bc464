"""aiostreams against a real Apache Kafka broker (started by the session fixture)."""

from __future__ import annotations

import asyncio
import random

import pytest
from appkit import create_topic, produce, read_exactly, read_until_all_seen
from kafka_worker import RandomDelay
from kafkakit import check_outputs, keyed_inputs, start_worker, stop_worker

import aiostreams as ais
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import OutgoingRecord, TopicPartition

pytestmark = pytest.mark.kafka


def delay_app(name: str, bootstrap: str, src: str, dst: str, *, max_delay: float,
              **settings: object) -> ais.App:
    app = ais.App(name, broker=f"kafka://{bootstrap}", commit_interval_ms=200, **settings)
    app.topic(src, key=str, value=str)
    app.topic(dst, key=str, value=str)
    app.topology.add_source("src", src).add_processor(
        "delay", lambda: RandomDelay(max_delay), "src").add_sink("sink", dst, "delay")
    return app


async def committed_offsets(transport: KafkaTransport, group: str, topic: str,
                            partitions: int) -> dict[int, int | None]:
    consumer = transport.consumer(group)
    await consumer.start()
    try:
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        await consumer.stop()


async def end_offsets(transport: KafkaTransport, topic: str, partitions: int) -> dict[int, int]:
    consumer = transport.consumer(None)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
        return {tp.partition: off for tp, off in ends.items()}
    finally:
        await consumer.stop()


async def test_100k_records_over_8_partitions_arrive_once_in_key_order(
        kafka_bootstrap: str, topic_name) -> None:  # type: ignore[no-untyped-def]
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 8)
    await create_topic(transport, dst, 8)
    inputs = keyed_inputs(100_000, keys=1000)
    await produce(transport, src, inputs)
    app = delay_app(group, kafka_bootstrap, src, dst, max_delay=0.005)
    async with app:
        outputs = await read_exactly(transport, dst, len(inputs), timeout=240)
    check_outputs(outputs, inputs, exactly_once=True)
    assert await committed_offsets(transport, group, src, 8) == await end_offsets(
        transport, src, 8)


async def test_stop_and_restart_mid_stream_loses_nothing(kafka_bootstrap: str,
                                                         topic_name) -> None:  # type: ignore[no-untyped-def]
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 4)
    await create_topic(transport, dst, 4)
    inputs = keyed_inputs(20_000, keys=200)
    await produce(transport, src, inputs)
    first = delay_app(group, kafka_bootstrap, src, dst, max_delay=0.002)
    async with first:
        await read_exactly(transport, dst, 5_000, timeout=120)  # mid-stream
    offsets_at_stop = await committed_offsets(transport, group, src, 4)
    second = delay_app(group, kafka_bootstrap, src, dst, max_delay=0.0)
    async with second:
        outputs = await read_exactly(transport, dst, len(inputs), timeout=120)
    check_outputs(outputs, inputs, exactly_once=True)  # a clean stop commits what it retired
    final = await committed_offsets(transport, group, src, 4)
    for p in range(4):
        assert (offsets_at_stop[p] or 0) <= (final[p] or 0)
    for log in (first.commit_log, second.commit_log):
        seen: dict[TopicPartition, int] = {}
        for entry in log:
            for tp, off in entry.offsets.items():
                assert off >= seen.get(tp, 0), f"{tp} committed offset went back"
                seen[tp] = off


async def test_two_worker_processes_share_partitions_and_survive_one_leaving(
        kafka_bootstrap: str, topic_name) -> None:  # type: ignore[no-untyped-def]
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 8)
    await create_topic(transport, dst, 8)
    inputs = keyed_inputs(40_000, keys=400)
    env = {"WORKER_MAX_DELAY_MS": "2"}
    workers = [start_worker(kafka_bootstrap, group, src, dst, **env) for _ in range(2)]
    try:
        await produce(transport, src, inputs[:20_000])
        await read_exactly(transport, dst, 10_000, timeout=180)
        assert await stop_worker(workers[1]) == 0  # graceful: revokes, commits, leaves
        await produce(transport, src, inputs[20_000:])
        outputs = await read_until_all_seen(transport, dst, {v for _, v in inputs},
                                            timeout=180)
    finally:
        for w in workers:
            await stop_worker(w)
    check_outputs(outputs, inputs, exactly_once=False)


async def test_exactly_once_survives_sigkill(kafka_bootstrap: str,
                                             topic_name) -> None:  # type: ignore[no-untyped-def]
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 4)
    await create_topic(transport, dst, 4)
    inputs = keyed_inputs(30_000, keys=300)
    await produce(transport, src, inputs)
    env = {"WORKER_GUARANTEE": "exactly_once", "WORKER_COMMIT_MS": "100",
           "WORKER_MAX_DELAY_MS": "1", "WORKER_INSTANCE": "w0"}
    rng = random.Random(7)
    for _ in range(3):
        worker = start_worker(kafka_bootstrap, group, src, dst, **env)
        await asyncio.sleep(rng.uniform(2.0, 5.0))  # a random moment, not a wait for an event
        await stop_worker(worker, kill=True)
    worker = start_worker(kafka_bootstrap, group, src, dst, **env)
    try:
        outputs = await read_exactly(transport, dst, len(inputs), timeout=240,
                                     read_committed=True)
    finally:
        await stop_worker(worker)
    check_outputs(outputs, inputs, exactly_once=True)


async def test_caught_up_sees_past_transaction_markers_and_aborted_records(
        kafka_bootstrap: str, topic_name) -> None:  # type: ignore[no-untyped-def]
    """Input written in transactions: the group's committed offset stops short of the end
    (a commit marker, then an aborted transaction and its marker follow the last readable
    record); ``wait_until_caught_up`` still returns, because reading on from there reaches
    the end without a record."""
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 1)
    await create_topic(transport, dst, 1)
    producer = transport.producer(transactional_id=topic_name("tx"))
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_batch([OutgoingRecord(src, b"k", b"v%d" % i) for i in range(5)])
        await producer.commit_transaction()
        await producer.begin_transaction()
        await producer.send_batch([OutgoingRecord(src, b"k", b"aborted")])
        await producer.abort_transaction()
    finally:
        await producer.stop()
    app = delay_app(group, kafka_bootstrap, src, dst, max_delay=0.0,
                    processing_guarantee="exactly_once")
    async with app:
        await app.wait_until_caught_up(timeout=60)
        outputs = await read_exactly(transport, dst, 5)
    assert [r.value for r in outputs] == [b"v%d" % i for i in range(5)]
    committed = (await committed_offsets(transport, group, src, 1))[0]
    assert committed is not None and committed < (await end_offsets(transport, src, 1))[0]
