"""What a Delta sink refuses before it writes (another app's or another source's table, other
partition columns, an incompatible model change), what it accepts (a new optional field,
merged into the table's schema), partitioned tables, and ``stream.to_delta`` in an app."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from deltakit import read_with_deltars
from deltalake import DeltaTable
from pydantic import BaseModel
from sparkkit import Order, add_orders, create_topic, order_records, produce, unique

from aiostreams import App
from aiostreams.errors import ConfigError
from aiostreams.sinks import (
    DeltaSink,
    IncompatibleSchemaError,
    SchemaMismatch,
    SinkFailedError,
    TableIdentityError,
)
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

ORDERS = TopicPartition("orders", 0)


class Reading(BaseModel):
    id: int
    site: str


class ReadingWithUnit(BaseModel):
    id: int
    site: str
    unit: str | None = None


class ReadingWithRequiredUnit(BaseModel):
    id: int
    site: str
    unit: str


class ReadingWithTextId(BaseModel):
    id: str
    site: str


async def write(sink: DeltaSink, values: list[BaseModel],
                source: TopicPartition = ORDERS, first: int = 0) -> None:
    from aiostreams.runtime.external_record import ExternalRecord

    await sink.start()
    for i, value in enumerate(values):
        sink.add(ExternalRecord("delta", source, first + i, None, value, 0.0))
    await sink.stop()


async def test_a_table_written_for_another_app_is_refused_naming_both(tmp_path: Path) -> None:
    mine = DeltaSink(tmp_path / "t", Order)
    mine.bind_app("billing")
    await mine.start()
    add_orders(mine, range(3))  # type: ignore[arg-type]
    await mine.stop()
    other = DeltaSink(tmp_path / "t", Order)
    other.bind_app("fraud")
    with pytest.raises(TableIdentityError, match=r"'billing'.*'fraud'"):
        await other.start()


async def test_rows_from_another_source_topic_are_refused_before_writing(
        tmp_path: Path) -> None:
    first = DeltaSink(tmp_path / "t", Order)
    await first.start()
    add_orders(first, range(3))  # type: ignore[arg-type]
    await first.stop()
    version = DeltaTable(str(tmp_path / "t")).version()
    second = DeltaSink(tmp_path / "t", Order)
    await second.start()
    add_orders(second, range(3), TopicPartition("payments", 0))  # type: ignore[arg-type]
    with pytest.raises(TableIdentityError, match=r"\['orders'\].*\['payments'\]"):
        await second.flush()
    assert DeltaTable(str(tmp_path / "t")).version() == version
    with pytest.raises(SinkFailedError):
        await second.flush()
    await second.stop()


async def test_declared_sources_are_checked_at_start(tmp_path: Path) -> None:
    await write(DeltaSink(tmp_path / "t", Reading, sources=["orders"]), [Reading(id=1, site="a")])
    with pytest.raises(TableIdentityError, match="payments"):
        await DeltaSink(tmp_path / "t", Reading, sources=["payments"]).start()


async def test_a_new_optional_field_merges_into_the_table_schema(tmp_path: Path) -> None:
    await write(DeltaSink(tmp_path / "t", Reading), [Reading(id=1, site="a")])
    await write(DeltaSink(tmp_path / "t", ReadingWithUnit),
                [ReadingWithUnit(id=2, site="b", unit="kg")], first=1)
    table = read_with_deltars(tmp_path / "t").sort_by("id")
    assert table.column("unit").to_pylist() == [None, "kg"]


@pytest.mark.parametrize(("model", "field"), [
    (ReadingWithTextId, "ReadingWithTextId.id is int64 in the dataset and string"),
    (ReadingWithRequiredUnit, "ReadingWithRequiredUnit.unit is new and required")])
async def test_an_incompatible_model_is_refused_naming_the_field_before_writing(
        tmp_path: Path, model: type[BaseModel], field: str) -> None:
    await write(DeltaSink(tmp_path / "t", Reading), [Reading(id=1, site="a")])
    version = DeltaTable(str(tmp_path / "t")).version()
    with pytest.raises(IncompatibleSchemaError, match=re.escape(field)):
        await DeltaSink(tmp_path / "t", model).start()
    assert DeltaTable(str(tmp_path / "t")).version() == version


async def test_a_partitioned_table_holds_each_row_under_its_partition(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path / "t", Order, partition_by=("region",))
    await sink.start()
    add_orders(sink, range(30))  # type: ignore[arg-type]
    await sink.stop()
    table = DeltaTable(str(tmp_path / "t"))
    assert table.metadata().partition_columns == ["region"]
    for action in pa.table(table.get_add_actions(flatten=True)).to_pylist():
        assert f"region={action['partition.region']}/" in action["path"]
    rows = table.to_pyarrow_table()
    assert sorted(rows.column("id").to_pylist()) == list(range(30))
    assert {(i % 3, r) for i, r in zip(rows.column("id").to_pylist(),
                                       rows.column("region").to_pylist(), strict=True)} == {
        (0, "eu"), (1, "us"), (2, "apac")}
    with pytest.raises(ConfigError, match=r"partitioned by \['region'\]"):
        await DeltaSink(tmp_path / "t", Order).start()


async def test_stream_to_delta_writes_every_input_once(tmp_path: Path) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic = unique("orders")
    await create_topic(transport, topic, 2)
    await produce(transport, topic, order_records(range(200)))
    app = App(unique("dsl"), transport=transport, commit_interval_ms=100)
    orders = app.topic(topic, key=str, value=Order)
    sink = app.stream(orders).to_delta(tmp_path / "t", Order, include=("partition", "offset"),
                                       batch_interval=0.2)
    assert isinstance(sink, DeltaSink)
    async with app:
        await app.wait_until_caught_up()
    assert sorted(read_with_deltars(tmp_path / "t").column("id").to_pylist()) == list(range(200))


def test_an_empty_partition_value_fails_validation_before_the_sink(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path / "t", Reading, partition_by=("site",))
    sink.validate(Reading(id=1, site="a"))
    with pytest.raises(SchemaMismatch, match="empty string"):
        sink.validate(Reading(id=1, site=""))


@pytest.mark.parametrize("path", ["s3n://bucket/orders", "hdfs://nn:8020/orders",
                                  "file://otherhost/orders"])
def test_a_path_the_sink_cannot_write_is_refused_not_written_elsewhere(
        path: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        DeltaSink(path, Reading)
