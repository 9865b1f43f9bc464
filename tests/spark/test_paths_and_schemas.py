"""Paths are parsed strictly (no write under the current directory for a URI it misread), a
model change that old files cannot take is refused before anything is written, and an empty
string never becomes a partition directory, with either engine (issue 19, item 7)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import BaseModel
from sparkkit import (
    Order,
    WatchedSink,
    create_topic,
    make_app,
    order_records,
    produce,
    read_with_pyarrow,
    read_with_spark,
    unique,
)

from aiostreams import ConfigError, SerializationError
from aiostreams.engine.failure import DLQ_HEADER_PREFIX
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks import ParquetSink, SchemaMismatch, committed_files
from aiostreams.sinks.commit_log import LOG_DIR
from aiostreams.sinks.paths import ACCEPTED_FORMS, parse_table_path
from aiostreams.sinks.schema_evolution import IncompatibleSchemaError, check_appendable
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

pytestmark = pytest.mark.spark

TP = TopicPartition("t", 0)


class Reading(BaseModel):
    id: int
    site: str


class ReadingIdAsText(BaseModel):
    id: str
    site: str


class ReadingWithOptionalNote(BaseModel):
    id: int
    site: str
    note: str | None = None


class ReadingWithRequiredUnit(BaseModel):
    id: int
    site: str
    unit: str


async def write(sink: ParquetSink, rows: list[BaseModel], first: int = 0) -> None:
    await sink.start()
    for n, row in enumerate(rows, start=first):
        sink.add(ExternalRecord("p", TP, n, str(n), row, 0.0))
    await sink.stop()


@pytest.mark.parametrize("form", ["file:{}", "file://{}", "file://localhost{}"])
async def test_file_uris_write_at_their_absolute_path_not_under_the_cwd(
        form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target, elsewhere = tmp_path / "table", tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    sink = ParquetSink(form.format(target), Reading, engine="pyarrow")
    assert sink.path == target
    await write(sink, [Reading(id=1, site="a")])
    assert len(committed_files(target)) == 1
    assert list(elsewhere.iterdir()) == []


segment = st.text(st.characters(codec="ascii", categories=("L", "N"), include_characters="-_ "),
                  min_size=1, max_size=8)


@given(parts=st.lists(segment, min_size=1, max_size=4))
@example(parts=[" "])  # found by CI: a blank relative path
def test_every_file_form_and_a_relative_path_name_one_absolute_path(parts: list[str]) -> None:
    absolute = Path("/", *parts)
    for text in (str(absolute), f"file:{absolute}", f"file://{absolute}",
                 f"file://localhost{absolute}", absolute.as_uri()):
        parsed = parse_table_path(text)
        assert parsed.local == absolute, text
        assert parsed.uri == f"file://{absolute}"
    text = "/".join(parts)
    if not text.strip():  # a blank path is refused (an unset setting, not a directory name)
        with pytest.raises(ConfigError, match="it is empty"):
            parse_table_path(text, cwd=Path("/base"))
        return
    relative = parse_table_path(text, cwd=Path("/base"))
    assert relative.local == Path("/base", *parts)


@pytest.mark.parametrize("text", ["file://otherhost/data", "file:data", "s3n://bucket/t",
                                  "gs://bucket/t", "data:2024", "file:///d?x=1", "s3a://bucket",
                                  "s3://bucket/", "s3a://key:secret@bucket/t", "hdfs://nn:8020",
                                  ""])
def test_unsupported_forms_are_config_errors_naming_the_accepted_ones(text: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_table_path(text)
    assert all(form in str(error.value) for form in ACCEPTED_FORMS)


@pytest.mark.parametrize("text", ["hdfs://nn:8020/tables/orders", "s3a://bucket/tables/orders"])
def test_remote_tables_go_to_spark_as_written_and_the_parquet_sink_says_why_not(
        text: str) -> None:
    assert parse_table_path(text).uri == text
    assert parse_table_path(text).local is None
    if text.startswith("s3a:"):  # s3:// names the same place; Spark reads it through S3A
        assert parse_table_path(text.replace("s3a:", "s3:", 1)).uri == text
    with pytest.raises(ConfigError, match=r"aiostreams\.sinks\.spark\.structured") as error:
        ParquetSink(text, Reading, engine="spark")
    assert "driver and every executor" in str(error.value)


@pytest.mark.parametrize("engine", ["pyarrow", "spark"])
async def test_a_model_change_old_files_cannot_take_is_refused_before_any_write(
        engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if engine == "spark":
        request.getfixturevalue("spark")
    path = tmp_path / "readings"
    await write(ParquetSink(path, Reading, engine=engine, partition_by=("site",)),
                [Reading(id=1, site="a")])
    entries = sorted((path / LOG_DIR).glob("*.json"))

    for model, field, why in ((ReadingIdAsText, "ReadingIdAsText.id", "is int64 in the "
                               "dataset and string in the model"),
                              (ReadingWithRequiredUnit, "ReadingWithRequiredUnit.unit",
                               "is new and required")):
        sink = ParquetSink(path, model, engine=engine, partition_by=("site",))
        with pytest.raises(IncompatibleSchemaError) as error:
            await sink.start()
        assert f"{field} {why}" in str(error.value)
        assert str(path) in str(error.value)
        await sink.stop()
        assert sorted((path / LOG_DIR).glob("*.json")) == entries

    # compatible: the same model, and one with a new optional field
    await write(ParquetSink(path, Reading, engine=engine, partition_by=("site",)),
                [Reading(id=2, site="b")], first=1)
    await write(ParquetSink(path, ReadingWithOptionalNote, engine=engine,
                            partition_by=("site",)),
                [ReadingWithOptionalNote(id=3, site="a", note="x")], first=2)
    assert len(committed_files(path)) == 3


def test_an_empty_partition_string_is_refused_by_both_engines_alike(tmp_path: Path) -> None:
    messages = []
    for engine in ("pyarrow", "spark"):
        sink = ParquetSink(tmp_path / engine, Reading, engine=engine,  # type: ignore[arg-type]
                           partition_by=("site",))
        sink.validate(Reading(id=1, site="a"))
        with pytest.raises(SchemaMismatch) as error:
            sink.validate(Reading(id=1, site=""))
        messages.append(str(error.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith("Reading.site: an empty string cannot be a partition value")


@pytest.mark.parametrize("engine", ["pyarrow", "spark"])
async def test_an_unchecked_empty_partition_string_fails_the_flush_and_writes_nothing(
        engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if engine == "spark":
        request.getfixturevalue("spark")
    sink = ParquetSink(tmp_path / "d", Reading, engine=engine, partition_by=("site",))
    await sink.start()
    sink.add(ExternalRecord("p", TP, 0, "0", Reading(id=0, site="a"), 0.0))
    sink.add(ExternalRecord("p", TP, 1, "1", Reading(id=1, site=""), 0.0))
    with pytest.raises(SerializationError, match="empty string cannot be a partition"):
        await sink.flush()
    await sink.stop()
    assert committed_files(tmp_path / "d") == []


@pytest.mark.parametrize("engine", ["pyarrow", "spark"])
async def test_empty_partition_strings_take_the_dead_letter_path_and_readers_agree(
        engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    spark: Any = request.getfixturevalue("spark") if engine == "spark" else None
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic, dlq = unique("orders"), unique("orders-dlq")
    await create_topic(transport, topic, 1)
    items = order_records(range(30))
    blank = Order.model_validate_json(items[4][1] or b"").model_copy(update={"region": ""})
    items[4] = (b"4", blank.model_dump_json().encode())
    await produce(transport, topic, items)
    sink = WatchedSink(tmp_path / "d", Order, engine=engine,  # type: ignore[arg-type]
                       partition_by=("region",))
    async with make_app(unique("blank"), transport, topic, sink, dead_letter_topic=dlq):
        await sink.durable_through({TopicPartition(topic, 0): 29}).wait()
    [dead] = broker.records(dlq)
    assert dict(dead.headers)[DLQ_HEADER_PREFIX + "offset"] == b"4"
    expected = [i for i in range(30) if i != 4]
    assert sorted(read_with_pyarrow(tmp_path / "d", sink).column("id").to_pylist()) == expected
    if spark is not None:
        table = read_with_spark(spark, tmp_path / "d", sink)
        assert sorted(table.column("id").to_pylist()) == expected
        assert None not in table.column("region").to_pylist()
    assert {p.name for p in (tmp_path / "d").iterdir() if not p.name.startswith("_")} == {
        "region=eu", "region=us", "region=apac"}


def test_how_a_writer_spells_nullability_and_child_names_is_not_a_change() -> None:
    inner = pa.struct([pa.field("sku", pa.string(), nullable=False)])
    model = pa.schema([pa.field("items", pa.list_(pa.field("item", inner, nullable=False)),
                                nullable=False),
                       pa.field("tags", pa.map_(pa.string(), pa.int64()), nullable=False)])
    as_spark_writes = pa.schema([
        pa.field("items", pa.list_(pa.field("element", pa.struct([pa.field("sku", pa.string())])))),
        pa.field("tags", pa.map_(pa.field("key", pa.string(), nullable=False),
                                 pa.field("value", pa.int64())))])
    check_appendable(as_spark_writes, model, model="M", dataset="/d")
    changed = pa.schema([pa.field("items", pa.list_(pa.struct([pa.field("sku", pa.int64())])))])
    with pytest.raises(IncompatibleSchemaError, match=r"M\.items is list"):
        check_appendable(changed, model, model="M", dataset="/d")
