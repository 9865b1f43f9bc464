"""The Kafka client dying under a worker (issue 33), in a worker process (uvloop on, as
users run it) against a real broker:

* aiokafka's fetcher task killed by the ``KeyError`` a corrupt fetch response raises in it:
  the watchdog notices within seconds, logs an error, the consumer is rebuilt and the
  backlog committed - nothing lost, nothing duplicated under exactly-once;
* a flipped bit in a topic name of fetch responses, through the project's fault proxy:
  recovered from while it is brief; when it persists, the worker stops with an error
  naming the partitions instead of hanging silently;
* a flipped bit inside a record (the CRC catches it): nothing corrupt is accepted, and
  when it persists the worker stops naming the partition.

``AIOSTREAMS_CHAOS_REPEAT=N`` repeats the dead-fetcher test N times per guarantee
(``make test`` runs it once).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from appkit import create_topic, produce, read_exactly, read_until_all_seen
from faultproxy import FaultProxy, proxied_broker
from kafkakit import (
    check_outputs,
    keyed_inputs,
    start_worker,
    stop_worker,
    until_logged,
    wait_exit,
)

from aiostreams.localkafka import LocalKafka
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition

pytestmark = [pytest.mark.kafka, pytest.mark.chaos, pytest.mark.timeout(420),
              pytest.mark.asyncio(loop_scope="module")]

REPEAT = max(1, int(os.environ.get("AIOSTREAMS_CHAOS_REPEAT", "1")))
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) worker (\w+) ")


def log_times(log: Path, text: str) -> list[float]:
    """The times (epoch seconds) of the worker's log lines containing ``text``."""
    times = []
    for line in log.read_text().splitlines():
        match = _STAMP.match(line)
        if match and text in line:
            times.append(datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp())
    return times


NOTICED = "watchdog: the Kafka client died under the worker"


async def committed_all(transport: KafkaTransport, group: str, topic: str, partitions: int,
                        ends: dict[int, int], timeout: float) -> float:
    """Poll the group's committed offsets until they reach ``ends``; returns when (epoch s)."""
    consumer = transport.consumer(group)
    await consumer.start()
    try:
        async with asyncio.timeout(timeout):
            while True:
                now = time.time()
                got = {p: await consumer.committed(TopicPartition(topic, p))
                       for p in range(partitions)}
                if got == ends:
                    return now
                await asyncio.sleep(0.2)  # polling the broker: nothing announces a commit
    finally:
        await consumer.stop()


@pytest.mark.parametrize("repetition", range(REPEAT))
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_a_dead_fetcher_task_is_noticed_the_client_rebuilt_and_nothing_lost(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path, guarantee: str,
        repetition: int) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 4)
    await create_topic(transport, dst, 4)
    inputs = keyed_inputs(8_000, keys=100)
    exactly_once = guarantee == "exactly_once"
    log = tmp_path / "worker.log"
    with log.open("wb") as sink:
        worker = start_worker(kafka_bootstrap, group, src, dst, stderr=sink.fileno(),
                              WORKER_GUARANTEE=guarantee, WORKER_MAX_DELAY_MS="2",
                              WORKER_BREAK_FETCHER_AFTER="2000", WORKER_LOG="INFO")
    try:
        # the fetcher dies at the 2,000th record (at its next fetch request: one already
        # under way still delivers); what is produced once the watchdog has seen it die can
        # only come through a rebuilt consumer
        await produce(transport, src, inputs[:3_000])
        await read_until_all_seen(transport, dst, {v for _, v in inputs[:3_000]},
                                  timeout=120, read_committed=exactly_once)
        await until_logged(log, NOTICED, timeout=30)
        await produce(transport, src, inputs[3_000:])
        outputs = await read_until_all_seen(transport, dst, {v for _, v in inputs},
                                            timeout=120, read_committed=exactly_once)
        check_outputs(outputs, inputs, exactly_once=exactly_once)
        done = await committed_all(transport, group, src, 4, await _ends(transport, src),
                                   timeout=30)
        assert worker.poll() is None, "the worker exited"
    finally:
        code = await stop_worker(worker, timeout=60)
    broke = log_times(log, "breaking aiokafka's fetcher")
    noticed = log_times(log, NOTICED)
    assert broke and noticed, log.read_text()[-3000:]
    assert "its fetcher task failed" in log.read_text()
    assert noticed[0] - broke[0] <= 5.0, f"noticed {noticed[0] - broke[0]:.1f}s after"
    assert done - noticed[0] <= 10.0, f"backlog committed {done - noticed[0]:.1f}s after"
    print(f"\n{guarantee}: noticed {noticed[0] - broke[0]:.2f}s after the fetcher died; "
          f"backlog committed {done - noticed[0]:.2f}s after")
    assert code == 0


