"""State survives SIGKILL: a SQLite count store restored from its changelog (real broker).

Variants: the local state directory is kept (restore from the checkpoint, or from the
changelog start when there is none) or deleted (restore everything from the changelog).
Exactly-once: final counts are exact. At-least-once: never short (replays may add).
"""

from __future__ import annotations

import asyncio
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest
from appkit import create_topic, produce
from kafkakit import COUNT_WORKER, start_worker, stop_worker

from aiostreams.serde import LongSerde
from aiostreams.transport.base import IsolationLevel
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition

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
