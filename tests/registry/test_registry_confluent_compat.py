"""Byte compatibility with confluent-kafka's Schema Registry serializers, both pointed at the
same real registry: our bytes decode with theirs, theirs with ours, and (all three formats
being deterministic for these values) the bytes are equal."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protos import Header, Money, Order, OrderLine, Payment

from aiostreams.schema_registry import (
    AvroSerde,
    JsonSchemaSerde,
    ProtobufSerde,
    SchemaRegistryClient,
)

pytestmark = pytest.mark.registry

AVRO = {"type": "record", "name": "Payment", "namespace": "com.acme",
        "fields": [{"name": "id", "type": "string"}, {"name": "cents", "type": "long"},
                   {"name": "memo", "type": ["null", "string"], "default": None},
                   {"name": "tags", "type": {"type": "array", "items": "string"}}]}
JSON_SCHEMA = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Payment",
               "type": "object",
               "properties": {"id": {"type": "string"}, "cents": {"type": "integer"},
                              "tags": {"type": "array", "items": {"type": "string"}}},
               "required": ["id", "cents"]}
VALUES = [{"id": "p1", "cents": 125, "memo": None, "tags": []},
          {"id": "p-\u00e9", "cents": -(2**40), "memo": "m", "tags": ["a", "b"]}]


@pytest.fixture
def confluent(registry_url: str) -> Iterator[ConfluentClient]:
    client = ConfluentClient({"url": registry_url})
    try:
        yield client
    finally:
        client.close()


def _ctx(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def _both_ways(ours: Any, their_ser: Any, their_de: Any, topic: str, values: list[Any],
               same: Callable[[Any, Any], bool]) -> None:
    for value in values:
        our_bytes = ours.serialize(topic, value)
        their_bytes = their_ser(value, _ctx(topic))
        assert our_bytes == their_bytes
        assert same(their_de(our_bytes, _ctx(topic)), value)
        assert same(ours.deserialize(topic, their_bytes), value)


def test_avro_bytes_equal_confluents_and_decode_both_ways(
        registry: SchemaRegistryClient, confluent: ConfluentClient,
        fresh_topic: Callable[[str], str]) -> None:
    topic = fresh_topic("avro-compat")
    ours = AvroSerde(registry, AVRO)
    theirs = AvroSerializer(confluent, ours.schema.schema_str)
    _both_ways(ours, theirs, AvroDeserializer(confluent), topic, VALUES,
               lambda a, b: bool(a == b))


payments = st.fixed_dictionaries({
    "id": st.text(max_size=20), "cents": st.integers(min_value=-(2**63), max_value=2**63 - 1),
    "memo": st.none() | st.text(max_size=10), "tags": st.lists(st.text(max_size=5), max_size=4)})


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=payments)
def test_any_avro_value_encodes_to_confluents_bytes(
        registry: SchemaRegistryClient, confluent: ConfluentClient, value: dict[str, Any]) -> None:
    topic = "avro-compat-property"  # one subject for every example: one registration
    ours = AvroSerde(registry, AVRO)
    theirs = AvroSerializer(confluent, ours.schema.schema_str)
    _both_ways(ours, theirs, AvroDeserializer(confluent), topic, [value],
               lambda a, b: bool(a == b))


def test_json_schema_bytes_equal_confluents_and_decode_both_ways(
        registry: SchemaRegistryClient, confluent: ConfluentClient,
        fresh_topic: Callable[[str], str]) -> None:
    topic = fresh_topic("json-compat")
    text = json.dumps(JSON_SCHEMA)
    ours = JsonSchemaSerde(registry, text)
    values = [{k: v for k, v in value.items() if k != "memo"} for value in VALUES]
    _both_ways(ours, JSONSerializer(text, confluent), JSONDeserializer(text), topic,
               values, lambda a, b: bool(a == b))


@pytest.mark.parametrize("message", [
    Order(id="o1", amount=4.25, lines=[OrderLine(sku="s", quantity=3)]),
    Header(source="pos-7"),
    OrderLine(sku="nested", quantity=-1),
    Payment(id="pay", amount=Money(currency="EUR", units=-5)),
], ids=["index-1", "index-0", "nested-1-0", "references"])
def test_protobuf_bytes_equal_confluents_and_decode_both_ways(
        registry: SchemaRegistryClient, confluent: ConfluentClient,
        fresh_topic: Callable[[str], str], message: Any) -> None:
    topic = fresh_topic("proto-compat")
    cls = type(message)
    ours = ProtobufSerde(registry, cls)
    theirs = ProtobufSerializer(cls, confluent, {"use.deprecated.format": False})
    their_de = ProtobufDeserializer(cls, {"use.deprecated.format": False})
    _both_ways(ours, theirs, their_de, topic, [message], lambda a, b: bool(a == b))
