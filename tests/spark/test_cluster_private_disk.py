"""On a cluster whose executors do not share the driver's disk, the sink fails loudly and
commits nothing: no log entry, no Kafka offset (issue 19, item 1)."""

from __future__ import annotations

from typing import Any

import pytest
from failkit import cause_of, run_until_it_fails
from localcluster import LocalSparkCluster
from sparkkit import Order, WatchedSink, make_app, topic_of_orders, unique

from aiostreams.sinks import committed_files
from aiostreams.sinks.commit_log import LOG_DIR
from aiostreams.sinks.parquet_writer import UnreachableFilesError
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.chaos, pytest.mark.timeout(300)]


async def test_rows_written_where_the_driver_cannot_see_them_commit_no_offset(
        private_disk_cluster: LocalSparkCluster, private_disk_spark: Any) -> None:
    assert private_disk_cluster.private_dir is not None
    path = private_disk_cluster.private_dir / unique("orders")
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic, group = unique("orders"), unique("private")
    await topic_of_orders(transport, topic, 3000, partitions=1)
    sink = WatchedSink(path, Order, engine="spark", batch_rows=3000,
                       spark=private_disk_cluster.config())
    app = make_app(group, transport, topic, sink)
    failure, durable = await run_until_it_fails(
        app, sink.durable_through({TopicPartition(topic, 0): 2999}))
    assert not durable, f"a batch was committed: {list((path / LOG_DIR).glob('*.json'))}"

    message = str(cause_of(failure, UnreachableFilesError))
    assert str(path) in message
    assert "driver and executors" in message and "hdfs://" in message
    assert "3000 row(s)" in message
    assert broker.committed(group, TopicPartition(topic, 0)) in (None, 0)
    assert committed_files(path) == []
    assert not list((path / LOG_DIR).glob("*.json"))