async def _ends(transport: KafkaTransport, topic: str) -> dict[int, int]:
    consumer = transport.consumer(None)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(4)])
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        await consumer.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_broker() -> AsyncIterator[tuple[LocalKafka, FaultProxy, str]]:
    """A broker of the module's own (each test has its own topics and group) reached
    through a Kafka-aware FaultProxy (see ``tests/chaos/test_network_faults.py``)."""
    async with proxied_broker(kafka=True) as started:
        yield started


@pytest.fixture
def proxied_kafka(module_broker: tuple[LocalKafka, FaultProxy, str]
                  ) -> tuple[LocalKafka, FaultProxy, str]:
    """The module's broker and proxy (healed: forwarding, corrupting nothing), and the
    address the worker bootstraps at."""
    module_broker[1].forward()
    module_broker[1].stop_corrupting()
    return module_broker


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_corrupt_fetch_responses_are_recovered_from_and_stop_the_worker_if_they_persist(
        proxied_kafka: tuple[LocalKafka, FaultProxy, str], topic_name: Any, tmp_path: Path,
        guarantee: str) -> None:
    kafka, proxy, through_proxy = proxied_kafka
    transport = KafkaTransport(kafka.bootstrap)
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 2)
    await create_topic(transport, dst, 2)
    inputs = keyed_inputs(6_000, keys=60)
    exactly_once = guarantee == "exactly_once"
    name_in_fetches = src.encode()  # topic names travel in fetch responses; no CRC covers
    log = tmp_path / "worker.log"
    with log.open("wb") as sink:
        worker = start_worker(through_proxy, group, src, dst, stderr=sink.fileno(),
                              WORKER_GUARANTEE=guarantee, WORKER_CORRUPT_FETCH_LIMIT="3")
    try:
        await produce(transport, src, inputs[:2_000])
        await read_exactly(transport, dst, 500, timeout=120, read_committed=exactly_once)
        # brief: two responses with a topic name turned uppercase, two with a record's
        # byte flipped (the CRC catches those)
        topic_flips = proxy.corrupt(name_in_fetches, times=2)
        await produce(transport, src, inputs[2_000:3_000])
        await asyncio.wait_for(topic_flips.used_up.wait(), 60)
        await read_until_all_seen(transport, dst, {v for _, v in inputs[:3_000]},
                                  timeout=60, read_committed=exactly_once)
        crc_flips = proxy.corrupt(b"k1", at=1, bit=0, times=2)  # "k1" -> "k0" in a value
        await produce(transport, src, inputs[3_000:])
        await asyncio.wait_for(crc_flips.used_up.wait(), 60)
        outputs = await read_until_all_seen(transport, dst, {v for _, v in inputs},
                                            timeout=120, read_committed=exactly_once)
        check_outputs(outputs, inputs, exactly_once=exactly_once)
        assert worker.poll() is None, "the worker exited on a brief corruption"
        text = log.read_text()
        assert "its fetcher task failed" in text, text[-3000:]
        assert "failed its CRC check" in text, text[-3000:]
        # persistent: every response holding a record is corrupt
        proxy.corrupt(b"k1", at=1, bit=0)
        more = keyed_inputs(6_100, keys=60)[6_000:]
        began = time.monotonic()
        await produce(transport, src, more)
        code = await wait_exit(worker, timeout=90)
        print(f"\n{guarantee}: persistent CRC corruption stopped the worker in "
              f"{time.monotonic() - began:.2f}s")
    finally:
        proxy.stop_corrupting()
        if worker.poll() is None:
            await stop_worker(worker, timeout=60)
    text = log.read_text()
    assert code != 0
    assert "could not be parsed (corrupt_fetch_limit=3)" in text, text[-3000:]
    assert re.search(rf"partition {re.escape(src)}-\d", text), text[-3000:]


async def test_a_topic_name_corrupt_in_every_fetch_stops_the_worker_naming_its_partitions(
        proxied_kafka: tuple[LocalKafka, FaultProxy, str], topic_name: Any,
        tmp_path: Path) -> None:
    kafka, proxy, through_proxy = proxied_kafka
    transport = KafkaTransport(kafka.bootstrap)
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 2)
    await create_topic(transport, dst, 2)
    log = tmp_path / "worker.log"
    with log.open("wb") as sink:
        worker = start_worker(through_proxy, group, src, dst, stderr=sink.fileno(),
                              WORKER_GUARANTEE="exactly_once", WORKER_CORRUPT_FETCH_LIMIT="2")
    try:
        proxy.corrupt(src.encode())  # every fetch response naming the topic
        began = time.monotonic()
        await produce(transport, src, keyed_inputs(100, keys=10))
        code = await wait_exit(worker, timeout=40)
        print(f"\npersistent topic-name corruption stopped the worker in "
              f"{time.monotonic() - began:.2f}s")
    finally:
        proxy.stop_corrupting()
        if worker.poll() is None:
            await stop_worker(worker, timeout=60)
    text = log.read_text()
    assert code != 0
    assert "failed 3 times in a row" in text, text[-3000:]
    assert re.search(rf"while fetching partition\(s\) {re.escape(src)}-0, {re.escape(src)}-1",
                     text), text[-3000:]
