"""A versioned table and a stream-table join's grace buffer survive SIGKILL and the loss
of the local state (real broker, exactly-once): restored from their changelogs, the
joins continue exactly - the committed output equals an uninterrupted run's, record by
record, per partition."""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import sys
import time
from pathlib import Path

import pytest
from appkit import create_topic, read_exactly
from kafkakit import start_worker, stop_worker

from aiostreams.transport.base import IsolationLevel
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

sys.path.insert(0, str(Path(__file__).parents[1] / "dsl"))
from dslkit import In, make_app, produce, run_app
from versioned_worker import declare

pytestmark = [pytest.mark.kafka, pytest.mark.chaos, pytest.mark.timeout(600)]

T0 = float(int(time.time()) // 1000 * 1000 - 50_000)
VERSIONED_WORKER = Path(__file__).parents[1] / "support" / "versioned_worker.py"


def batch(lo: int, hi: int) -> tuple[list[In], list[In]]:
    """Tier updates (some out of order, some tombstones) and orders (some out of order)
    over 12 customers. All of a batch's updates are older than its orders, and the test
    lets the worker load them before it produces the orders: the outputs then depend on
    no interleaving of the two topics. The second batch (from 600) is 10,000 s later."""
    def base(i: int) -> float:  # near now: the broker deletes records older than a week
        return T0 + (10_000.0 if i >= 600 else 0.0)

    tiers = [In(f"c{i % 12}", None if i % 11 == 10 else f"t{i}",
                base(i) + (i % 600) - (7 if i % 4 == 3 else 0)) for i in range(lo, hi)]
    orders = [In(f"c{i % 12}", f"o{i}", base(i) + 700 + (i % 600) - (5 if i % 3 == 1 else 0))
              for i in range(lo, hi)]
    return tiers, orders


async def produce_timed(transport: KafkaTransport, topic: str, items: list[In]) -> None:
    producer = transport.producer()
    await producer.start()
    try:
        await producer.send_batch([
            OutgoingRecord(topic, r.key.encode(), None if r.value is None else r.value.encode(),
                           r.ts) for r in items])
        await producer.flush()
    finally:
        await producer.stop()


async def read_committed_output(transport: KafkaTransport, topic: str, count: int, *,
                                timeout: float) -> list[RawRecord]:
    """The committed records of ``topic`` once there are ``count`` (or, at ``timeout``,
    those there are: the comparison then shows what is missing)."""
    consumer = transport.consumer(None, isolation_level=IsolationLevel.READ_COMMITTED)
    await consumer.start()
    tps = [TopicPartition(topic, p) for p in range(2)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    got: list[RawRecord] = []
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while len(got) < count:
                    batch = await consumer.getmany(0.5)
                    got.extend(r for records in batch.values() for r in records)
        got.extend(r for records in (await consumer.getmany(0.2)).values() for r in records)
    finally:
        await consumer.stop()
    return got


async def expected_outputs(lo: int, hi: int) -> dict[int, list[tuple[str, str, float]]]:
    app = make_app(max_task_idle_ms=100.0, max_in_flight=64)
    declare(app, "orders", "tiers", "out", persistent=False)
    tiers, orders = batch(lo, hi)
    produce(app, app.topology.topic("tiers"), tiers)  # type: ignore[arg-type]
    produce(app, app.topology.topic("orders"), orders)  # type: ignore[arg-type]
    result = await run_app(app, [app.topology.topic("out")])  # type: ignore[list-item]
    return result.by_partition("out")


async def test_versioned_join_continues_exactly_after_sigkill_and_lost_state(
        kafka_bootstrap: str, topic_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    expected = await expected_outputs(0, 1200)
    count = sum(len(v) for v in expected.values())
    transport = KafkaTransport(kafka_bootstrap)
    src, table, dst = topic_name("orders"), topic_name("tiers"), topic_name("out")
    group = topic_name("app")
    for topic in (src, table, dst, f"{dst}-changes"):
        await create_topic(transport, topic, 2)
    state = tmp_path / "state"
    env = {"WORKER_STATE_DIR": str(state), "WORKER_COMMIT_MS": "100", "WORKER_LOG": "INFO",
           "WORKER_TABLE": table}
    first_tiers, first_orders = batch(0, 600)
    await produce_timed(transport, table, first_tiers)
    worker = start_worker(kafka_bootstrap, group, src, dst, script=VERSIONED_WORKER, **env)
    await read_exactly(transport, f"{dst}-changes", 600, read_committed=True, timeout=180)
    await produce_timed(transport, src, first_orders)
    await read_exactly(transport, dst, 1, read_committed=True, timeout=90)
    await asyncio.sleep(random.Random(5).uniform(0.5, 2.0))  # kill mid-stream, at random
    await stop_worker(worker, kill=True)
    shutil.rmtree(state, ignore_errors=True)
    second_tiers, second_orders = batch(600, 1200)
    await produce_timed(transport, table, second_tiers)
    worker = start_worker(kafka_bootstrap, group, src, dst, script=VERSIONED_WORKER, **env)
    try:
        await read_committed_output(transport, f"{dst}-changes", 1200, timeout=300)
        await produce_timed(transport, src, second_orders)
        got = await read_committed_output(transport, dst, count, timeout=300)
    finally:
        assert await stop_worker(worker) == 0
    by_partition: dict[int, list[tuple[str, str, float]]] = {}
    for r in sorted(got, key=lambda r: (r.partition, r.offset)):
        assert r.key is not None and r.value is not None
        by_partition.setdefault(r.partition, []).append(
            (r.key.decode(), r.value.decode(), r.timestamp))
    assert by_partition == expected
