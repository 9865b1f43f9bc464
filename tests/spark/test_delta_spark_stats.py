"""File statistics of the Delta sink's Spark engine: each ``add`` carries, besides
``numRecords``, the min, max and null count of every column the footer has statistics for,
equal to the file's own data (pyarrow compute), so Delta readers can skip files."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks import DeltaSink
from aiostreams.sinks.file_stats import delta_stats
from aiostreams.types import TopicPartition

SOURCE = TopicPartition("typed", 0)
BASE = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)


class Inner(BaseModel):
    label: str | None
    weight: float | None


class Typed(BaseModel):
    n: int
    ratio: float | None
    name: str | None
    flag: bool | None
    blob: bytes | None
    day: dt.date | None
    at: dt.datetime | None
    price: Decimal | None = Field(max_digits=12, decimal_places=2)
    big: Decimal | None = Field(max_digits=38, decimal_places=18)
    inner: Inner | None
    tags: list[str]


def typed(i: int) -> Typed:
    gap = i % 7 == 3  # every column but n has nulls
    return Typed(
        n=(i * 7919) % 1000 - 500,
        ratio=None if gap else (i % 13) / 3 - 2,
        name=None if gap else f"name-{(i * 31) % 97:02d}",
        flag=None if gap else i % 2 == 0,
        blob=None if gap else bytes([i % 256]),
        day=None if gap else dt.date(2024, 1, 1) + dt.timedelta(days=(i * 13) % 400),
        at=None if gap else BASE + dt.timedelta(seconds=(i * 17) % 5000, microseconds=i * 7),
        price=None if gap else Decimal((i * 37) % 100_000 - 50_000) / 100,
        big=None if gap else Decimal(i * 123_457) / 1000 - Decimal("100.000000000000000001"),
        inner=None if i % 11 == 5 else Inner(label=None if gap else f"l{i % 5}",
                                             weight=None if i % 3 else i / 10),
        tags=[f"t{j}" for j in range(i % 3)])


def leaf_columns(table: pa.Table) -> dict[tuple[str, ...], pa.ChunkedArray]:
    """The columns reached through structs only (a struct's null masks its children)."""
    out: dict[tuple[str, ...], pa.ChunkedArray] = {}

    def walk(path: tuple[str, ...], column: pa.ChunkedArray) -> None:
        if pa.types.is_struct(column.type):
            for k, child in enumerate(column.type):
                walk((*path, child.name), pc.struct_field(column, [k]))  # parent nulls kept
        elif not pa.types.is_nested(column.type):
            out[path] = column
    for name in table.column_names:
        walk((name,), table.column(name))
    return out


def stat(tree: dict[str, Any], path: tuple[str, ...]) -> Any:
    for name in path:
        if not isinstance(tree, dict) or name not in tree:
            return None
        tree = tree[name]
    return tree


def as_delta(value: Any) -> Any:
    """A min or max of pyarrow compute as Delta stats write it."""
    if isinstance(value, dt.datetime):
        millis = value.replace(microsecond=value.microsecond // 1000 * 1000)
        return millis.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def check_stats(stats_json: str, data: pa.Table) -> set[str]:
    """Asserts ``stats_json`` describes ``data``; returns the columns that had a range."""
    stats = json.loads(stats_json, parse_float=Decimal, parse_int=Decimal)
    assert stats["numRecords"] == data.num_rows
    ranged: set[str] = set()
    for path, column in leaf_columns(data).items():
        assert stat(stats["nullCount"], path) == column.null_count, path
        low, high = stat(stats["minValues"], path), stat(stats["maxValues"], path)
        if pa.types.is_binary(column.type) or column.null_count == len(column):
            assert low is None and high is None, path
            continue
        assert low is not None and high is not None, path
        expected = pc.min_max(column).as_py()
        got = (low, high)
        if pa.types.is_floating(column.type) or pa.types.is_integer(column.type):
            got = (float(low), float(high))
            assert all(math.isfinite(v) for v in got)
        elif pa.types.is_decimal(column.type):
            got = (Decimal(low), Decimal(high))
        assert got == (as_delta(expected["min"]), as_delta(expected["max"])), path
        ranged.add(".".join(path))
    return ranged


@pytest.mark.spark
@pytest.mark.timeout(600)
async def test_spark_engine_adds_carry_each_columns_min_max_and_null_count(
        tmp_path: Path, spark: Any) -> None:
    path = tmp_path / "typed"
    sink = DeltaSink(path, Typed, engine="spark", include=("offset",))
    await sink.start()
    for batch in (range(0, 300), range(300, 500)):
        for i in batch:
            sink.add(ExternalRecord("delta", SOURCE, i, str(i), typed(i), 0.0))
        await sink.flush()
    await sink.stop()

    adds = [json.loads(line)["add"] for f in sorted((path / "_delta_log").glob("*.json"))
            for line in f.read_text().splitlines() if '"add"' in line]
    assert adds and sum(json.loads(a["stats"])["numRecords"] for a in adds) == 500
    ranged: set[str] = set()
    for add in adds:
        ranged |= check_stats(add["stats"], pq.read_table(path / unquote(add["path"])))
    assert ranged == {"n", "ratio", "name", "flag", "day", "at", "price", "big",
                      "inner.label", "inner.weight", "offset"}
    by_path = {unquote(a["path"]): json.loads(a["stats"]) for a in adds}
    parsed = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).to_pylist()
    assert len(parsed) == len(adds)
    for action in parsed:  # delta-rs reads the ranges back (what its file skipping uses)
        written = by_path[unquote(action["path"])]
        assert (action["min.n"], action["max.n"], action["null_count.inner.label"]) == (
            written["minValues"]["n"], written["maxValues"]["n"],
            written["nullCount"]["inner"]["label"])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=60), st.integers(1, 7))
def test_stats_of_any_row_groups_equal_the_files_data(
        tmp_path_factory: pytest.TempPathFactory, seeds: list[int], group_rows: int) -> None:
    rows = [typed(i).model_dump() for i in seeds]
    schema = pa.schema([("n", pa.int64()), ("ratio", pa.float64()), ("name", pa.string()),
                        ("flag", pa.bool_()), ("blob", pa.binary()), ("day", pa.date32()),
                        ("at", pa.timestamp("us", tz="UTC")),
                        ("price", pa.decimal128(12, 2)), ("big", pa.decimal128(38, 18)),
                        ("inner", pa.struct([("label", pa.string()),
                                             ("weight", pa.float64())])),
                        ("tags", pa.list_(pa.string()))])
    data = pa.Table.from_pylist(rows, schema=schema)
    file = tmp_path_factory.mktemp("stats") / "part.parquet"
    pq.write_table(data, file, row_group_size=group_rows)
    check_stats(delta_stats(pq.ParquetFile(file).metadata), data)
