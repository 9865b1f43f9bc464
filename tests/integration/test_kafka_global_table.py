"""A global table on a real broker: its own consumer (no group) reads every partition of
the topic to the end before the app processes its first record, so every order joins the
price that was there before the app started; a price produced while the app runs reaches
the table through the background updater. A persistent global table (the app has a
``state_dir``) restarts from its checkpoint: it fetches only the records produced since,
and the joins still see every price."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
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
            while await table.store.get("p9", "test") is None:
                table.store.updated.clear()
                await table.store.updated.wait()
        await produce(transport, orders, [(b"late", long(9))])
        await app.wait_until_caught_up(timeout=120)
        got = await read_exactly(transport, out, 31)
    assert [r.value for r in got if r.key == b"late"] == [long(9090)]


def priced_app(group: str, bootstrap: str, state: Path, prices: str, orders: str,
               out: str) -> tuple[ais.App, Any]:
    app = ais.App(group, broker=f"kafka://{bootstrap}", commit_interval_ms=100,
                  state_dir=state)
    table = app.global_table(app.topic(prices, key=str, value=int))
    (app.stream(app.topic(orders, key=str, value=int))
     .join_global(table, lambda order, product: f"p{product}",
                  lambda product, price: product * 1000 + price)
     .to(app.topic(out, key=str, value=int, partitions=2)))
    return app, table


async def test_a_persistent_global_table_restarts_from_its_checkpoint(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    prices, orders, out, group = (topic_name("prices"), topic_name("orders"),
                                  topic_name("priced"), topic_name("app"))
    await create_topic(transport, prices, 3)
    await create_topic(transport, orders, 2)
    await produce(transport, prices, [(f"p{i}".encode(), long(10 * i)) for i in range(40)])
    await produce(transport, orders, [(f"o{i}".encode(), long(i % 40)) for i in range(40)])
    state = tmp_path / "state"
    app, table = priced_app(group, kafka_bootstrap, state, prices, orders, out)
    async with app:
        await app.wait_until_caught_up(timeout=120)
        await read_exactly(transport, out, 40)
    assert table.store.fetched == 40
    # While the app is down: two new prices, one changed, and orders for old and new ones.
    await produce(transport, prices, [(b"p40", long(400)), (b"p41", long(410)),
                                      (b"p3", long(33))])
    await produce(transport, orders, [(f"n{i}".encode(), long(i)) for i in (0, 3, 39, 40, 41)])
    app, table = priced_app(group, kafka_bootstrap, state, prices, orders, out)
    async with app:
        await app.wait_until_caught_up(timeout=120)
        got = await read_exactly(transport, out, 45)
    assert table.store.fetched == 3  # the records after the checkpoint, not the topic
    joined = {r.key: struct.unpack(">q", r.value)[0] for r in got
              if r.key is not None and r.key.startswith(b"n") and r.value is not None}
    assert joined == {b"n0": 0, b"n3": 3033, b"n39": 39390, b"n40": 40400,
                      b"n41": 41410}
