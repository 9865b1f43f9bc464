"""A global table on a real broker: its own consumer (no group) reads every partition of
the topic to the end before the app processes its first record, so every order joins the
price that was there before the app started; a price produced while the app runs reaches
the table through the background updater."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from appkit import create_topic, produce, read_exactly

import aiostreams as ais
from aiostreams.transport.kafka import KafkaTransport

pytestmark = pytest.mark.kafka


def long(v: int) -> bytes:
    return struct.pack(">q", v)


async def test_a_global_table_is_bootstrapped_from_every_partition_before_processing(
        kafka_bootstrap: str, topic_name: Any) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    prices, orders, out, group = (topic_name("prices"), topic_name("orders"),
                                  topic_name("priced"), topic_name("app"))
    await create_topic(transport, prices, 3)
    await create_topic(transport, orders, 2)
    await produce(transport, prices, [(f"p{i}".encode(), long(10 * i)) for i in range(9)])
    await produce(transport, orders, [(f"o{i}".encode(), long(i % 9)) for i in range(30)])
    app = ais.App(group, broker=f"kafka://{kafka_bootstrap}", commit_interval_ms=100)
    table = app.global_table(app.topic(prices, key=str, value=int))
    (app.stream(app.topic(orders, key=str, value=int))
     .join_global(table, lambda order, product: f"p{product}",
                  lambda product, price: product * 1000 + price)
     .to(app.topic(out, key=str, value=int, partitions=2)))
    async with app:
        await app.wait_until_caught_up(timeout=120)
        got = await read_exactly(transport, out, 30)
        assert sorted(struct.unpack(">q", r.value)[0] for r in got if r.value) == \
            sorted((i % 9) * 1000 + 10 * (i % 9) for i in range(30))
        await produce(transport, prices, [(b"p9", long(90))])
        async with asyncio.timeout(60):
            while table.store.get("p9", "test") is None:
                table.store.updated.clear()
                await table.store.updated.wait()
        await produce(transport, orders, [(b"late", long(9))])
        await app.wait_until_caught_up(timeout=120)
        got = await read_exactly(transport, out, 31)
    assert [r.value for r in got if r.key == b"late"] == [long(9090)]
