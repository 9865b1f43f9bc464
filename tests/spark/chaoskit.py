"""Scaffolding of the SIGKILL tests: a real topic filled with orders, its end offsets (what a
fresh app must make durable), the environment a worker process needs to import the tests'
kits, and a worker run until it SIGKILLs itself."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from sparkkit import create_topic, order_records, produce

from aiostreams.transport.base import Transport
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition

HERE = Path(__file__).parent
REPO = HERE.parent.parent


async def topic_of_orders(transport: Transport, topic: str, n: int,
                          partitions: int = 2) -> None:
    """Create ``topic`` with ``partitions`` partitions and produce orders 0 to ``n - 1``."""
    await create_topic(transport, topic, partitions)
    await produce(transport, topic, order_records(range(n)))


def worker_env() -> dict[str, str]:
    """This process's environment, with the tests' kits (tests/spark) and the repository on
    ``PYTHONPATH``: what a worker script started from a test imports."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(REPO)])}


async def run_until_sigkilled(script: str, *args: str) -> None:
    """Run ``tests/spark/<script>`` with ``args`` to its end, which must be a SIGKILL it sent
    itself (its stderr's tail is the assertion's message otherwise)."""
    worker = await asyncio.create_subprocess_exec(
        sys.executable, str(HERE / script), *args, env=worker_env(),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, stderr = await worker.communicate()
    assert worker.returncode == -signal.SIGKILL, (
        f"{script} ended with {worker.returncode}, not SIGKILL:\n{stderr.decode()[-2000:]}")


async def end_offsets(transport: KafkaTransport, topic: str,
                      partitions: int = 2) -> dict[TopicPartition, int]:
    """The last offset of each partition of ``topic``."""
    consumer = transport.consumer(None)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
        return {tp: end - 1 for tp, end in ends.items()}
    finally:
        await consumer.stop()
