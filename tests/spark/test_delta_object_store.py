"""The Delta sink on an object store: ``s3a://`` (and ``s3://``, the same table) against a
real S3-protocol server on 127.0.0.1 (moto's server), written by delta-rs with its own S3
support; crashes, replays and racing writers leave each input once, read back by delta-rs,
pandas, DuckDB and Spark (``hadoop-aws``'s S3A on a standalone cluster)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from deltakit import (
    HERE,
    RacedDeltaSink,
    pairs,
    read_with_deltars,
    read_with_duckdb,
    read_with_pandas,
    read_with_spark_process,
    records,
)
from deltalake import DeltaTable
from s3kit import HADOOP_AWS, S3Server
from sparkkit import Order, add_orders

from aiostreams.errors import ConfigError
from aiostreams.sinks import DeltaSink, DeltaStep
from aiostreams.types import TopicPartition

ORDERS_0, ORDERS_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
assert HERE.is_dir()


class Crash(Exception):
    """Stands for the process dying at a step of a write."""


class CrashingSink(DeltaSink):
    crash_at: DeltaStep | None = None

    def _after(self, step: DeltaStep) -> None:
        if step is self.crash_at:
            raise Crash(step.value)


@pytest.fixture
def table(s3_server: S3Server) -> str:
    return f"s3a://{s3_server.create_bucket()}/tables/orders"


def sink_at(path: str, server: S3Server, cls: type[DeltaSink] = DeltaSink,
            **kwargs: Any) -> Any:
    return cls(path, Order, include=("partition", "offset"),
               storage_options=server.storage_options, **kwargs)


def counted_once(seen: list[tuple[int, int]], expected: set[tuple[int, int]]) -> bool:
    counts = Counter(seen)
    return counts.keys() == expected and max(counts.values()) == 1


@pytest.mark.parametrize("step", list(DeltaStep))
async def test_a_write_to_s3_interrupted_at_each_step_then_replayed_holds_each_input_once(
        s3_server: S3Server, table: str, step: DeltaStep) -> None:
    first = sink_at(table, s3_server)
    await first.start()
    add_orders(first, range(100), ORDERS_0)  # type: ignore[arg-type]
    await first.stop()
    crashing = sink_at(table, s3_server, CrashingSink)
    crashing.crash_at = step
    await crashing.start()
    add_orders(crashing, range(100, 250), ORDERS_0)  # type: ignore[arg-type]
    with pytest.raises(Exception, match=step.value):
        await crashing.flush()
    again = sink_at(table, s3_server)  # the restarted app replays from offset 100
    await again.start()
    add_orders(again, range(100, 300), ORDERS_0)  # type: ignore[arg-type]
    await again.stop()
    assert again.metrics.rows_replayed == (150 if step is DeltaStep.COMMITTED else 0)
    options = s3_server.storage_options
    expected = {(0, i) for i in range(300)}
    for reader in (lambda: pairs(read_with_deltars(table, options)),
                   lambda: read_with_pandas(table, options),
                   lambda: read_with_duckdb(table, options)):
        assert counted_once(reader(), expected)


async def test_s3_and_s3a_uris_name_the_same_table(s3_server: S3Server, table: str) -> None:
    first = sink_at(table, s3_server)
    await first.start()
    add_orders(first, range(50), ORDERS_1)  # type: ignore[arg-type]
    await first.stop()
    second = sink_at(table.replace("s3a://", "s3://", 1), s3_server)
    assert second.path == table
    await second.start()
    add_orders(second, range(60), ORDERS_1)  # type: ignore[arg-type]
    await second.stop()
    assert second.metrics.rows_replayed == 50
    assert counted_once(pairs(read_with_deltars(table, s3_server.storage_options)),
                        {(1, i) for i in range(60)})


async def test_a_commit_to_s3_that_lost_a_race_writes_only_what_is_not_durable(
        s3_server: S3Server, table: str) -> None:
    """S3 has no rename: delta-rs commits with a conditional put, which the server
    enforces, so the other writer's commit makes this one fail and check again."""
    raced = RacedDeltaSink(table, Order, other=records(ORDERS_1, range(6)),
                           storage_options=s3_server.storage_options)
    await raced.start()
    add_orders(raced, range(10), ORDERS_1)  # type: ignore[arg-type]
    await raced.flush()
    await raced.stop()
    assert raced.metrics.commit_conflicts == 1
    assert (raced.metrics.rows_written, raced.metrics.rows_replayed) == (4, 6)
    assert counted_once(pairs(read_with_deltars(table, s3_server.storage_options)),
                        {(1, i) for i in range(10)})


@pytest.mark.parametrize("text", ["hdfs://nn:8020/tables/orders", "s3n://bucket/orders",
                                  "s3a://bucket", "s3://bucket/", "gs://bucket/orders"])
def test_object_store_forms_the_sink_cannot_write_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="s3a://bucket"):
        DeltaSink(text, Order)


def test_storage_options_on_a_local_path_are_refused(tmp_path: Any) -> None:
    with pytest.raises(ConfigError, match="for object stores"):
        DeltaSink(tmp_path / "t", Order, storage_options={"AWS_REGION": "us-east-1"})


@pytest.mark.spark
@pytest.mark.timeout(600)
async def test_spark_reads_the_s3_table_through_s3a_once_per_input(
        s3_server: S3Server, table: str, delta_spark: Any) -> None:
    sink = sink_at(table, s3_server, CrashingSink)
    sink.crash_at = DeltaStep.COMMITTED  # a committed batch that is then replayed
    await sink.start()
    add_orders(sink, range(500), ORDERS_0)  # type: ignore[arg-type]
    with pytest.raises(Exception, match="Crash: committed"):
        await sink.flush()
    again = sink_at(table, s3_server)
    await again.start()
    add_orders(again, range(800), ORDERS_0)  # type: ignore[arg-type]
    add_orders(again, range(300), ORDERS_1)  # type: ignore[arg-type]
    await again.stop()
    config = delta_spark.model_copy(update={
        "packages": (*delta_spark.packages, HADOOP_AWS),
        "conf": {**delta_spark.conf, **s3_server.spark_conf}})
    seen = read_with_spark_process(config, table)
    assert counted_once(seen, {(0, i) for i in range(800)} | {(1, i) for i in range(300)})
    assert DeltaTable(table, storage_options=s3_server.storage_options).version() == 1
