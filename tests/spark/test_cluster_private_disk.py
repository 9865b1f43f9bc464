"""On a cluster whose executors do not share the driver's disk, the sink fails loudly and
commits nothing: no log entry, no Kafka offset (issue 19, item 1)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import cluster_session
from localcluster import LocalSparkCluster
from sparkkit import Order, WatchedSink, create_topic, make_app, order_records, produce, unique

from aiostreams import AiostreamsError
from aiostreams.spark import committed_files
from aiostreams.spark.commit_log import LOG_DIR
from aiostreams.spark.parquet_writer import UnreachableFilesError
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.chaos, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def private_disk_spark(private_disk_cluster: LocalSparkCluster) -> Iterator[Any]:
    yield from cluster_session(private_disk_cluster.config())


async def test_rows_written_where_the_driver_cannot_see_them_commit_no_offset(
        private_disk_cluster: LocalSparkCluster, private_disk_spark: Any) -> None:
    assert private_disk_cluster.private_dir is not None
    path = private_disk_cluster.private_dir / unique("orders")
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic, group = unique("orders"), unique("private")
    await create_topic(transport, topic, 1)
    await produce(transport, topic, order_records(range(3000)))
    sink = WatchedSink(path, Order, engine="spark", batch_rows=3000,
                       spark=private_disk_cluster.config())
    app = make_app(group, transport, topic, sink)
    await app.start()
    stopped = asyncio.ensure_future(app.wait())
    durable = asyncio.ensure_future(sink.durable_through({TopicPartition(topic, 0): 2999}).wait())
    await asyncio.wait([stopped, durable], return_when=asyncio.FIRST_COMPLETED)
    durable.cancel()
    if not stopped.done():
        await app.stop()
    assert not durable.done() or durable.cancelled(), (
        f"a batch was committed: {list((path / LOG_DIR).glob('*.json'))}")
    with pytest.raises(AiostreamsError) as failure:
        await stopped

    cause: BaseException | None = failure.value
    while cause is not None and not isinstance(cause, UnreachableFilesError):
        cause = cause.__cause__ or cause.__context__
    assert isinstance(cause, UnreachableFilesError), repr(failure.value)
    message = str(cause)
    assert str(path) in message
    assert "driver and executors" in message and "hdfs://" in message
    assert "3000 row(s)" in message
    assert broker.committed(group, TopicPartition(topic, 0)) in (None, 0)
    assert committed_files(path) == []
    assert not list((path / LOG_DIR).glob("*.json"))
