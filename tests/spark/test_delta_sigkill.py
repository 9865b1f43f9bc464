"""Exactly once for every reader through real crashes: a worker process writing a Delta table
from a real broker SIGKILLs itself before a batch's write, after its Delta commit, or after
its offset commit; a fresh app finishes the input; delta-rs, pandas, DuckDB and Spark (its
Delta source, on a standalone cluster) each see every input exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from delta_chaos_worker import KILL_POINTS, chaos_app
from deltakit import (
    WatchedDeltaSink,
    end_offsets,
    pairs,
    read_with_deltars,
    read_with_duckdb,
    read_with_pandas,
    read_with_spark_process,
)
from deltalake import DeltaTable
from sparkkit import Order, create_topic, order_records, produce

from aiostreams.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.chaos,
              pytest.mark.timeout(600)]

HERE = Path(__file__).parent
REPO = HERE.parent.parent
N = 20_000
NTH = 3  # the worker dies at its third batch (at most ~3 x 4000 rows: N leaves more)

@pytest.mark.parametrize("kill_point", KILL_POINTS)
async def test_a_worker_killed_at_each_point_of_a_batch_leaves_each_input_once_for_every_reader(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path, kill_point: str,
        delta_spark: Any) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    topic, group = topic_name("orders"), topic_name("delta-chaos")
    await create_topic(transport, topic, 2)
    await produce(transport, topic, order_records(range(N)))
    path = tmp_path / "orders"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(REPO)])}
    worker = await asyncio.create_subprocess_exec(
        sys.executable, str(HERE / "delta_chaos_worker.py"), kafka_bootstrap, topic, group,
        str(path), kill_point, str(NTH), env=env, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE)
    _, stderr = await worker.communicate()
    assert worker.returncode == -signal.SIGKILL, stderr.decode()[-2000:]
    versions = DeltaTable(str(path)).version() + 1  # commits made before the kill
    assert versions == (NTH - 1 if kill_point == "before_write" else NTH)

    sink = WatchedDeltaSink(str(path), Order, include=("partition", "offset"),
                            batch_interval=0.5)
    ends = await end_offsets(transport, topic)
    async with chaos_app(kafka_bootstrap, topic, group, sink):
        await sink.durable_through(ends).wait()
    if kill_point == "after_write":
        assert sink.metrics.rows_replayed > 0  # the last batch came again and was dropped

    expected = {(tp.partition, offset) for tp, last in ends.items() for offset in range(last + 1)}
    assert len(expected) == N
    readers = {
        "delta-rs": pairs(read_with_deltars(path)),
        "pandas": read_with_pandas(path),
        "duckdb": read_with_duckdb(path),
        "spark": read_with_spark_process(delta_spark, path),
    }
    for reader, seen in readers.items():
        counts = Counter(seen)
        lost = expected - counts.keys()
        duplicated = {pair for pair, n in counts.items() if n > 1}
        assert (len(lost), len(duplicated), len(seen)) == (0, 0, N), reader
    assert sorted(read_with_deltars(path).column("id").to_pylist()) == list(range(N))
