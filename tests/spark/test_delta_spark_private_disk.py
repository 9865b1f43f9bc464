"""The Delta sink's Spark engine on a cluster whose executors do not share the driver's disk:
the batch has rows and the driver finds no files, so nothing is committed, neither a Delta
commit with rows nor a Kafka offset (issue 19, item 1)."""

from __future__ import annotations

from typing import Any

import pytest
from deltakit import WatchedDeltaSink, make_delta_app
from deltalake import DeltaTable
from failkit import cause_of, run_until_it_fails
from localcluster import LocalSparkCluster
from sparkkit import Order, topic_of_orders, unique

from aiostreams.sinks.delta_identity import transaction_app_id
from aiostreams.sinks.parquet_writer import UnreachableFilesError
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.chaos, pytest.mark.timeout(300)]


async def test_rows_spark_wrote_where_the_driver_cannot_see_them_are_never_committed(
        private_disk_cluster: LocalSparkCluster, private_disk_spark: Any) -> None:
    assert private_disk_cluster.private_dir is not None
    path = private_disk_cluster.private_dir / unique("orders")
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic, group = unique("orders"), unique("private-delta")
    source = TopicPartition(topic, 0)
    await topic_of_orders(transport, topic, 3000, partitions=1)
    sink = WatchedDeltaSink(path, Order, engine="spark", batch_rows=3000,
                            spark=private_disk_cluster.config())
    app = make_delta_app(group, transport, topic, sink)
    failure, _ = await run_until_it_fails(app, sink.durable_through({source: 2999}))

    cause = cause_of(failure, UnreachableFilesError)
    assert str(path) in str(cause) and "3000 row(s)" in str(cause)
    assert broker.committed(group, source) in (None, 0)
    table = DeltaTable(str(path))  # created on the driver's disk, with no rows
    assert table.file_uris() == []
    assert table.transaction_version(transaction_app_id(sink.app, source)) is None
