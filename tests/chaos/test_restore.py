"""State survives SIGKILL: a SQLite count store restored from its changelog (real broker).

Variants: the local state directory is kept (restore from the checkpoint, or from the
changelog start when there is none) or deleted (restore everything from the changelog).
Exactly-once: final counts are exact. At-least-once: never short (replays may add).

And one restore test per stateful operator that had none on a real broker
(``tests/support/operator_worker.py``): kill the app mid-stream (SIGKILL), delete its local
state, restart it with the rest of the input; under exactly-once its committed outputs
continue exactly: per key they are the uninterrupted run's (the test driver's on the same
input), in order for single-input operators; for the stream-stream join, whose two inputs
interleave by fetch timing, and the table-table join, the same multiset.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import struct
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import operator_worker
import pytest
from appkit import create_topic, produce
from kafkakit import COUNT_WORKER, start_worker, stop_worker

from aiostreams import App
from aiostreams.serde import LongSerde
from aiostreams.testing.driver import TopologyTestDriver
from aiostreams.transport.base import IsolationLevel
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import OutgoingRecord, TopicPartition

pytestmark = [pytest.mark.kafka, pytest.mark.chaos]


async def latest_counts_until(transport: KafkaTransport, topic: str, partitions: int,
                              expected: Counter[str], *, exact: bool, read_committed: bool,
                              timeout: float) -> dict[str, int]:
    """Follow ``topic`` until every key's latest count reaches its expectation."""
    consumer = transport.consumer(None, isolation_level=(
        IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED))
    await consumer.start()
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    latest: dict[str, int] = {}
    serde = LongSerde()

    def done() -> bool:
        if exact:
            return latest == dict(expected)
        return all(latest.get(k, 0) >= n for k, n in expected.items())

    try:
        async with asyncio.timeout(timeout):
            while not done():
                batch = await consumer.getmany(0.5)
                for records in batch.values():
                    for r in records:
                        assert r.key is not None
                        latest[r.key.decode()] = serde.deserialize(topic, r.value) or 0
    except TimeoutError:
        short = {k: (latest.get(k), n) for k, n in expected.items() if latest.get(k) != n}
        raise AssertionError(f"counts never settled; (got, want) e.g. "
                             f"{dict(list(short.items())[:5])}") from None
    finally:
        await consumer.stop()
    return latest


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
@pytest.mark.parametrize("keep_state", [True, False], ids=["state-kept", "state-deleted"])
async def test_counts_survive_sigkill(kafka_bootstrap: str, topic_name, tmp_path: Path,  # type: ignore[no-untyped-def]
                                      guarantee: str, keep_state: bool) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, group = topic_name("in"), topic_name("counts"), topic_name("app")
    await create_topic(transport, src, 2)
    await create_topic(transport, dst, 2)
    words = [f"w{i % 37}" for i in range(30_000)]
    random.Random(3).shuffle(words)
    state = tmp_path / "state"
    env = {"WORKER_GUARANTEE": guarantee, "WORKER_STATE_DIR": str(state),
           "WORKER_COMMIT_MS": "100"}
    half = len(words) // 2
    await produce(transport, src, [(w.encode(), b"1") for w in words[:half]])
    worker = start_worker(kafka_bootstrap, group, src, dst, script=COUNT_WORKER, **env)
    await latest_counts_until(transport, dst, 2, Counter({words[0]: 1}), exact=False,
                              read_committed=guarantee == "exactly_once", timeout=60)
    await asyncio.sleep(random.Random(4).uniform(1.0, 3.0))  # kill mid-stream, at random
    await stop_worker(worker, kill=True)
    if not keep_state:
        shutil.rmtree(state, ignore_errors=True)
    await produce(transport, src, [(w.encode(), b"1") for w in words[half:]])
    worker = start_worker(kafka_bootstrap, group, src, dst, script=COUNT_WORKER, **env)
    try:
        exactly_once = guarantee == "exactly_once"
        final = await latest_counts_until(transport, dst, 2, Counter(words), exact=exactly_once,
                                          read_committed=exactly_once, timeout=180)
    finally:
        assert await stop_worker(worker) == 0
    expected = Counter(words)
    if exactly_once:
        assert final == dict(expected)
    else:
        assert all(final[k] >= n for k, n in expected.items())


OPERATOR_WORKER = Path(operator_worker.__file__)
OUTPUT = tuple[bytes | None, bytes | None]  # one output record: key, value


