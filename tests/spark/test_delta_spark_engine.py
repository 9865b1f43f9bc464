"""The Delta sink's Spark engine on a standalone cluster (master + worker on 127.0.0.1): the
executors write the files, the driver commits them with delta-rs on the snapshot its replay
check read. Every Delta reader sees each input once; a replay commits nothing; a zombie
writer of the same partition committing between the check and the commit (before or after
Spark's write) is caught; both engines continue one table; schemas evolve or are refused as
with the delta-rs engine."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import cluster_session
from deltakit import (
    RacedDeltaSink,
    assert_every_reader_sees_each_input_once,
    pairs,
    read_with_deltars,
    records,
    seen_once,
)
from deltalake import DeltaTable
from localcluster import LocalSparkCluster
from pydantic import BaseModel
from sparkkit import Order

from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks import (
    DeltaSink,
    IncompatibleSchemaError,
    SparkConfig,
    stop_session,
)
from aiostreams.sinks.delta_identity import transaction_app_id
from aiostreams.sinks.spark.delta_spark import BATCH_DIR_PREFIX, SparkDeltaEngine
from aiostreams.types import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

ORDERS_0, ORDERS_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
INCLUDE = ("partition", "offset")


@pytest.fixture(scope="module")
def cluster(spark_cluster: LocalSparkCluster) -> Iterator[SparkConfig]:
    """The config of the module's session on the standalone cluster (its executor writes)."""
    config = spark_cluster.config(app_name="aiostreams-delta-spark-engine")
    for _ in cluster_session(config):
        yield config


def spark_sink(path: Path, config: SparkConfig, **kwargs: Any) -> DeltaSink:
    kwargs.setdefault("include", INCLUDE)
    return DeltaSink(path, Order, engine="spark", spark=config, **kwargs)


async def write(sink: DeltaSink, batches: Sequence[list[ExternalRecord]]) -> None:
    """Start ``sink``, commit each batch with one flush, stop it."""
    await sink.start()
    for batch in batches:
        for record in batch:
            sink.add(record)
        await sink.flush()
    await sink.stop()


def zombie_commits(path: Path, batch: list[ExternalRecord]) -> None:
    """Another writer of the table (a revoked worker finishing its write) commits ``batch``
    with the delta-rs engine, as its writer thread would."""
    DeltaSink(path, Order, include=INCLUDE)._write_batch(batch)


async def test_every_delta_reader_sees_each_row_the_spark_engine_wrote_once(
        tmp_path: Path, cluster: SparkConfig, delta_spark: SparkConfig) -> None:
    path = tmp_path / "orders"
    sink = spark_sink(path, cluster, partition_by=("region",))
    await write(sink, [records(ORDERS_0, range(0, 400)) + records(ORDERS_1, range(0, 300)),
                       records(ORDERS_0, range(400, 600))])
    assert (sink.metrics.batches, sink.metrics.rows_written) == (2, 900)
    table = DeltaTable(str(path))
    assert table.version() == 2  # created, then one commit per batch
    assert table.transaction_version(transaction_app_id("aiostreams", ORDERS_0)) == 599
    assert table.transaction_version(transaction_app_id("aiostreams", ORDERS_1)) == 299
    files = table.file_uris()
    assert files and all(f"/{BATCH_DIR_PREFIX}" in f for f in files)

    stop_session()  # the cluster has one core: the Spark reader's session needs it
    expected = {(0, o) for o in range(600)} | {(1, o) for o in range(300)}
    assert len(expected) == 900
    assert_every_reader_sees_each_input_once(path, expected, delta_spark)
    rows = read_with_deltars(path).sort_by([("partition", "ascending"), ("offset", "ascending")])
    orders = [r.value for r in records(ORDERS_0, range(3))]
    assert rows.slice(0, 3).drop_columns(list(INCLUDE)).to_pylist() == [
        {**order.model_dump(), "tier": order.tier.value} for order in orders]


async def test_a_replayed_batch_commits_nothing_and_a_partly_replayed_one_only_its_new_rows(
        tmp_path: Path, cluster: SparkConfig) -> None:
    path = tmp_path / "orders"
    await write(spark_sink(path, cluster), [records(ORDERS_0, range(100))])
    version = DeltaTable(str(path)).version()

    again = spark_sink(path, cluster)  # a restarted app: it knows nothing durable yet
    await write(again, [records(ORDERS_0, range(100))])
    assert DeltaTable(str(path)).version() == version
    assert (again.metrics.rows_written, again.metrics.rows_replayed) == (0, 100)

    partly = spark_sink(path, cluster)
    await write(partly, [records(ORDERS_0, range(60, 150))])
    assert (partly.metrics.rows_written, partly.metrics.rows_replayed) == (50, 40)
    assert DeltaTable(str(path)).version() == version + 1
    assert seen_once(pairs(read_with_deltars(path)), {(0, o) for o in range(150)}) == (0, 0, 150)


class ZombieAfterWrite(SparkDeltaEngine):
    """Between Spark's write and the commit, another writer commits ``batch`` (once)."""

    def __init__(self, config: SparkConfig, path: Path, batch: list[ExternalRecord]) -> None:
        super().__init__(config)
        self.path, self.batch = path, batch
        self.lost: list[Path] = []  # batch directories of attempts that lost the race

    def files_written(self, batch_dir: Path, files: Sequence[Path]) -> None:
        assert files and all(f.is_file() for f in files)
        if self.batch:
            zombie_commits(self.path, self.batch)
            self.batch = []
            self.lost.append(batch_dir)


