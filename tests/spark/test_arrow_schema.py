"""Arrow schemas from pydantic models: the type mapping, metadata columns, clear errors for
what Parquet cannot hold, and checks that catch every value the conversion would reject."""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from decimal import Decimal
from typing import Any, Literal, Optional

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field
from sparkkit import Order, make_order

from aiostreams import ConfigError
from aiostreams.sinks import RowSchema, SchemaMismatch

pytestmark = pytest.mark.spark


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Inner(BaseModel):
    x: int
    when: dt.date | None = None


class Everything(BaseModel):
    flag: bool
    count: int
    ratio: float
    name: str
    blob: bytes
    at: dt.datetime
    day: dt.date
    price: Decimal = Field(max_digits=10, decimal_places=3)
    loose: Decimal
    color: Color
    level: Level
    ident: uuid.UUID
    kind: Literal["a", "b"]
    inner: Inner
    maybe_inner: Optional[Inner] = None  # noqa: UP045 - the typing spelling is supported too
    inners: list[Inner]
    scores: tuple[float, ...]
    attrs: dict[str, int]
    note: str | None = None


def test_every_supported_type_maps_to_its_arrow_type() -> None:
    schema = RowSchema(Everything).arrow_schema
    inner = pa.struct([pa.field("x", pa.int64(), False), pa.field("when", pa.date32())])
    expected = {
        "flag": pa.bool_(), "count": pa.int64(), "ratio": pa.float64(), "name": pa.string(),
        "blob": pa.binary(), "at": pa.timestamp("us", tz="UTC"), "day": pa.date32(),
        "price": pa.decimal128(10, 3), "loose": pa.decimal128(38, 18), "color": pa.string(),
        "level": pa.string(), "ident": pa.string(), "kind": pa.string(), "inner": inner,
        "maybe_inner": inner, "inners": pa.list_(pa.field("element", inner, False)),
        "scores": pa.list_(pa.field("element", pa.float64(), False)),
        "attrs": pa.map_(pa.string(), pa.field("value", pa.int64(), False)),
        "note": pa.string(),
    }
    assert {f.name: f.type for f in schema} == expected
    assert [f.name for f in schema if f.nullable] == ["maybe_inner", "note"]


def everything(**changes: Any) -> Everything:
    values: dict[str, Any] = dict(
        flag=True, count=-3, ratio=0.5, name="zürich", blob=b"\x00\x01",
        at=dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        day=dt.date(2024, 2, 29), price=Decimal("1234567.125"), loose=Decimal("-0.5"),
        color=Color.BLUE, level=Level.HIGH, ident=uuid.UUID(int=7), kind="b",
        inner=Inner(x=1), maybe_inner=None, inners=[Inner(x=2, when=dt.date(2020, 1, 1))],
        scores=(1.0, 2.5), attrs={"a": 1}, note=None)
    values.update(changes)
    return Everything(**values)


def constructed(**changes: Any) -> Everything:
    """A model holding values pydantic would refuse (as ``model_construct`` allows)."""
    return Everything.model_construct(**{**everything().__dict__, **changes})


def test_rows_convert_to_the_values_a_reader_expects() -> None:
    rows = [everything(), everything(maybe_inner=Inner(x=9), inners=[], note="n")]
    table = RowSchema(Everything).to_table(rows)
    first, second = table.to_pylist()
    assert first["at"] == dt.datetime(2024, 1, 2, 1, 4, 5, 6, tzinfo=dt.UTC)
    assert (first["color"], first["level"], first["ident"]) == (
        "blue", "HIGH", "00000000-0000-0000-0000-000000000007")
    assert first["price"] == Decimal("1234567.125")
    assert first["inners"] == [{"x": 2, "when": dt.date(2020, 1, 1)}]
    assert first["attrs"] == [("a", 1)]
    assert first["maybe_inner"] is None and second["maybe_inner"] == {"x": 9, "when": None}
    assert second["inners"] == [] and second["note"] == "n"


def test_metadata_columns_follow_the_model_and_can_be_prefixed() -> None:
    class Keyed(BaseModel):
        offset: int

    with pytest.raises(ConfigError, match="metadata_prefix"):
        RowSchema(Keyed, include=("offset",))
    schema = RowSchema(Keyed, include=("timestamp", "key", "offset"), key_type=int,
                       metadata_prefix="kafka_")
    assert schema.column_names == ["offset", "kafka_key", "kafka_offset", "kafka_timestamp"]
    table = schema.to_table([Keyed(offset=1)], {"key": [None], "offset": [5],
                                                "timestamp": [1.5]})
    assert table.to_pylist() == [{"offset": 1, "kafka_key": None, "kafka_offset": 5,
                                  "kafka_timestamp": dt.datetime(1970, 1, 1, 0, 0, 1, 500000,
                                                                 tzinfo=dt.UTC)}]


