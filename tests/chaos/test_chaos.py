"""Chaos against the real broker: SIGKILLed workers and a restarted broker lose nothing.

Marked ``chaos`` (slow; ``-m chaos`` runs only these, ``-m "not chaos"`` skips them) and
run by ``make test`` / CI with everything else. Kill moments are random on purpose: the
point is to hit the worker wherever it happens to be (mid-batch, mid-commit, mid-send).
"""

from __future__ import annotations

import asyncio
import random

import pytest
from appkit import create_topic, produce, read_exactly, read_until_all_seen
from kafka_worker import RandomDelay
from kafkakit import check_outputs, keyed_inputs, start_worker, stop_worker

import aiostreams as ais
from aiostreams.localkafka import LocalKafka
from aiostreams.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.kafka, pytest.mark.chaos]

RECORDS = 200_000
KILLS = 10


async def produce_slowly(transport: KafkaTransport, topic: str,
                         items: list[tuple[bytes, bytes]], chunk: int = 4000) -> None:
    """Write ``items`` over several seconds, so the kills land while input still arrives."""
    for start in range(0, len(items), chunk):
        await produce(transport, topic, items[start:start + chunk])
        await asyncio.sleep(0.05)  # pacing the producer, not waiting for anything


async def kill_repeatedly(bootstrap: str, group: str, src: str, dst: str, rng: random.Random,
                          **env: str) -> None:
    for _ in range(KILLS):
        worker = start_worker(bootstrap, group, src, dst, **env)
        await asyncio.sleep(rng.uniform(0.5, 2.5))  # a random moment to kill it
        await stop_worker(worker, kill=True)


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_sigkill_at_random_moments_loses_nothing(kafka_bootstrap: str, topic_name,  # type: ignore[no-untyped-def]
                                                       guarantee: str) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 4)
    await create_topic(transport, dst, 4)
    inputs = keyed_inputs(RECORDS, keys=2000)
    env = {"WORKER_GUARANTEE": guarantee, "WORKER_COMMIT_MS": "100",
           "WORKER_MAX_DELAY_MS": "1", "WORKER_INSTANCE": "chaos-0"}
    rng = random.Random(20261122)
    await asyncio.gather(produce_slowly(transport, src, inputs),
                         kill_repeatedly(kafka_bootstrap, group, src, dst, rng, **env))
    survivor = start_worker(kafka_bootstrap, group, src, dst, **env)
    exactly_once = guarantee == "exactly_once"
    try:
        if exactly_once:
            outputs = await read_exactly(transport, dst, RECORDS, timeout=300,
                                         read_committed=True)
        else:  # duplicates are allowed: read until every input's output has been seen
            outputs = await read_until_all_seen(transport, dst, {v for _, v in inputs},
                                                timeout=300)
    finally:
        assert await stop_worker(survivor) == 0
    check_outputs(outputs, inputs, exactly_once=exactly_once)


async def test_broker_restart_mid_run_loses_nothing(topic_name) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    kafka = LocalKafka()
    await loop.run_in_executor(None, kafka.start)
    try:
        transport = KafkaTransport(kafka.bootstrap)
        src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
        await create_topic(transport, src, 4)
        await create_topic(transport, dst, 4)
        inputs = keyed_inputs(60_000, keys=600)
        app = ais.App(group, broker=f"kafka://{kafka.bootstrap}", commit_interval_ms=200)
        app.topic(src, key=str, value=str)
        app.topic(dst, key=str, value=str)
        app.topology.add_source("src", src).add_processor(
            "delay", lambda: RandomDelay(0.001), "src").add_sink("sink", dst, "delay")
        await produce(transport, src, inputs[:30_000])
        async with app:
            await read_exactly(transport, dst, 10_000, timeout=120)
            await loop.run_in_executor(None, kafka.restart)  # SIGTERM, start on the same ports
            await produce(transport, src, inputs[30_000:])
            outputs = await read_until_all_seen(transport, dst, {v for _, v in inputs},
                                                timeout=240)
            assert (worker := app.status().worker) is not None and worker.failure is None
        check_outputs(outputs, inputs, exactly_once=False)
    finally:
        await loop.run_in_executor(None, kafka.stop)
