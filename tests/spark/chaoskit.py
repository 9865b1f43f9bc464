"""Scaffolding of the SIGKILL tests: a topic's end offsets (what a fresh app must make
durable), the environment a worker process needs to import the tests' kits, and a worker
run until it SIGKILLs itself."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition

HERE = Path(__file__).parent
REPO = HERE.parent.parent


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
