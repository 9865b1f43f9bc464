"""The Delta sink's Spark engine on a cluster whose executors do not share the driver's disk:
the batch has rows and the driver finds no files, so nothing is committed, neither a Delta
commit with rows nor a Kafka offset (issue 19, item 1)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import cluster_session
from deltakit import WatchedDeltaSink, make_delta_app
from deltalake import DeltaTable
from localcluster import LocalSparkCluster
from sparkkit import Order, create_topic, order_records, produce, unique

from aiostreams import AiostreamsError
from aiostreams.spark.delta_identity import transaction_app_id
from aiostreams.spark.parquet_writer import UnreachableFilesError
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.chaos, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def private_disk_spark(private_disk_cluster: LocalSparkCluster) -> Iterator[Any]:
    yield from cluster_session(private_disk_cluster.config())


async def test_rows_spark_wrote_where_the_driver_cannot_see_them_are_never_committed(
        private_disk_cluster: LocalSparkCluster, private_disk_spark: Any) -> None:
    assert private_disk_cluster.private_dir is not None
    path = private_disk_cluster.private_dir / unique("orders")
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic, group = unique("orders"), unique("private-delta")
    source = TopicPartition(topic, 0)
    await create_topic(transport, topic, 1)
    await produce(transport, topic, order_records(range(3000)))
    sink = WatchedDeltaSink(path, Order, engine="spark", batch_rows=3000,
                            spark=private_disk_cluster.config())
    app = make_delta_app(group, transport, topic, sink)
    await app.start()
    stopped = asyncio.ensure_future(app.wait())
    durable = asyncio.ensure_future(sink.durable_through({source: 2999}).wait())
    await asyncio.wait([stopped, durable], return_when=asyncio.FIRST_COMPLETED)
    durable.cancel()
    if not stopped.done():
        await app.stop()
    with pytest.raises(AiostreamsError) as failure:
        await stopped

    cause: BaseException | None = failure.value
    while cause is not None and not isinstance(cause, UnreachableFilesError):
        cause = cause.__cause__ or cause.__context__
    assert isinstance(cause, UnreachableFilesError), repr(failure.value)
    assert str(path) in str(cause) and "3000 row(s)" in str(cause)
    assert broker.committed(group, source) in (None, 0)
    table = DeltaTable(str(path))  # created on the driver's disk, with no rows
    assert table.file_uris() == []
    assert table.transaction_version(transaction_app_id(sink.app, source)) is None
