"""Exactly once through real crashes: a worker process writing a Parquet dataset from a real
broker is SIGKILLed at random moments, restarted each time, and the dataset ends up holding
every input record exactly once."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
from pathlib import Path

import pytest
from chaoskit import end_offsets, worker_env
from parquet_chaos_worker import chaos_app, sink_for
from sparkkit import WatchedSink, create_topic, order_records, produce, read_with_pyarrow

from aiostreams.sinks import committed_files
from aiostreams.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.chaos,
              pytest.mark.timeout(600)]

HERE = Path(__file__).parent
N = 30_000
KILLS = 5


async def test_sigkilled_workers_leave_each_input_in_the_dataset_exactly_once(
        kafka_bootstrap: str, topic_name: object, tmp_path: Path) -> None:
    rng = random.Random(os.environ.get("AIOSTREAMS_CHAOS_SEED", "7"))
    transport = KafkaTransport(kafka_bootstrap)
    topic, group = topic_name("orders"), topic_name("chaos")  # type: ignore[operator]
    await create_topic(transport, topic, 2)
    path = tmp_path / "orders"
    batches_seen: list[int] = []
    per_run = N // KILLS
    for run in range(KILLS):
        # fresh input for every worker, so each is killed with work in hand
        await produce(transport, topic, order_records(range(run * per_run, (run + 1) * per_run)))
        worker = await asyncio.create_subprocess_exec(
            sys.executable, str(HERE / "parquet_chaos_worker.py"), kafka_bootstrap, topic,
            group, str(path), env=worker_env(), stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL)
        # a random moment: the worker is given this long before it is killed
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(worker.wait()), rng.uniform(2.0, 6.0))
        worker.send_signal(signal.SIGKILL)
        assert await worker.wait() == -signal.SIGKILL
        batches_seen.append(len(committed_files(path)))

    sink = sink_for(str(path), WatchedSink)
    assert isinstance(sink, WatchedSink)
    ends = await end_offsets(transport, topic)
    async with chaos_app(kafka_bootstrap, topic, group, sink):
        await sink.durable_through(ends).wait()
    table = read_with_pyarrow(path, sink)
    assert sorted(table.column("id").to_pylist()) == list(range(N)), batches_seen
    pairs = set(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(),
                    strict=True))
    assert len(pairs) == N
    assert sorted(path.rglob("part-*.parquet")) == sorted(committed_files(path))
    assert batches_seen[-1] > 0, "no worker lived long enough to write anything"
    print(f"committed files after each kill: {batches_seen}")

