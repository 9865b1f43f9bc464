"""Issue 32's foreign-key join on a real broker, as the issue saw it: customer ``c06 = A``,
order ``o1 -> c06|x`` joined to ``c06|x+A``; then, produced at once, ``o1 -> none|y`` (no
foreign key) and ``o1 -> c03|z`` (no such customer). The delete for ``none|y`` comes back
after ``o1`` changed again and is dropped as stale, and Kafka Streams' inner join answers
nothing for ``c03``, so it keeps ``c06|x+A``; aiostreams' join retracts it (see
``aiostreams/processors/fk_join.py``, "Convergence")."""

from __future__ import annotations

from typing import Any

import pytest
from appkit import create_topic, produce, read_exactly

import aiostreams as ais
from aiostreams.transport.kafka import KafkaTransport

pytestmark = pytest.mark.kafka


def foreign_key(order: str) -> str | None:
    customer = order.split("|")[0]
    return None if customer == "none" else customer


async def test_a_stale_foreign_key_join_result_is_retracted_on_a_broker(
        kafka_bootstrap: str, topic_name: Any) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    orders, customers, out, group = (topic_name("orders"), topic_name("customers"),
                                     topic_name("joined"), topic_name("app"))
    await create_topic(transport, orders, 2)
    await create_topic(transport, customers, 3)
    app = ais.App(group, broker=f"kafka://{kafka_bootstrap}", commit_interval_ms=100)
    (app.table(app.topic(orders, key=str, value=str, partitions=2))
     .join_on_foreign_key(app.table(app.topic(customers, key=str, value=str, partitions=3)),
                          foreign_key,
                          lambda order, customer: f"{order}+{customer}",
                          materialized="joined", value_serde=str)
     .to_stream().to(app.topic(out, key=str, value=str, partitions=2)))
    async with app:
        await produce(transport, customers, [(b"c06", b"A")])
        await app.wait_until_caught_up(timeout=120)
        await produce(transport, orders, [(b"o1", b"c06|x")])
        got = await read_exactly(transport, out, 1, timeout=60)
        assert [(r.key, r.value) for r in got] == [(b"o1", b"c06|x+A")]
        await produce(transport, orders, [(b"o1", b"none|y"), (b"o1", b"c03|z")])
        got = await read_exactly(transport, out, 2, timeout=60)
        assert [(r.key, r.value) for r in got] == [(b"o1", b"c06|x+A"), (b"o1", None)]
        await app.wait_until_caught_up(timeout=120)
        assert await app.store("joined").get("o1") is None
