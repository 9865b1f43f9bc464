"""A batch larger than Spark's RPC message limit is written on a cluster: the sink hands
Spark tasks that fit (issue 19, item 2). The limit is set small (8 MiB) so a 20 MB batch
proves what a 128 MiB limit and a 156 MB batch would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from conftest import cluster_session
from localcluster import LocalSparkCluster
from pydantic import BaseModel

from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks import ParquetSink, committed_files
from aiostreams.types import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.chaos, pytest.mark.timeout(300)]

LIMIT_MIB = 8
ROWS = 10_000


class Blob(BaseModel):
    id: int
    region: str
    payload: str


@pytest.fixture(scope="module")
def small_limit_cluster(spark_cluster: LocalSparkCluster) -> Iterator[Any]:
    config = spark_cluster.config(conf={"spark.rpc.message.maxSize": str(LIMIT_MIB)})
    yield from cluster_session(config)


def blob(i: int) -> Blob:
    return Blob(id=i, region=("eu", "us")[i % 2], payload=f"{i:08d}" * 256)  # 2 KiB


@pytest.mark.parametrize("partition_by", [(), ("region",)])
async def test_a_batch_over_the_rpc_message_limit_is_written_in_tasks_that_fit(
        spark_cluster: LocalSparkCluster, small_limit_cluster: Any, tmp_path: Path,
        partition_by: tuple[str, ...]) -> None:
    config = spark_cluster.config(conf={"spark.rpc.message.maxSize": str(LIMIT_MIB)})
    sink = ParquetSink(tmp_path / "blobs", Blob, engine="spark", batch_rows=ROWS,
                       partition_by=partition_by, spark=config)
    await sink.start()
    tp = TopicPartition("blobs", 0)
    for i in range(ROWS):
        sink.add(ExternalRecord("parquet", tp, i, str(i), blob(i), 0.0))
    assert sink.schema.to_table([blob(i) for i in range(ROWS)]).nbytes > 2 * LIMIT_MIB * 2**20
    await sink.flush()
    await sink.stop()

    assert sink.durable_offset(tp) == ROWS - 1
    assert sink.metrics.batches == 1
    table = ds.dataset(committed_files(tmp_path / "blobs"), format="parquet").to_table()
    assert sorted(table.column("id").to_pylist()) == list(range(ROWS))
    assert set(table.column("payload").to_pylist()) == {blob(i).payload for i in range(ROWS)}
