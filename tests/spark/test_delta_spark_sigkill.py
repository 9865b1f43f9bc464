"""Exactly once for every reader through real crashes of the Spark engine: a worker process
writing a Delta table with ``DeltaSink(engine="spark")`` on a standalone cluster, from a
real broker, SIGKILLs itself before a batch's write, after Spark wrote its files, after its
Delta commit, or after its offset commit; a fresh app (Spark engine too) finishes the
input; delta-rs, pandas, DuckDB and Spark's Delta source each see every input once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chaoskit import end_offsets, run_until_sigkilled
from delta_chaos_worker import chaos_app
from delta_spark_chaos_worker import SPARK_KILL_POINTS
from deltakit import (
    WatchedDeltaSink,
    assert_every_reader_sees_each_input_once,
    expected_pairs,
)
from deltalake import DeltaTable
from localcluster import LocalSparkCluster
from sparkkit import Order, topic_of_orders

from aiostreams.sinks import stop_session
from aiostreams.sinks.spark.delta_spark import BATCH_DIR_PREFIX
from aiostreams.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.chaos,
              pytest.mark.timeout(900)]

N = 12_000
NTH = 2  # the worker dies at its second batch


@pytest.mark.parametrize("kill_point", SPARK_KILL_POINTS)
async def test_a_spark_engine_worker_killed_at_each_point_leaves_each_input_once_for_every_reader(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path, kill_point: str,
        spark_cluster: LocalSparkCluster, delta_spark: Any) -> None:
    config = spark_cluster.config(app_name="aiostreams-delta-spark-chaos")
    stop_session()  # the cluster has one core: the worker's session needs it
    transport = KafkaTransport(kafka_bootstrap)
    topic, group = topic_name("orders"), topic_name("delta-spark-chaos")
    await topic_of_orders(transport, topic, N)
    path = tmp_path / "orders"
    await run_until_sigkilled("delta_spark_chaos_worker.py", kafka_bootstrap, topic, group,
                              str(path), kill_point, str(NTH), config.model_dump_json())
    committed_before = DeltaTable(str(path)).to_pyarrow_table().num_rows
    assert 0 < committed_before < N
    if kill_point == "after_spark_write":  # files of the killed write, in no commit
        on_disk = {p.name for p in path.glob(f"{BATCH_DIR_PREFIX}*/**/*.parquet")}
        listed = {uri.rsplit("/", 1)[1] for uri in DeltaTable(str(path)).file_uris()}
        assert on_disk - listed

    sink = WatchedDeltaSink(str(path), Order, include=("partition", "offset"),
                            batch_interval=0.5, engine="spark", spark=config)
    ends = await end_offsets(transport, topic)
    try:
        async with chaos_app(kafka_bootstrap, topic, group, sink):
            await sink.durable_through(ends).wait()
    finally:
        stop_session()
    if kill_point == "after_write":
        assert sink.metrics.rows_replayed > 0  # the last batch came again and was dropped

    expected = expected_pairs(ends)
    assert len(expected) == N
    assert_every_reader_sees_each_input_once(path, expected, delta_spark)
