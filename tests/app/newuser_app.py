"""A new user's app, written from the docs against the public API only (``import
aiostreams``): a pydantic model, an async enrichment over HTTP with a shared session held
as an app resource, and a table of totals per tier."""

from __future__ import annotations

import aiohttp
from pydantic import BaseModel

import aiostreams as ais


class Order(BaseModel):
    id: str
    customer_id: str
    amount: float


class EnrichedOrder(Order):
    tier: str


def build(broker: str, service_url: str) -> ais.App:
    app = ais.App("newuser", broker=broker, commit_interval_ms=50)
    orders = app.topic("orders", key=str, value=Order, partitions=2)
    enriched = app.topic("orders-enriched", key=str, value=EnrichedOrder, partitions=2)
    totals = app.topic("tier-totals", key=str, value=float, partitions=2)
    http = app.resource("http", aiohttp.ClientSession)

    async def enrich(order: Order) -> EnrichedOrder:
        async with http.value.get(f"{service_url}/customers/{order.customer_id}") as response:
            response.raise_for_status()
            profile = await response.json()
        return EnrichedOrder(**order.model_dump(), tier=profile["tier"])

    stream = app.stream(orders).map_values_async(enrich)
    stream.to(enriched)
    (stream.group_by(lambda _key, order: order.tier, key_serde=str, value_serde=EnrichedOrder)
     .aggregate(0.0, lambda _tier, order, total: round(total + order.amount, 2),
                materialized="tier-totals", value_serde=float)
     .to_stream().to(totals))
    return app
