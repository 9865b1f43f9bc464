"""The registry serdes against a real Apicurio Registry: registration, caching, subject
strategies, auto-register/use-latest, compatibility errors, and each format's round trip."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from protos import Money, Order, OrderLine, Payment
from pydantic import BaseModel

from aiostreams.errors import DeserializationError, SerializationError
from aiostreams.schema_registry import (
    AvroSerde,
    IncompatibleSchemaError,
    JsonSchemaSerde,
    ProtobufSerde,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    record_name,
    topic_record_name,
)

pytestmark = pytest.mark.registry

ORDER_V1: dict[str, Any] = {
    "type": "record", "name": "Order", "namespace": "com.acme",
    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}]}


def _with_field(schema: dict[str, Any], field: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "fields": [*schema["fields"], field]}


class Shipment(BaseModel):
    id: str
    weight: float
    note: str | None = None
    tags: list[str] = []


async def test_first_produce_registers_under_topic_subject_and_later_ones_ask_nothing(
        registry: SchemaRegistryClient, fresh_topic: Callable[[str], str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    topic = fresh_topic("orders")
    serde = AvroSerde(registry, ORDER_V1)
    data = serde.serialize(topic, {"id": "o1", "amount": 2.5})
    assert data is not None
    latest = await registry.latest(f"{topic}-value")
    assert int.from_bytes(data[1:5], "big") == latest.schema_id
    assert json.loads(latest.schema.schema_str)["name"] == "Order"

    requests: list[str] = []
    original = registry._request

    async def counting(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        requests.append(f"{method} {path}")
        return await original(method, path, *args, **kwargs)
    monkeypatch.setattr(registry, "_request", counting)
    for i in range(20):
        assert serde.deserialize(topic, serde.serialize(topic, {"id": f"o{i}",
                                                                "amount": float(i)})) == {
            "id": f"o{i}", "amount": float(i)}
    assert requests == []


async def test_record_and_topic_record_strategies_name_the_subject_after_the_record(
        registry: SchemaRegistryClient, fresh_topic: Callable[[str], str]) -> None:
    topic = fresh_topic("mixed")
    schema = {**ORDER_V1, "name": f"Order{abs(hash(topic))}"}
    full = f"com.acme.{schema['name']}"
    AvroSerde(registry, schema, subject_name_strategy=record_name).serialize(
        topic, {"id": "a", "amount": 1.0})
    AvroSerde(registry, schema, is_key=True,
              subject_name_strategy=topic_record_name).serialize(
        topic, {"id": "a", "amount": 1.0})
    assert (await registry.latest(full)).subject == full
    assert (await registry.latest(f"{topic}-{full}")).subject == f"{topic}-{full}"


async def test_without_auto_register_an_unregistered_schema_is_refused_with_the_subject(
        registry: SchemaRegistryClient, fresh_topic: Callable[[str], str]) -> None:
    topic = fresh_topic("strict")
    serde = AvroSerde(registry, ORDER_V1, auto_register=False)
    with pytest.raises(SerializationError, match=f"{topic}-value.*auto_register"):
        serde.serialize(topic, {"id": "x", "amount": 1.0})
    await registry.register(f"{topic}-value", serde.schema)
    assert serde.serialize(topic, {"id": "x", "amount": 1.0}) is not None


async def test_use_latest_writes_with_the_latest_version_and_reader_resolves_it(
        registry: SchemaRegistryClient, fresh_topic: Callable[[str], str]) -> None:
    topic = fresh_topic("latest")
    v2 = _with_field(ORDER_V1, {"name": "currency", "type": "string", "default": "EUR"})
    await registry.register(f"{topic}-value", Schema(json.dumps(ORDER_V1)))
    v2_id = await registry.register(f"{topic}-value", Schema(json.dumps(v2)))
    writer = AvroSerde(registry, v2, auto_register=False, use_latest=True)
    data = writer.serialize(topic, {"id": "o", "amount": 1.0, "currency": "USD"})
    assert data is not None and int.from_bytes(data[1:5], "big") == v2_id
    old_reader = AvroSerde(registry, ORDER_V1, auto_register=False)
    assert old_reader.deserialize(topic, data) == {"id": "o", "amount": 1.0}


async def test_incompatible_change_names_subject_field_and_registry_message(
        registry: SchemaRegistryClient, fresh_topic: Callable[[str], str]) -> None:
    topic = fresh_topic("compat")
    subject = f"{topic}-value"
    AvroSerde(registry, ORDER_V1).serialize(topic, {"id": "a", "amount": 1.0})
    await registry.set_compatibility("BACKWARD", subject)
    breaking = _with_field(ORDER_V1, {"name": "customer", "type": "string"})  # no default
    with pytest.raises(SerializationError) as caught:
        AvroSerde(registry, breaking).serialize(topic, {"id": "a", "amount": 1.0,
                                                        "customer": "c"})
    cause = caught.value.__cause__
    assert isinstance(cause, IncompatibleSchemaError)
    assert cause.subject == subject
    assert cause.fields == ("customer",)
    assert cause.status == 409
    assert "ncompatible" in cause.registry_message
    assert subject in str(caught.value) and "customer" in str(caught.value)
    fine = _with_field(ORDER_V1, {"name": "customer", "type": "string", "default": ""})
    assert AvroSerde(registry, fine).serialize(topic, {"id": "a", "amount": 1.0,
                                                      "customer": "c"}) is not None


async def test_avro_from_a_pydantic_model_round_trips_to_the_model(
        registry: SchemaRegistryClient, fresh_topic: Callable[[str], str]) -> None:
    topic = fresh_topic("shipments")
    serde = AvroSerde(registry, Shipment)
    value = Shipment(id="s1", weight=3.5, tags=["fragile"])
    assert serde.deserialize(topic, serde.serialize(topic, value)) == value
    assert serde.serialize(topic, None) is None and serde.deserialize(topic, None) is None


async def test_json_schema_validates_on_write_and_round_trips_models(
        registry: SchemaRegistryClient, fresh_topic: Callable[[str], str]) -> None:
    topic = fresh_topic("json")
    serde = JsonSchemaSerde(registry, Shipment)
    value = Shipment(id="s2", weight=1.0, note="n")
    assert serde.deserialize(topic, serde.serialize(topic, value)) == value
    plain = JsonSchemaSerde(registry, Shipment.model_json_schema())
    with pytest.raises(SerializationError, match="weight"):
        plain.serialize(topic, {"id": "s3", "weight": "heavy"})


async def test_protobuf_nested_message_round_trips_with_its_message_indexes(
        registry: SchemaRegistryClient, fresh_topic: Callable[[str], str]) -> None:
    topic = fresh_topic("proto")
    orders = ProtobufSerde(registry, Order)
    order = Order(id="p1", amount=9.5, lines=[OrderLine(sku="k", quantity=2)])
    data = orders.serialize(topic, order)
    assert data is not None and data[5:7] == b"\x02\x02"  # one index: 1 (zig-zag 2)
    assert orders.deserialize(topic, data) == order
    lines = ProtobufSerde(registry, OrderLine, subject_name_strategy=topic_record_name)
    line_bytes = lines.serialize(topic, OrderLine(sku="z", quantity=1))
    assert line_bytes is not None and line_bytes[5:8] == b"\x04\x02\x00"  # [1, 0]
    with pytest.raises(DeserializationError, match=r"aiostreams\.test\.Order\.Line"):
        orders.deserialize(topic, line_bytes)


async def test_bytes_from_another_format_or_no_registry_fail_as_deserialization_errors(
        registry: SchemaRegistryClient, fresh_topic: Callable[[str], str]) -> None:
    topic = fresh_topic("foreign")
    json_bytes = JsonSchemaSerde(registry, Shipment).serialize(
        topic, Shipment(id="a", weight=1.0))
    with pytest.raises(DeserializationError, match="JSON schema, not Avro"):
        AvroSerde(registry, Shipment).deserialize(topic, json_bytes)
    with pytest.raises(DeserializationError, match="magic byte"):
        AvroSerde(registry, Shipment).deserialize(topic, b"\x07plain")
    with pytest.raises(DeserializationError, match="HTTP 404"):
        AvroSerde(registry, Shipment).deserialize(topic, b"\x00\x7f\xff\xff\xf0\x00")


async def test_incompatible_json_schema_change_names_the_property(
        registry: SchemaRegistryClient, fresh_topic: Callable[[str], str]) -> None:
    topic = fresh_topic("json-compat")
    v1 = {"type": "object", "title": "Reading", "additionalProperties": False,
          "properties": {"sensor": {"type": "string"}, "celsius": {"type": "number"}}}
    JsonSchemaSerde(registry, v1).serialize(topic, {"sensor": "s", "celsius": 1.5})
    await registry.set_compatibility("BACKWARD", f"{topic}-value")
    v2 = {**v1, "properties": {**v1["properties"], "celsius": {"type": "string"}}}
    with pytest.raises(SerializationError) as caught:
        JsonSchemaSerde(registry, v2).serialize(topic, {"sensor": "s", "celsius": "warm"})
    cause = caught.value.__cause__
    assert isinstance(cause, IncompatibleSchemaError)
    assert (cause.subject, cause.fields) == (f"{topic}-value", ("celsius",))


async def test_protobuf_imports_are_registered_as_references_under_their_file_names(
        registry: SchemaRegistryClient, fresh_topic: Callable[[str], str]) -> None:
    topic = fresh_topic("payments")
    serde = ProtobufSerde(registry, Payment)
    payment = Payment(id="p", amount=Money(currency="EUR", units=12))
    payment.at.FromSeconds(1_700_000_000)
    assert serde.deserialize(topic, serde.serialize(topic, payment)) == payment
    latest = await registry.latest(f"{topic}-value")
    money = await registry.latest("aiostreams/test/money.proto")
    assert latest.schema.references == (
        SchemaReference("aiostreams/test/money.proto", "aiostreams/test/money.proto",
                        money.version),)


async def test_prepare_registers_before_the_first_record_so_writing_asks_nothing(
        registry: SchemaRegistryClient, fresh_topic: Callable[[str], str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    topic = fresh_topic("prepared")
    serde = AvroSerde(registry, ORDER_V1)
    schema_id = await serde.prepare(topic)
    assert (await registry.latest(f"{topic}-value")).schema_id == schema_id

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no request expected after prepare()")
    monkeypatch.setattr(registry, "_request", refuse)
    data = serde.serialize(topic, {"id": "a", "amount": 1.0})
    assert data is not None and int.from_bytes(data[1:5], "big") == schema_id
