"""Exactly once for every reader through real crashes: a worker process writing a Delta table
from a real broker SIGKILLs itself before a batch's write, after its Delta commit, or after
its offset commit; a fresh app finishes the input; delta-rs, pandas, DuckDB and Spark (its
Delta source, on a standalone cluster) each see every input exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chaoskit import end_offsets, run_until_sigkilled
from delta_chaos_worker import KILL_POINTS, chaos_app
from deltakit import (
    WatchedDeltaSink,
    assert_every_reader_sees_each_input_once,
    expected_pairs,
    read_with_deltars,
)
from deltalake import DeltaTable
from sparkkit import Order, topic_of_orders

from aiostreams.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.chaos,
              pytest.mark.timeout(600)]

N = 20_000
NTH = 3  # the worker dies at its third batch (at most ~3 x 4000 rows: N leaves more)

@pytest.mark.parametrize("kill_point", KILL_POINTS)
async def test_a_worker_killed_at_each_point_of_a_batch_leaves_each_input_once_for_every_reader(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path, kill_point: str,
        delta_spark: Any) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    topic, group = topic_name("orders"), topic_name("delta-chaos")
    await topic_of_orders(transport, topic, N)
    path = tmp_path / "orders"
    await run_until_sigkilled("delta_chaos_worker.py", kafka_bootstrap, topic, group, str(path),
                              kill_point, str(NTH))
    versions = DeltaTable(str(path)).version() + 1  # commits made before the kill
    assert versions == (NTH - 1 if kill_point == "before_write" else NTH)

    sink = WatchedDeltaSink(str(path), Order, include=("partition", "offset"),
                            batch_interval=0.5)
    ends = await end_offsets(transport, topic)
    async with chaos_app(kafka_bootstrap, topic, group, sink):
        await sink.durable_through(ends).wait()
    if kill_point == "after_write":
        assert sink.metrics.rows_replayed > 0  # the last batch came again and was dropped

    expected = expected_pairs(ends)
    assert len(expected) == N
    assert_every_reader_sees_each_input_once(path, expected, delta_spark)
    assert sorted(read_with_deltars(path).column("id").to_pylist()) == list(range(N))