@pytest.mark.parametrize(("annotation", "fragment"), [
    (Any, "Holder.field: Any has no Parquet type"),
    (int | str, "Holder.field: the union"),
    (set[int], r"Holder.field: set\[int\] has no Parquet type"),
    (tuple[int, str], "fixed-size tuples"),
    (list[dt.timedelta], r"Holder.field\[\]: timedelta has no Parquet type"),
    (dict[str, Inner], "map values must be plain types"),
    (Literal["a", 1], "mixes value types"),
])
def test_unsupported_types_are_config_errors_naming_the_field_path(
        annotation: Any, fragment: str) -> None:
    holder = type("Holder", (BaseModel,), {"__annotations__": {"field": annotation}})
    with pytest.raises(ConfigError, match=fragment):
        RowSchema(holder)


def test_recursive_models_are_refused() -> None:
    class Node(BaseModel):
        children: list[Node]

    Node.model_rebuild()
    with pytest.raises(ConfigError, match=r"Node.children\[\]: Node contains itself"):
        RowSchema(Node)


@pytest.mark.parametrize(("value", "reason"), [
    (everything(count=2**63), "Everything.count: expected an int within 64 bits"),
    (constructed(price=Decimal("1.0001")), "Everything.price: 1.0001 has more than 3 decimal"),
    (constructed(price=Decimal("12345678.5")), "more than 7 integer digits"),
    (constructed(loose=Decimal("NaN")), "cannot be stored in a Parquet decimal"),
    (everything(name="bad \ud800"), "Everything.name: expected a str encodable as UTF-8"),
    (constructed(inners=[Inner(x=1), 5]), r"Everything.inners\[1\]: expected a Inner"),
    (constructed(color="green"), "Everything.color: expected a member of Color"),
    (constructed(inner=None), "Everything.inner: is None, but the field is not Optional"),
])
def test_check_rejects_what_the_conversion_cannot_hold_exactly(value: Everything,
                                                               reason: str) -> None:
    schema = RowSchema(Everything)
    with pytest.raises(SchemaMismatch, match=reason):
        schema.check(value)


def test_decimal_trailing_zeros_beyond_the_scale_still_fit() -> None:
    schema = RowSchema(Everything)
    schema.check(everything(price=Decimal("1.2500")))
    assert schema.to_table([everything(price=Decimal("1.2500"))]).column("price")[0].as_py() \
        == Decimal("1.250")


def test_use_enum_values_models_convert_too() -> None:
    class Plain(BaseModel):
        model_config = ConfigDict(use_enum_values=True)
        color: Color

    schema = RowSchema(Plain)
    schema.check(Plain(color=Color.RED))
    assert schema.to_table([Plain(color=Color.RED)]).column("color").to_pylist() == ["red"]


def test_columnwise_conversion_matches_arrow_from_pylist() -> None:
    rows = [make_order(i) for i in range(500)]
    schema = RowSchema(Order)
    dumped = [r.model_dump() for r in rows]
    for d in dumped:
        d["tier"] = d["tier"].value
    assert schema.to_table(rows).equals(pa.Table.from_pylist(dumped, schema=schema.arrow_schema))


@given(st.lists(st.one_of(st.none(), st.builds(Inner, x=st.integers(-(2**63), 2**63 - 1),
                                                   when=st.none() | st.dates())), max_size=8),
       st.lists(st.lists(st.builds(Inner, x=st.integers(-(2**63), 2**63 - 1)), max_size=3)
                | st.none(), min_size=1, max_size=8))
def test_every_checked_value_converts_exactly(maybe: list[Inner | None],
                                              lists: list[list[Inner] | None]) -> None:
    class Row(BaseModel):
        maybe: Inner | None
        many: list[Inner] | None

    schema = RowSchema(Row)
    rows = [Row(maybe=maybe[i % len(maybe)] if maybe else None, many=lists[i])
            for i in range(len(lists))]
    for r in rows:
        schema.check(r)
    back = schema.to_table(rows).to_pylist()
    assert back == [r.model_dump() for r in rows]
