"""The Delta sink's Spark engine on an object store: ``DeltaSink("s3a://...", engine="spark")``
against a real S3-protocol server on 127.0.0.1 (moto's). Spark's executors write each batch
through ``hadoop-aws``'s S3A, configured from the sink's ``storage_options`` alone; the driver
lists the batch and reads its footers through pyarrow's S3 filesystem and commits with
delta-rs. Rows are read back by delta-rs and by Spark (S3A); a replay commits nothing; a
zombie commit between the check and the commit leaves no duplicate and no orphan files; a
batch whose rows the driver cannot see, or a store it cannot reach, commits nothing."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import cluster_session
from deltakit import (
    DELTA_CONF,
    DELTA_PACKAGE,
    pairs,
    read_with_deltars,
    read_with_spark,
    records,
)
from deltalake import DeltaTable
from s3kit import HADOOP_AWS, S3Server
from sparkkit import Order

from aiostreams.errors import ConfigError
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks import DeltaSink, SparkConfig
from aiostreams.sinks.delta_identity import transaction_app_id
from aiostreams.sinks.object_store import s3_filesystem, s3_key, with_s3a_conf
from aiostreams.sinks.parquet_writer import UnreachableFilesError
from aiostreams.sinks.spark.delta_spark import BATCH_DIR_PREFIX, SparkDeltaEngine
from aiostreams.types import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

ORDERS_0, ORDERS_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
INCLUDE = ("partition", "offset")
BASE = SparkConfig(master="local[2]", driver_memory="1g", app_name="aiostreams-spark-s3",
                   packages=(DELTA_PACKAGE, HADOOP_AWS), conf=DELTA_CONF)
"""The sinks' config: no ``fs.s3a.*`` setting; the sink derives them from its options."""


@pytest.fixture(scope="module")
def spark(s3_server: S3Server) -> Iterator[Any]:
    """The module's session: the config every sink of the module derives from ``BASE``."""
    yield from cluster_session(with_s3a_conf(BASE, s3_server.storage_options))


@pytest.fixture
def table(s3_server: S3Server) -> str:
    return f"s3a://{s3_server.create_bucket()}/tables/orders"


def spark_sink(path: str, server: S3Server, **kwargs: Any) -> DeltaSink:
    kwargs.setdefault("storage_options", server.storage_options)
    return DeltaSink(path, Order, include=INCLUDE, engine="spark", spark=BASE, **kwargs)


async def write(sink: DeltaSink, batches: Sequence[list[ExternalRecord]]) -> None:
    """Start ``sink``, commit each batch with one flush, stop it."""
    await sink.start()
    for batch in batches:
        for record in batch:
            sink.add(record)
        await sink.flush()
    await sink.stop()


def batch_dirs(server: S3Server, path: str) -> list[str]:
    fs = s3_filesystem(server.storage_options)
    from pyarrow.fs import FileSelector, FileType

    return sorted(i.base_name for i in fs.get_file_info(FileSelector(s3_key(path)))
                  if i.type == FileType.Directory and i.base_name.startswith(BATCH_DIR_PREFIX))


def once(seen: list[tuple[int, int]], expected: set[tuple[int, int]]) -> bool:
    counts = Counter(seen)
    return counts.keys() == expected and max(counts.values()) == 1


async def test_spark_writes_an_s3_table_that_delta_rs_and_spark_read_once_per_input(
        s3_server: S3Server, table: str, spark: Any) -> None:
    sink = spark_sink(table, s3_server, partition_by=("partition",))
    await write(sink, [records(ORDERS_0, range(300)) + records(ORDERS_1, range(200))])
    expected = {(0, o) for o in range(300)} | {(1, o) for o in range(200)}
    options = s3_server.storage_options
    assert once(pairs(read_with_deltars(table, options)), expected)
    assert once(read_with_spark(spark, table), expected)  # type: ignore[arg-type]
    log = DeltaTable(table, storage_options=options).history(1)[0]
    assert log["aiostreams.engine"] == "spark"
    assert len(batch_dirs(s3_server, table)) == 1


async def test_a_replayed_batch_on_s3_commits_nothing_and_a_partial_replay_only_the_rest(
        s3_server: S3Server, table: str, spark: Any) -> None:
    await write(spark_sink(table, s3_server), [records(ORDERS_0, range(100))])
    version = DeltaTable(table, storage_options=s3_server.storage_options).version()
    replay = spark_sink(table, s3_server)
    await write(replay, [records(ORDERS_0, range(100))])
    assert (replay.metrics.rows_written, replay.metrics.rows_replayed) == (0, 100)
    assert DeltaTable(table, storage_options=s3_server.storage_options).version() == version
    partly = spark_sink(table, s3_server)
    await write(partly, [records(ORDERS_0, range(60, 150))])
    assert (partly.metrics.rows_written, partly.metrics.rows_replayed) == (50, 40)
    assert once(pairs(read_with_deltars(table, s3_server.storage_options)),
                {(0, o) for o in range(150)})
    assert len(batch_dirs(s3_server, table)) == 2  # the replay wrote no files


