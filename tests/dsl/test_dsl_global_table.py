"""Global tables: bootstrapped from every partition before any record is processed, kept
up to date in the background by their own consumer, rebuilt from the source topic on every
start (no changelog) in memory, or - persistent - kept in SQLite with an offsets checkpoint
so that a restart reads only the records after it (and reads everything again, wiping the
local copy, when the checkpoint is ahead of the topic, corrupt or missing); joined through
a key selector; a selector returning the wrong type sends the record to the dead-letter
path; bad use is refused at build time."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from dslkit import In, broker_of, make_app, produce, run_app

from aiostreams import App, ConfigError, TopologyError
from aiostreams.engine.global_updater import global_table_updater
from aiostreams.state.global_store import GlobalStore
from aiostreams.testing.driver import TopologyTestDriver
from aiostreams.transport.memory import MemoryTransport
from aiostreams.transport.memory_broker import MemoryBroker
from aiostreams.types import OutgoingRecord


def price_of(order: int, price: int | None) -> int:
    return order * 1000 + (-1 if price is None else price)


def shop_app(app: App, left: bool = False) -> tuple[Any, Any, Any]:
    prices = app.topic("prices", key=str, value=int, partitions=3)
    orders = app.topic("orders", key=str, value=int, partitions=2)
    out = app.topic("priced", key=str, value=int, partitions=2)
    table = app.global_table(prices)
    stream = app.stream(orders)
    join = stream.left_join_global if left else stream.join_global
    join(table, lambda order_id, product: f"p{product}", price_of).to(out)
    return prices, orders, out


PRICES = [In(f"p{i}", 10 * i, float(i)) for i in range(6)]
ORDERS = [In(f"o{i}", i % 7, 100.0 + i) for i in range(14)]


async def test_every_partition_is_bootstrapped_before_the_first_record_is_processed() -> None:
    app = make_app(max_in_flight=16)
    prices, orders, out = shop_app(app)
    produce(app, prices, PRICES)
    produce(app, orders, ORDERS)
    result = await run_app(app, [out])
    # Products 0-5 have prices on three partitions; product 6 has none (inner join).
    expected = {(f"o{i}", price_of(i % 7, 10 * (i % 7))) for i in range(14) if i % 7 < 6}
    assert set(result.pairs("priced")) == expected


async def test_the_table_is_rebuilt_from_its_topic_on_every_start() -> None:
    name, broker = "rebuild", "memory://global-rebuild"
    first = App(name, broker=broker, commit_interval_ms=5.0, poll_timeout=0.01)
    prices, orders, out = shop_app(first, left=True)
    produce(first, prices, PRICES[:3])
    produce(first, orders, ORDERS[:3])
    await run_app(first, [out])
    second = App(name, broker=broker, commit_interval_ms=5.0, poll_timeout=0.01)
    prices, orders, out = shop_app(second, left=True)
    produce(second, prices, [In("p1", None, 50.0), *PRICES[3:]])  # a delete, new rows
    produce(second, orders, ORDERS[:5])
    result = await run_app(second, [out])
    pairs = result.pairs("priced")
    # Orders 0-2 ran before the restart; 0-4 are produced again and run on the rebuilt
    # table: p1 deleted, p0 and p2 from the first run's data, p3 and p4 new.
    assert ("o1", price_of(1, None)) in pairs and ("o3", price_of(3, 30)) in pairs
    assert ("o0", price_of(0, 0)) in pairs and ("o2", price_of(2, 20)) in pairs


async def test_the_updater_keeps_applying_records_after_the_bootstrap() -> None:
    broker = MemoryBroker()
    broker.create_topic("prices", 2)
    app = make_app()
    store = GlobalStore(app.topic("prices", key=str, value=int, partitions=2))
    broker.append([(OutgoingRecord("prices", b"p1", (10).to_bytes(8, "big"), 1.0), 0)])
    async with global_table_updater(MemoryTransport(broker), store, poll_timeout=0.01):
        assert await store.get("p1", "test") == 10  # bootstrapped before entering
        broker.append([(OutgoingRecord("prices", b"p2", (20).to_bytes(8, "big"), 2.0), 1),
                       (OutgoingRecord("prices", b"p1", None, 3.0), 0)])
        while store.offsets.get(0, 0) < 2 or store.offsets.get(1, 0) < 1:
            store.updated.clear()
            await asyncio.wait_for(store.updated.wait(), 5.0)
        assert await store.get("p2", "test") == 20
        assert await store.get("p1", "test") is None


async def test_a_key_selector_of_the_wrong_type_dead_letters_the_record() -> None:
    app = make_app(dead_letter_topic="dead-letters")
    prices = app.topic("prices", key=str, value=int)
    orders = app.topic("orders", key=str, value=int)
    out = app.topic("priced", key=str, value=int)
    table = app.global_table(prices)
    app.stream(orders).join_global(
        table, lambda k, v: v if v == 2 else f"p{v}", price_of, name="price-join").to(out)
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input("prices", "p1", 10)
        for key, product in [("o1", 1), ("o2", 2), ("o3", 1)]:
            driver.pipe_input("orders", key, product)
        await driver.process_all()
        assert [(r.key, r.value) for r in driver.read_output("priced")] == \
            [("o1", 1010), ("o3", 1010)]
        dead = driver.read_raw_output("dead-letters")
        assert len(dead) == 1 and dead[0].key == b"o2"
        reason = dict(dead[0].headers)
        assert any(b"price-join" in v and b"key selector" in v for v in reason.values()
                   if isinstance(v, bytes))


def test_joining_a_table_as_a_global_table_is_refused_naming_the_stream() -> None:
    app = make_app()
    orders = app.stream(app.topic("orders", key=str, value=int), name="orders-in")
    table = app.table(app.topic("prices", key=str, value=int))
    with pytest.raises(TopologyError, match=r"orders-in.*needs a GlobalTable.*got Table"):
        orders.join_global(table, lambda k, v: k, price_of)  # type: ignore[arg-type]


def test_a_topic_is_a_global_table_once() -> None:
    app = make_app()
    prices = app.topic("prices", key=str, value=int)
    app.global_table(prices)
    with pytest.raises(TopologyError, match="already a global table"):
        app.global_table(prices)


async def test_a_missing_topic_fails_the_start_with_what_to_do() -> None:
    app = make_app()
    app.global_table("prices")
    app.stream(app.topic("orders", key=str, value=int)).to(app.topic("o2"))
    broker_of(app).create_topic("orders", 1)
    with pytest.raises(TopologyError, match="'prices': the topic does not exist; create it"):
        await app.start()


def long(v: int) -> bytes:
    return v.to_bytes(8, "big", signed=True)


def price_records(start: int, stop: int, partitions: int = 2) -> list[Any]:
    return [(OutgoingRecord("prices", f"p{i}".encode(), long(10 * i), float(i)),
             i % partitions) for i in range(start, stop)]


async def run_updater(broker: MemoryBroker, state: Path,
                      partitions: int = 2) -> tuple[GlobalStore, dict[str, int | None]]:
    """A persistent global store of ``prices`` bootstrapped (then saved and closed), and
    the values of p0-p11 it served."""
    app = make_app()
    store = GlobalStore(app.topic("prices", key=str, value=int, partitions=partitions),
                        state)
    async with global_table_updater(MemoryTransport(broker), store, poll_timeout=0.01):
        assert store.local is not None  # reads go to the open SQLite copy
        values = {f"p{i}": await store.get(f"p{i}", "test") for i in range(12)}
    return store, values


async def test_a_persistent_table_restarts_from_its_checkpoint_reading_only_new_records(
        tmp_path: Path) -> None:
    broker = MemoryBroker()
    broker.create_topic("prices", 2)
    broker.append(price_records(0, 8))
    first, _ = await run_updater(broker, tmp_path)
    assert first.fetched == 8
    broker.append([*price_records(8, 11),
                   (OutgoingRecord("prices", b"p2", None, 20.0), 0)])  # a delete
    second, values = await run_updater(broker, tmp_path)
    assert second.fetched == 4  # only what came after the checkpoint
    assert values == {**{f"p{i}": 10 * i for i in range(11)}, "p2": None, "p11": None}


async def test_a_checkpoint_ahead_of_the_topic_wipes_and_reloads_saying_why(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    old = MemoryBroker()
    old.create_topic("prices", 2)
    old.append(price_records(0, 8))
    await run_updater(old, tmp_path)
    recreated = MemoryBroker()  # the topic deleted and created again, with fewer records
    recreated.create_topic("prices", 2)
    recreated.append(price_records(0, 2))
    with caplog.at_level(logging.WARNING, "aiostreams.global_table"):
        store, values = await run_updater(recreated, tmp_path)
    assert "ahead of its end" in caplog.text and "recreated" in caplog.text
    assert store.fetched == 2
    assert values == {f"p{i}": (10 * i if i < 2 else None) for i in range(12)}


async def test_a_corrupt_checkpoint_wipes_and_reloads_saying_why(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    broker = MemoryBroker()
    broker.create_topic("prices", 2)
    broker.append(price_records(0, 6))
    await run_updater(broker, tmp_path)
    (tmp_path / "global-prices" / ".checkpoint").write_bytes(b"{not json")
    with caplog.at_level(logging.WARNING, "aiostreams.global_table"):
        store, values = await run_updater(broker, tmp_path)
    assert "no usable checkpoint" in caplog.text
    assert store.fetched == 6
    assert values == {f"p{i}": (10 * i if i < 6 else None) for i in range(12)}


async def test_a_checkpoint_of_another_partition_count_wipes_and_reloads(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    broker = MemoryBroker()
    broker.create_topic("prices", 2)
    broker.append(price_records(0, 6))
    await run_updater(broker, tmp_path)
    wider = MemoryBroker()
    wider.create_topic("prices", 3)
    wider.append(price_records(0, 6, partitions=3))
    with caplog.at_level(logging.WARNING, "aiostreams.global_table"):
        store, _ = await run_updater(wider, tmp_path, partitions=3)
    assert "partitions [0, 1], the topic [0, 1, 2]" in caplog.text
    assert store.fetched == 6


def test_a_persistent_global_table_needs_a_state_dir() -> None:
    app = make_app()
    with pytest.raises(ConfigError, match=r"'prices' is persistent.*state_dir"):
        app.global_table(app.topic("prices", key=str, value=int), persistent=True)
