"""Avro schemas generated from pydantic models (no server needed): the mapping, and values
of the model round-tripping through fastavro with the generated schema."""

from __future__ import annotations

import enum
import io

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from aiostreams.schema_registry import (
    AvroSerde,
    SchemaRegistryClient,
    avro_schema_for,
    record_name,
)
from aiostreams.schema_registry.avro_schema import avro_value


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    city: str
    zip: str | None = None


class Customer(BaseModel):
    id: int
    name: str
    score: float
    active: bool
    avatar: bytes = b""
    home: Address
    previous: list[Address] = []
    labels: dict[str, int] = {}
    colour: Colour = Colour.RED
    nickname: str | None = None


def test_model_maps_to_the_documented_avro_types() -> None:
    schema = avro_schema_for(Customer, namespace="com.acme")
    fields = {f["name"]: f for f in schema["fields"]}
    assert (schema["name"], schema["namespace"]) == ("Customer", "com.acme")
    assert [fields[n]["type"] for n in ("id", "name", "score", "active", "avatar")] == [
        "long", "string", "double", "boolean", "bytes"]
    assert fields["home"]["type"]["type"] == "record"
    assert fields["previous"]["type"] == {"type": "array", "items": "Address"}
    assert fields["labels"]["type"] == {"type": "map", "values": "long"}
    assert fields["colour"]["type"]["symbols"] == ["red", "blue"]
    assert fields["colour"]["default"] == "red"
    assert (fields["nickname"]["type"], fields["nickname"]["default"]) == (
        ["null", "string"], None)
    fastavro.parse_schema(schema)


class Odd(BaseModel):
    either: int | str


def test_a_type_without_a_natural_avro_form_is_an_error_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"Odd\.either"):
        avro_schema_for(Odd)


addresses = st.builds(Address, city=st.text(max_size=8), zip=st.none() | st.text(max_size=5))


@given(st.builds(
    Customer, id=st.integers(min_value=-(2**63), max_value=2**63 - 1), name=st.text(),
    score=st.floats(allow_nan=False), active=st.booleans(), avatar=st.binary(max_size=8),
    home=addresses, previous=st.lists(addresses, max_size=3),
    labels=st.dictionaries(st.text(max_size=4), st.integers(-5, 5), max_size=3),
    colour=st.sampled_from(Colour), nickname=st.none() | st.text(max_size=5)))
def test_every_model_value_round_trips_through_the_generated_schema(
        customer: Customer) -> None:
    schema = fastavro.parse_schema(avro_schema_for(Customer))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, avro_value(customer))
    out.seek(0)
    assert Customer.model_validate(fastavro.schemaless_reader(out, schema, None)) == customer


class Order(BaseModel):
    id: str
    home: Address


def test_the_record_name_is_the_class_name_unless_pinned() -> None:
    assert avro_schema_for(Order)["name"] == "Order"
    pinned = avro_schema_for(Order, name="com.acme.Order")
    assert (pinned["name"], pinned["namespace"]) == ("Order", "com.acme")
    assert avro_schema_for(Order, "com.acme", name="PlacedOrder")["name"] == "PlacedOrder"
    fastavro.parse_schema(pinned)
    with pytest.raises(ValueError, match=r"'com\.acme\.2nd' is not a valid Avro name"):
        avro_schema_for(Order, name="com.acme.2nd")
    with pytest.raises(ValueError, match="already has a namespace"):
        avro_schema_for(Order, "org.other", name="com.acme.Order")


async def test_a_renamed_class_keeps_the_pinned_record_name_and_subject() -> None:
    """Renaming the class would otherwise change the record name, and with it the
    subject under the record_name strategies: an incompatible change."""
    registry = SchemaRegistryClient("http://127.0.0.1:9")  # never asked: no record written
    try:
        check_pinned_names(registry)
    finally:
        await registry.close()


def check_pinned_names(registry: SchemaRegistryClient) -> None:

    class OrderV2(BaseModel):  # the same record, its class renamed
        id: str
        home: Address

    first = AvroSerde(registry, Order, record_name="com.acme.Order",
                      subject_name_strategy=record_name)
    renamed = AvroSerde(registry, OrderV2, record_name="com.acme.Order",
                        subject_name_strategy=record_name)
    assert first.record_name == renamed.record_name == "com.acme.Order"
    assert first.schema == renamed.schema
    assert AvroSerde(registry, OrderV2).record_name == "OrderV2"  # unpinned: it moved
    with pytest.raises(ValueError, match="names the record generated from a pydantic model"):
        AvroSerde(registry, avro_schema_for(Order), record_name="com.acme.Order")
