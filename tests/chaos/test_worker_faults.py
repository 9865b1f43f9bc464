"""Workers that the group gives up on, and stops while the broker is gone (issue 24).

* A worker frozen (SIGSTOP) past its session timeout is dropped by the group; its partitions
  move to the other worker. When it resumes, its commit is refused (at-least-once) or its
  producer is fenced (exactly-once): it must close those tasks without committing, rejoin and
  carry on - not exit, not hang - and every input still gets its output (exactly once under
  exactly-once).
* A graceful stop while the broker answers nothing ends within ``drain_timeout`` plus a small
  constant, says what was not committed (an error, not a clean exit), and a later worker
  processes it: nothing is lost.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from typing import Any

import pytest
from appkit import create_topic, produce, read_exactly, read_until_all_seen
from kafkakit import check_outputs, keyed_inputs, start_worker, stop_worker, wait_exit

from aiostreams.engine.worker import STOP_GRACE
from aiostreams.errors import TransportError
from aiostreams.localkafka import LocalKafka
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition

pytestmark = [pytest.mark.kafka, pytest.mark.chaos, pytest.mark.timeout(420)]

SESSION_TIMEOUT = 6.0


async def until_led(transport: KafkaTransport, topics: list[str],
                    timeout: float = 60.0) -> None:
    """Return once the broker serves ``topics`` again. A broker resumed after a long
    SIGSTOP answers metadata requests before its partitions have a leader again (the
    controller fenced it meanwhile); nothing announces that moment, so ask until it does."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        consumer = transport.consumer(None)
        try:
            await consumer.start()
            await consumer.end_offsets([TopicPartition(t, 0) for t in topics])
            return
        except TransportError:
            if loop.time() > deadline:
                raise
        finally:
            await consumer.stop()
        await asyncio.sleep(0.5)  # the broker gets its leadership back meanwhile


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_a_worker_frozen_past_its_session_timeout_rejoins_and_loses_nothing(
        kafka_bootstrap: str, topic_name: Any, guarantee: str) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 4)
    await create_topic(transport, dst, 4)
    inputs = keyed_inputs(20_000, keys=200)
    workers = [start_worker(kafka_bootstrap, group, src, dst, WORKER_GUARANTEE=guarantee,
                            WORKER_MAX_DELAY_MS="50", WORKER_INSTANCE=f"{group}-{i}",
                            WORKER_SESSION_TIMEOUT=str(SESSION_TIMEOUT),
                            WORKER_LOG="WARNING")
               for i in range(2)]
    exactly_once = guarantee == "exactly_once"
    try:
        await produce(transport, src, inputs)
        # both have joined and are busy once outputs flow
        await read_exactly(transport, dst, 1, timeout=120, read_committed=exactly_once)
        frozen = workers[0]
        frozen.send_signal(signal.SIGSTOP)
        # the survivor takes over the frozen worker's partitions and makes progress
        await read_exactly(transport, dst, 10_000, timeout=120, read_committed=exactly_once)
        assert frozen.poll() is None
        frozen.send_signal(signal.SIGCONT)
        outputs = await read_until_all_seen(transport, dst, {v for _, v in inputs},
                                            timeout=240, read_committed=exactly_once)
        check_outputs(outputs, inputs, exactly_once=exactly_once)
        assert [w.poll() for w in workers] == [None, None], "a worker exited"
    finally:
        codes = [await stop_worker(w, timeout=60) for w in workers]
    assert codes == [0, 0]


async def test_a_graceful_stop_during_a_broker_outage_ends_within_the_drain_timeout(
        topic_name: Any) -> None:
    loop = asyncio.get_running_loop()
    kafka = LocalKafka()
    await loop.run_in_executor(None, kafka.start)
    try:
        transport = KafkaTransport(kafka.bootstrap)
        src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
        await create_topic(transport, src, 2)
        await create_topic(transport, dst, 2)
        inputs = keyed_inputs(20_000, keys=100)
        await produce(transport, src, inputs)
        drain = 3.0
        worker = start_worker(kafka.bootstrap, group, src, dst, WORKER_MAX_DELAY_MS="20",
                              WORKER_DRAIN_TIMEOUT=str(drain), WORKER_LOG="WARNING",
                              stderr=subprocess.PIPE)
        await read_exactly(transport, dst, 1_000, timeout=120)
        kafka.pause()
        try:
            started = time.monotonic()
            worker.send_signal(signal.SIGTERM)
            code = await wait_exit(worker, drain + STOP_GRACE + 20.0)
            took = time.monotonic() - started
        finally:
            await loop.run_in_executor(None, kafka.resume)
        assert worker.stderr is not None
        with worker.stderr:
            stderr = worker.stderr.read().decode()
        # the stop says what it did not commit, and does not pass for a clean one
        assert code != 0, stderr
        assert took <= drain + STOP_GRACE + 5.0, f"the stop took {took:.1f}s"
        assert "UncommittedStopError" in stderr, stderr
        assert "stopped without committing the last" in stderr, stderr
        # what was not committed is processed by the next worker: nothing is lost
        await until_led(transport, [src, dst])
        second = start_worker(kafka.bootstrap, group, src, dst)
        try:
            outputs = await read_until_all_seen(transport, dst, {v for _, v in inputs},
                                                timeout=240)
        finally:
            assert await stop_worker(second) == 0
        check_outputs(outputs, inputs, exactly_once=False)
    finally:
        await loop.run_in_executor(None, kafka.stop)