def operator_inputs(n: int, two_sides: bool, base: float) -> list[tuple[str, str, int, float]]:
    """(side, key, value, timestamp s): six keys (each on both sides of a join), 50 ms
    apart from ``base``, with a 10 s pause every 100 records (so sessions close);
    timestamps only increase (a node's stream time starts again after a restart, as in
    Kafka Streams).

    ``base`` must be recent: the broker deletes whole logs (the active segment too) whose
    newest timestamp is older than ``retention.ms`` (7 days) at each retention check
    (every 5 minutes); records stamped near 1970 made inputs, outputs and window-store
    changelogs vanish mid-test."""
    return [("right" if two_sides and i % 2 else "left", f"k{i // 2 % 6}", i,
             base + i * 0.05 + (i // 100) * 10.0) for i in range(n)]


async def expected_outputs(operator: str, inputs: list[tuple[str, str, int, float]],
                           two_sides: bool) -> list[OUTPUT]:
    """The uninterrupted run: the same topology in the test driver."""
    app = App(f"expected-{operator}", broker=f"memory://expected-{operator}",
              processing_guarantee="exactly_once")
    operator_worker.build(app, operator, "left", "right" if two_sides else None, "out")
    async with TopologyTestDriver(app) as driver:
        for side, key, value, ts in inputs:
            driver.pipe_input(side, key, value, ts)
        await driver.process_all(timeout=120)
        return [(r.key, r.value) for r in driver.read_raw_output("out")]


def per_key(records: list[OUTPUT], how: str) -> dict[bytes | None, Any]:
    grouped: dict[bytes | None, list[bytes | None]] = {}
    for k, v in records:
        grouped.setdefault(k, []).append(v)
    if how == "multiset":
        return {k: sorted(vs, key=repr) for k, vs in grouped.items()}
    return grouped


async def produce_timed(transport: KafkaTransport, topics: dict[str, str],
                        inputs: list[tuple[str, str, int, float]]) -> None:
    producer = transport.producer()
    await producer.start()
    try:
        await producer.send_batch([OutgoingRecord(topics[side], key.encode(),
                                                  struct.pack(">q", value), ts)
                                   for side, key, value, ts in inputs])
        await producer.flush()
    finally:
        await producer.stop()


async def follow(transport: KafkaTransport, topic: str,
                 done: Callable[[list[OUTPUT]], bool], timeout: float) -> list[OUTPUT]:
    """Read ``topic`` (committed records only) from the start until ``done(records)``."""
    consumer = transport.consumer(None, isolation_level=IsolationLevel.READ_COMMITTED)
    await consumer.start()
    tps = [TopicPartition(topic, p) for p in range(2)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    got: list[OUTPUT] = []
    try:
        async with asyncio.timeout(timeout):
            while not done(got):
                for records in (await consumer.getmany(0.5)).values():
                    got.extend((r.key, r.value) for r in records)
    except TimeoutError:
        raise AssertionError(f"{topic}: the outputs never settled; {len(got)} read, the "
                             f"last: {got[-5:]}") from None
    finally:
        await consumer.stop()
    return got


async def transport_beginning_offsets(transport: KafkaTransport, topic: str
                                     ) -> dict[TopicPartition, int]:
    consumer = transport.consumer(None)
    await consumer.start()
    try:
        return await consumer.beginning_offsets([TopicPartition(topic, p) for p in range(2)])
    finally:
        await consumer.stop()


HOW = {"stream_stream_join": "multiset", "table_table_join": "multiset"}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("operator", list(operator_worker.OPERATORS))
async def test_operator_outputs_continue_exactly_after_sigkill_and_state_deletion(  # type: ignore[no-untyped-def]
        kafka_bootstrap: str, topic_name, tmp_path: Path, operator: str) -> None:
    two_sides = operator.endswith("_join")
    how = HOW.get(operator, "sequence")
    inputs = operator_inputs(1200, two_sides, base=float(int(time.time()) // 60 * 60))
    raw = await expected_outputs(operator, inputs, two_sides)
    expected = per_key(raw, how)
    assert len(expected) >= 6
    transport = KafkaTransport(kafka_bootstrap)
    topics = {"left": topic_name("left"), "right": topic_name("right")}
    dst, group = topic_name("out"), topic_name("app")
    for topic in [*topics.values(), dst]:
        await create_topic(transport, topic, 2)
    state = tmp_path / "state"
    env = {"WORKER_OPERATOR": operator, "WORKER_STATE_DIR": str(state),
           "WORKER_COMMIT_MS": "100", "WORKER_SRC2": topics["right"] if two_sides else ""}
    half = len(inputs) // 2
    await produce_timed(transport, topics, inputs[:half])
    worker = start_worker(kafka_bootstrap, group, topics["left"], dst,
                          script=OPERATOR_WORKER, **env)
    await follow(transport, dst, lambda got: len(got) > 0, timeout=60)
    await stop_worker(worker, kill=True)  # as soon as a first result is committed
    shutil.rmtree(state, ignore_errors=True)
    await produce_timed(transport, topics, inputs[half:])
    worker = start_worker(kafka_bootstrap, group, topics["left"], dst,
                          script=OPERATOR_WORKER, **env)
    try:
        # read until every key has at least its expected number of outputs (a duplicate
        # then shows in the comparison below, not as a timeout)
        want = {k: len(v) for k, v in per_key(raw, "sequence").items()}
        got = await follow(transport, dst, lambda got: all(
            n <= Counter(k for k, _ in got)[k] for k, n in want.items()), timeout=180)
    finally:
        assert await stop_worker(worker) == 0
    assert per_key(got, how) == expected
    # nothing this test wrote was deleted by the broker's time retention (the cause of
    # outputs that never settled, and of a window counted once too often, before the
    # inputs carried recent timestamps)
    for topic in [*topics.values(), dst]:
        starts = await transport_beginning_offsets(transport, topic)
        assert set(starts.values()) == {0}, (topic, starts)
