"""Registry serdes as an app's topic serdes: records decode on the way in, encode on the way
out, and bytes that are not in the wire format take the dead-letter path, not a crash."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import BaseModel

from aiostreams import App
from aiostreams.schema_registry import AvroSerde, JsonSchemaSerde, SchemaRegistryClient
from aiostreams.testing import TopologyTestDriver

pytestmark = pytest.mark.registry


class Order(BaseModel):
    id: str
    amount: float


class Invoice(BaseModel):
    order_id: str
    total_cents: int


async def test_app_reads_avro_writes_json_schema_and_dead_letters_foreign_bytes(
        registry: SchemaRegistryClient, fresh_topic: Callable[[str], str]) -> None:
    source, sink, dlq = fresh_topic("orders"), fresh_topic("invoices"), fresh_topic("dlq")
    orders_serde = AvroSerde(registry, Order)
    invoices_serde = JsonSchemaSerde(registry, Invoice)
    app = App("registry-app", dead_letter_topic=dlq)
    orders = app.topic(source, key=str, value=orders_serde)
    invoices = app.topic(sink, key=str, value=invoices_serde)
    app.stream(orders).map_values(
        lambda order: Invoice(order_id=order.id, total_cents=round(order.amount * 100))
    ).to(invoices)

    async with TopologyTestDriver(app) as driver:
        driver.pipe_input(source, "k1", Order(id="o1", amount=2.5))
        driver.pipe_raw_input(source, b"k2", b'{"id": "o2", "amount": 1}')  # plain JSON
        driver.pipe_input(source, "k3", Order(id="o3", amount=0.1))
        await driver.process_all()
        out = driver.read_output(sink)
        raw = driver.read_raw_output(sink)
        dead = driver.read_raw_output(dlq)

    assert [(r.key, r.value) for r in out] == [
        ("k1", Invoice(order_id="o1", total_cents=250)),
        ("k3", Invoice(order_id="o3", total_cents=10))]
    invoice_id = (await registry.latest(f"{sink}-value")).schema_id
    assert all(r.value is not None and r.value[0] == 0
               and int.from_bytes(r.value[1:5], "big") == invoice_id for r in raw)
    assert [r.value for r in dead] == [b'{"id": "o2", "amount": 1}']
