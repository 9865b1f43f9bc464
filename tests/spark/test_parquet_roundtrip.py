"""Records of a nested model go through an app on the memory broker into a partitioned
Parquet dataset, and read back identical with Spark and with pyarrow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from sparkkit import (
    REGIONS,
    Order,
    WatchedSink,
    create_topic,
    ends,
    loose_schema,
    make_app,
    make_order,
    normalized,
    order_records,
    produce,
    read_with_pyarrow,
    read_with_spark,
    unique,
)

from aiostreams.sinks import committed_files
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

pytestmark = pytest.mark.spark

N = 100_000
INCLUDE = ("key", "topic", "partition", "offset", "timestamp")


async def run_orders_through_sink(tmp_path: Path, n: int, engine: str,
                                  **sink_options: Any) -> tuple[WatchedSink, Path, str]:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic = unique("orders")
    await create_topic(transport, topic, 2)
    await produce(transport, topic, order_records(range(n)))
    counts = {p: broker.end_offset(TopicPartition(topic, p)) for p in range(2)}
    path = tmp_path / "orders"
    sink = WatchedSink(path, Order, engine=engine, **sink_options)
    async with make_app(unique("roundtrip"), transport, topic, sink, commit_interval_ms=1000):
        await sink.durable_through(ends(topic, counts)).wait()
    return sink, path, topic


async def test_100k_nested_orders_read_back_identical_with_spark_and_pyarrow(
        tmp_path: Path, spark: Any) -> None:
    sink, path, topic = await run_orders_through_sink(
        tmp_path, N, "spark", partition_by=("region",), include=INCLUDE)
    assert sink.metrics.rows_written == N
    model_columns = list(Order.model_fields)
    expected = sink.schema.to_table([make_order(i) for i in range(N)], {
        "key": [str(i) for i in range(N)], "topic": [topic] * N, "partition": [0] * N,
        "offset": [0] * N, "timestamp": [0.0] * N}).select(model_columns)
    want = normalized(expected, model_columns)

    # pyarrow: same rows, same types (partition column typed by the schema)
    got = read_with_pyarrow(path, sink)
    assert got.num_rows == N
    assert loose_schema(got.schema, model_columns) == want.schema
    assert normalized(got, model_columns).equals(want)
    assert sorted(got.column("key").to_pylist(), key=int) == [str(i) for i in range(N)]
    assert set(got.column("topic").to_pylist()) == {topic}
    pairs = set(zip(got.column("partition").to_pylist(), got.column("offset").to_pylist(),
                    strict=True))
    assert len(pairs) == N  # each input record once

    # Spark: the same, read with the dataset's schema
    from_spark = read_with_spark(spark, path, sink)
    assert from_spark.num_rows == N
    assert loose_schema(from_spark.schema, model_columns) == want.schema
    assert normalized(from_spark, model_columns).equals(want)

    # partitions as asked: one directory per region, the column only in the path
    assert sorted(p.name for p in path.iterdir() if not p.name.startswith("_")) == sorted(
        f"region={r}" for r in REGIONS)
    files = committed_files(path)
    assert files and all(f.exists() for f in files)
    assert {f.parent.name for f in files} == {f"region={r}" for r in REGIONS}
    assert "region" not in pq.read_schema(files[0]).names