class ZombieAfterWrite(SparkDeltaEngine):
    """Between Spark's write to S3 and the commit, another writer (delta-rs, as a revoked
    worker's sink) commits ``batch`` (once)."""

    def __init__(self, config: SparkConfig, options: dict[str, str], path: str,
                 batch: list[ExternalRecord]) -> None:
        super().__init__(config, storage_options=options)
        self.path, self.batch = path, batch
        self.lost: list[str] = []  # batch directories of attempts that lost the race

    def files_written(self, batch_dir: Path | str, files: Sequence[Path | str]) -> None:
        assert isinstance(batch_dir, str) and batch_dir.startswith("s3a://") and files
        if self.batch:
            zombie = DeltaSink(self.path, Order, include=INCLUDE,
                               storage_options=self.storage_options)
            zombie._write_batch(self.batch)
            self.batch = []
            self.lost.append(batch_dir.rsplit("/", 1)[1])


async def test_a_zombie_commit_after_sparks_write_to_s3_leaves_no_duplicate_nor_its_files(
        s3_server: S3Server, table: str, spark: Any) -> None:
    """A revoked worker commits offsets 0-59 after this sink checked and after Spark wrote
    0-99 to S3: delta-rs' conflict check fails the commit (S3's conditional put), the sink
    deletes the lost batch's directory, checks again and commits 60-99 only."""
    options = s3_server.storage_options
    sink = spark_sink(table, s3_server)
    engine = ZombieAfterWrite(sink.spark_engine.spark, options,  # type: ignore[union-attr]
                              table, records(ORDERS_0, range(60)))
    sink.spark_engine = engine
    await write(sink, [records(ORDERS_0, range(100))])
    assert once(pairs(read_with_deltars(table, options)), {(0, o) for o in range(100)})
    assert sink.metrics.commit_conflicts == 1
    assert (sink.metrics.rows_written, sink.metrics.rows_replayed) == (40, 60)
    assert DeltaTable(table, storage_options=options).transaction_version(
        transaction_app_id("aiostreams", ORDERS_0)) == 99
    dirs = batch_dirs(s3_server, table)
    assert len(engine.lost) == 1 and engine.lost[0] not in dirs and len(dirs) == 1


async def test_a_batch_whose_files_the_driver_does_not_find_on_s3_never_commits(
        s3_server: S3Server, table: str, spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import aiostreams.sinks.parquet_writer as writer

    real = writer._write_with_spark

    def write_then_lose(data: pa.Table, uri: str, *args: Any) -> None:
        real(data, uri, *args)
        s3_filesystem(s3_server.storage_options).delete_dir(s3_key(uri))

    monkeypatch.setattr(writer, "_write_with_spark", write_then_lose)
    sink = spark_sink(table, s3_server)
    await sink.start()
    for record in records(ORDERS_0, range(100)):
        sink.add(record)
    with pytest.raises(Exception, match=r"writing 100 row\(s\).*finds 0 row") as caught:
        await sink.flush()
    assert isinstance(caught.value.__cause__ or caught.value, UnreachableFilesError)
    assert DeltaTable(table, storage_options=s3_server.storage_options).version() == 0
    assert DeltaTable(table, storage_options=s3_server.storage_options).transaction_version(
        transaction_app_id("aiostreams", ORDERS_0)) is None


async def test_an_s3_endpoint_the_sink_cannot_reach_fails_start_clearly_and_commits_nothing(
        s3_server: S3Server, table: str, spark: Any) -> None:
    await write(spark_sink(table, s3_server), [records(ORDERS_0, range(10))])
    options = {**s3_server.storage_options, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    explicit = with_s3a_conf(BASE, s3_server.storage_options)  # Spark's view stays good
    sink = DeltaSink(table, Order, include=INCLUDE, engine="spark", spark=explicit,
                     storage_options=options)
    with pytest.raises(ConfigError, match=r"(?s)cannot reach s3a://.*endpoint http://127\.0\.0\.1:9"
                                          r".*AWS_ENDPOINT_URL"):
        await sink.start()
    assert once(pairs(read_with_deltars(table, s3_server.storage_options)),
                {(0, o) for o in range(10)})
    assert DeltaTable(table, storage_options=s3_server.storage_options).version() == 1


async def test_rows_per_second_of_the_spark_engine_on_moto(
        s3_server: S3Server, table: str, spark: Any) -> None:
    sink = spark_sink(table, s3_server)
    await sink.start()
    for record in records(ORDERS_0, range(1000)):  # warm-up: the first job on S3A
        sink.add(record)
    await sink.flush()
    n = 50_000
    for record in records(ORDERS_0, range(1000, 1000 + n)):
        sink.add(record)
    start = time.perf_counter()
    await sink.flush()
    took = time.perf_counter() - start
    await sink.stop()
    print(f"spark engine on moto: {n} rows in {took:.2f} s = {n / took:,.0f} rows/s")
    assert len(read_with_deltars(table, s3_server.storage_options)) == 1000 + n