@pytest.mark.parametrize("table_exists", [True, False], ids=["existing", "new"])
async def test_a_zombie_commit_after_sparks_write_is_caught_and_its_rows_not_written_twice(
        tmp_path: Path, cluster: SparkConfig, table_exists: bool) -> None:
    """A revoked worker commits offsets 0-59 of the partition after this sink checked (and
    found nothing durable) and after Spark wrote 0-99: the commit fails Delta's conflict
    check, the sink checks again and commits 60-99 only."""
    path = tmp_path / "orders"
    if table_exists:
        zombie_commits(path, records(ORDERS_1, range(10)))  # another partition's rows
    sink = spark_sink(path, cluster)
    engine = ZombieAfterWrite(cluster, path, records(ORDERS_0, range(60)))
    sink.spark_engine = engine
    await write(sink, [records(ORDERS_0, range(100))])
    expected = {(0, o) for o in range(100)} | ({(1, o) for o in range(10)} if table_exists
                                               else set())
    assert seen_once(pairs(read_with_deltars(path)), expected) == (0, 0, len(expected))
    assert sink.metrics.commit_conflicts == 1
    assert (sink.metrics.rows_written, sink.metrics.rows_replayed) == (40, 60)
    assert DeltaTable(str(path)).transaction_version(
        transaction_app_id("aiostreams", ORDERS_0)) == 99
    assert len(engine.lost) == 1 and not engine.lost[0].exists()  # its files are gone


async def test_a_zombie_commit_right_after_the_check_is_caught_before_spark_writes(
        tmp_path: Path, cluster: SparkConfig) -> None:
    path = tmp_path / "orders"
    zombie_commits(path, records(ORDERS_1, range(5)))
    raced = RacedDeltaSink(path, Order, other=records(ORDERS_0, range(30)), engine="spark",
                           spark=cluster)
    await write(raced, [records(ORDERS_0, range(50))])
    expected = {(0, o) for o in range(50)} | {(1, o) for o in range(5)}
    assert seen_once(pairs(read_with_deltars(path)), expected) == (0, 0, 55)
    assert raced.metrics.commit_conflicts == 1


async def test_both_engines_continue_one_table_each_row_once(
        tmp_path: Path, cluster: SparkConfig) -> None:
    path = tmp_path / "orders"
    await write(DeltaSink(path, Order, include=INCLUDE, partition_by=("region",)),
                [records(ORDERS_0, range(0, 100))])
    spark_written = spark_sink(path, cluster, partition_by=("region",))
    await write(spark_written, [records(ORDERS_0, range(50, 200))])
    assert spark_written.metrics.rows_replayed == 50
    pyarrow_written = DeltaSink(path, Order, include=INCLUDE, partition_by=("region",))
    await write(pyarrow_written, [records(ORDERS_0, range(150, 300))])
    assert pyarrow_written.metrics.rows_replayed == 50
    table = read_with_deltars(path)
    assert seen_once(pairs(table), {(0, o) for o in range(300)}) == (0, 0, 300)
    assert sorted(table.column("id").to_pylist()) == list(range(300))
    assert DeltaTable(str(path)).metadata().partition_columns == ["region"]


class Reading(BaseModel):
    id: int
    site: str


class ReadingWithNote(BaseModel):
    id: int
    site: str
    note: str | None = None


class ReadingWithTextId(BaseModel):
    id: str
    site: str


def readings(model: type[BaseModel], offsets: range, **extra: Any) -> list[ExternalRecord]:
    return [ExternalRecord("delta", ORDERS_0, i, None,
                           model(id=str(i) if model is ReadingWithTextId else i,
                                 site=f"s{i % 3}", **extra), 0.0) for i in offsets]


async def test_a_new_optional_field_merges_into_the_schema_and_older_rows_read_null(
        tmp_path: Path, cluster: SparkConfig) -> None:
    path = tmp_path / "readings"
    await write(DeltaSink(path, Reading, engine="spark", spark=cluster),
                [readings(Reading, range(3))])
    evolved = DeltaSink(path, ReadingWithNote, engine="spark", spark=cluster)
    await write(evolved, [readings(ReadingWithNote, range(3, 5), note="n")])
    table = read_with_deltars(path).sort_by("id")
    assert table.column("note").to_pylist() == [None, None, None, "n", "n"]
    assert pa.schema(DeltaTable(str(path)).schema().to_arrow()).field("note").nullable
    assert evolved.metrics.rows_written == 2


async def test_an_incompatible_model_is_refused_naming_the_field_before_writing(
        tmp_path: Path, cluster: SparkConfig) -> None:
    path = tmp_path / "readings"
    await write(DeltaSink(path, Reading, engine="spark", spark=cluster),
                [readings(Reading, range(3))])
    version = DeltaTable(str(path)).version()
    with pytest.raises(IncompatibleSchemaError,
                       match=re.escape("ReadingWithTextId.id is int64 in the dataset and "
                                       "string")):
        await DeltaSink(path, ReadingWithTextId, engine="spark", spark=cluster).start()
    assert DeltaTable(str(path)).version() == version


class Site(BaseModel):
    id: int
    site: str | None


SITES = ("plain", "a b", "x:y/z%", "q=1?&#", "é€", None)


async def test_partition_values_spark_escapes_in_directory_names_read_back_exactly(
        tmp_path: Path, cluster: SparkConfig) -> None:
    path = tmp_path / "sites"
    values = [ExternalRecord("delta", ORDERS_0, i, None, Site(id=i, site=SITES[i % 6]), 0.0)
              for i in range(30)]
    await write(DeltaSink(path, Site, engine="spark", spark=cluster, partition_by=("site",)),
                [values])
    table = read_with_deltars(path).sort_by("id")
    assert table.column("site").to_pylist() == [SITES[i % 6] for i in range(30)]
    partitions = {tuple(sorted(p.items())) for p in DeltaTable(str(path)).partitions()}
    assert partitions == {(("site", s),) for s in SITES}
