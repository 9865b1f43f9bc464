"""Foreign-key table-table joins end to end on the memory broker, with the tables on
different partition counts: the wire formats (pinned to bytes Kafka Streams 3.9.1 wrote),
the final join for any completion order and ``max_in_flight``, stale responses dropped,
build-time errors naming the node, and state that continues exactly after the local state
is deleted."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from dslkit import In, make_app, produce, random_yields, run_app
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiostreams import App, TopologyError
from aiostreams.processors.fk_join_wire import (
    CombinedKey,
    CombinedKeySerde,
    Instruction,
    Response,
    ResponseSerde,
    Subscription,
    SubscriptionSerde,
    hash128,
)
from aiostreams.serde import LongSerde, StrSerde
from aiostreams.testing.driver import TopologyTestDriver


def long_bytes(v: int) -> bytes:
    return struct.pack(">q", v)


# -- wire formats ---------------------------------------------------------------------------


def test_subscriptions_are_written_as_kafka_streams_writes_them() -> None:
    # Captured from Kafka Streams 3.9.1 (TopologyTestDriver): left rows a=5 then a=7 (Long
    # values) subscribing to "f0", on the subscription-registration topic.
    serde = SubscriptionSerde(StrSerde())
    for value, wire in ((5, "01038a2cd2d0578b7db78637fd979b7147ba6100000000"),
                        (7, "01031b927642116fab4a1e2a0d4b05ff6bf46100000000")):
        sub = Subscription(hash128(long_bytes(value)),
                           Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, "a", 0)
        assert serde.serialize("t", sub) == bytes.fromhex(wire)
        assert serde.deserialize("t", bytes.fromhex(wire)) == sub


# Kafka Streams 3.9.1's Murmur3.hash128 of bytes (i * 37 + 200) & 0xff, i < n: every tail
# length class and 0-4 full 16-byte blocks.
KAFKA_HASHES = [
    (0, -7122613646888064702, -8341524471658347240),
    (1, -4615602001469447222, -5947292478380757321),
    (7, -2107356240070746995, 8712494903821390563),
    (8, 6014274030055629952, 3156945422024201036),
    (9, -5216073135972215217, 8252163989001585864),
    (15, -8844713386880038744, 1384717867784962967),
    (16, 4259464231871220401, 71836089553343856),
    (17, 1468295286396577991, 2369895096289180639),
    (31, 1137369972227847586, -2626887154935382824),
    (32, 2819191440991962733, 7634896192672878728),
    (33, -4030251065457743037, -2429668008310786738),
    (70, -8823672859531017196, -6429801354751258673),
]


@pytest.mark.parametrize(("n", "h1", "h2"), KAFKA_HASHES)
def test_the_value_hash_is_kafka_streams_murmur3(n: int, h1: int, h2: int) -> None:
    assert hash128(bytes((i * 37 + 200) & 0xFF for i in range(n))) == (h1, h2)


@given(hashed=st.one_of(st.none(), st.tuples(st.integers(-2**63, 2**63 - 1),
                                              st.integers(-2**63, 2**63 - 1))),
       instruction=st.sampled_from(list(Instruction)), key=st.text(max_size=5),
       partition=st.integers(0, 2**31 - 1), foreign=st.one_of(st.none(), st.integers(
           -2**63, 2**63 - 1)))
def test_wire_formats_round_trip(hashed: tuple[int, int] | None, instruction: Instruction,
                                 key: str, partition: int, foreign: int | None) -> None:
    sub = Subscription(hashed, instruction, key, partition)
    subs = SubscriptionSerde(StrSerde())
    assert subs.deserialize("t", subs.serialize("t", sub)) == sub
    responses = ResponseSerde(LongSerde())
    response = responses.deserialize("t", responses.serialize("t", Response(hashed, foreign)))
    assert response == Response(hashed, foreign)
    keys = CombinedKeySerde(StrSerde(), StrSerde())
    combined = CombinedKey(key, "pk")
    raw = keys.serialize("t", combined)
    assert raw is not None and keys.deserialize("t", raw) == combined
    low = keys.serialize("t", CombinedKey(key, None, "low"))
    high = keys.serialize("t", CombinedKey(key, None, "high"))
    assert low is not None and high is not None and low <= raw < high


# -- behaviour ------------------------------------------------------------------------------


def fk_of(order: int) -> str | None:
    return None if order < 0 else f"c{order % 4}"


def joined(order: int, customer: int | None) -> int:
    return order * 1000 + (-1 if customer is None else customer)


def join_app(left: bool, *, seed: int | None = None, **settings: Any) -> tuple[App, Any, ...]:
    app = make_app(**settings)
    orders = app.topic("orders", key=str, value=int, partitions=2)
    customers = app.topic("customers", key=str, value=int, partitions=3)
    out = app.topic("joined", key=str, value=int, partitions=2)
    order_stream = app.stream(orders)
    customer_stream = app.stream(customers)
    if seed is not None:
        order_stream = order_stream.map_values_async(random_yields(seed))
        customer_stream = customer_stream.map_values_async(random_yields(seed + 1))
    o = order_stream.to_table()
    c = customer_stream.to_table()
    method = o.left_join_on_foreign_key if left else o.join_on_foreign_key
    method(c, fk_of, joined, materialized="joined-store", value_serde=int) \
        .to_stream().to(out)
    return app, orders, customers, out


def expected_join(orders: list[In], customers: list[In], left: bool) -> dict[str, int]:
    """The join of the final tables (what the result converges to)."""
    o: dict[str, int] = {}
    c: dict[str, int] = {}
    for table, records in ((o, orders), (c, customers)):
        for r in records:
            if r.key is None:
                continue
            if r.value is None:
                table.pop(r.key, None)
            else:
                table[r.key] = r.value
    result = {}
    for key, order in o.items():
        fk = fk_of(order)
        customer = c.get(fk) if fk is not None else None
        if customer is not None or left:
            result[key] = joined(order, customer)
    return result


RECORDS = st.lists(st.tuples(st.sampled_from(["o1", "o2", "o3", "o4"]),
                             st.one_of(st.none(), st.integers(-2, 11))), max_size=14)
CUSTOMERS = st.lists(st.tuples(st.sampled_from(["c0", "c1", "c2", "c3"]),
                               st.one_of(st.none(), st.integers(0, 9))), max_size=10)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(order_rows=RECORDS, customer_rows=CUSTOMERS, left=st.booleans(),
       max_in_flight=st.sampled_from([1, 8, 64]), seed=st.integers(0, 2**16))
async def test_the_join_converges_to_the_join_of_the_final_tables(
        order_rows: list[tuple[str, int | None]], customer_rows: list[tuple[str, int | None]],
        left: bool, max_in_flight: int, seed: int) -> None:
    # All inputs at once, both sides updating and deleting concurrently, out-of-order
    # completion: responses that raced a later update are dropped by the hash check.
    orders_in = [In(k, v, float(i)) for i, (k, v) in enumerate(order_rows)]
    customers_in = [In(k, v, float(i)) for i, (k, v) in enumerate(customer_rows)]
    app, orders, customers, out = join_app(left, seed=seed, max_in_flight=max_in_flight)
    produce(app, orders, orders_in)
    produce(app, customers, customers_in)
    result = await run_app(app, [out])
    assert result.stores.get("joined-store", {}) == \
        expected_join(orders_in, customers_in, left)
    last: dict[str, int | None] = {}
    for key, value in result.pairs("joined"):
        last[key] = value
    assert {k: v for k, v in last.items() if v is not None} == \
        expected_join(orders_in, customers_in, left)


async def run_steps(left: bool, steps: list[tuple[str, str, int | None]],
                    ) -> list[tuple[str, int | None, float]]:
    """Each input processed to the end before the next (the driver); the join's output."""
    app, *_ = join_app(left)
    async with TopologyTestDriver(app) as driver:
        for i, (topic, key, value) in enumerate(steps):
            driver.pipe_input(topic, key, value, float(i))
            await driver.process_all()
        return [(r.key, r.value, r.timestamp) for r in driver.read_output("joined")]


async def test_a_row_moving_to_another_foreign_key_follows_it_without_an_interim_result(
        ) -> None:
    steps = [("customers", "c1", 10), ("customers", "c2", 20), ("orders", "o1", 1),
             ("orders", "o1", 2)]
    for left in (False, True):
        assert await run_steps(left, steps) == [("o1", 1010, 2.0), ("o1", 2020, 3.0)]


async def test_a_right_delete_deletes_inner_results_and_nulls_left_results() -> None:
    steps = [("customers", "c1", 10), ("orders", "o1", 1), ("customers", "c1", None)]
    assert await run_steps(False, steps) == [("o1", 1010, 1.0), ("o1", None, 2.0)]
    assert await run_steps(True, steps) == [("o1", 1010, 1.0), ("o1", 999, 2.0)]


async def test_a_left_delete_deletes_the_result_stamped_with_the_later_side() -> None:
    steps = [("orders", "o1", 1), ("customers", "c1", 10), ("orders", "o1", None)]
    assert await run_steps(False, steps) == [("o1", 1010, 1.0), ("o1", None, 2.0)]
    assert await run_steps(True, steps) == [("o1", 999, 0.0), ("o1", 1010, 1.0),
                                            ("o1", None, 2.0)]


# -- bad use --------------------------------------------------------------------------------


def test_joining_a_stream_on_a_foreign_key_is_refused_naming_the_table() -> None:
    app = make_app()
    orders = app.table(app.topic("orders", key=str, value=int), name="orders-table")
    customers = app.stream(app.topic("customers", key=str, value=int))
    with pytest.raises(TopologyError, match=r"orders-table.*must be a Table.*got Stream"):
        orders.join_on_foreign_key(customers, fk_of, joined)  # type: ignore[arg-type]


def test_an_async_foreign_key_function_is_refused_at_build_time() -> None:
    app = make_app()
    orders = app.table(app.topic("orders", key=str, value=int), name="orders-table")
    customers = app.table(app.topic("customers", key=str, value=int))

    async def lookup(order: int) -> str:
        return "c1"

    with pytest.raises(TopologyError, match=r"orders-table.*foreign_key must be a plain"):
        orders.left_join_on_foreign_key(customers, lookup, joined)


def test_the_internal_topics_carry_kafka_streams_names() -> None:
    app, *_ = join_app(True)
    names = {t.name for t in app.topology.topics.values() if t.internal}
    prefix = f"{app.name}-KTABLE-FK-JOIN-SUBSCRIPTION-"
    assert any(n.startswith(prefix + "REGISTRATION-") and n.endswith("-topic") for n in names)
    assert any(n.startswith(prefix + "RESPONSE-") and n.endswith("-topic") for n in names)


# -- restore --------------------------------------------------------------------------------


def restore_app(name: str, broker: str, state: Path) -> tuple[App, Any, Any, Any]:
    app = App(name, broker=broker, commit_interval_ms=5.0, poll_timeout=0.01,
              state_dir=state, max_in_flight=16)
    orders = app.topic("orders", key=str, value=int, partitions=2)
    customers = app.topic("customers", key=str, value=int, partitions=3)
    out = app.topic("joined", key=str, value=int, partitions=2)
    (app.table(orders, materialized="orders", persistent=True)
     .join_on_foreign_key(app.table(customers, materialized="customers", persistent=True),
                          fk_of, joined, materialized="joined-store", persistent=True,
                          value_serde=int)
     .to_stream().to(out))
    return app, orders, customers, out


ORDERS = [In(f"o{i}", i % 7, float(i)) for i in range(12)]
FIRST = [In(f"c{i % 4}", i, float(i)) for i in range(4)]
SECOND = [In("c1", 100, 20.0), In("c2", None, 21.0), In("c3", 300, 22.0)]


async def test_fk_join_continues_exactly_after_state_is_deleted(tmp_path: Path) -> None:
    # After the restart only the right side changes: its updates find their subscribers
    # only in the restored subscription store, and their responses pass the hash check
    # only against the restored left table.
    kept = tmp_path / "kept"
    whole, orders, customers, out = restore_app("kept", "memory://fk-kept", kept)
    produce(whole, orders, ORDERS)
    produce(whole, customers, FIRST)
    before = per_key(await run_app(whole, [out]))
    again, orders, customers, out = restore_app("kept", "memory://fk-kept", kept)
    produce(again, customers, SECOND)
    expected = await run_app(again, [out])
    state = tmp_path / "split"
    first, orders, customers, out = restore_app("split", "memory://fk-split", state)
    produce(first, orders, ORDERS)
    produce(first, customers, FIRST)
    assert per_key(await run_app(first, [out])) == before
    shutil.rmtree(state)
    second, orders, customers, out = restore_app("split", "memory://fk-split", state)
    produce(second, customers, SECOND)
    result = await run_app(second, [out])
    after = per_key(result)
    assert after == per_key(expected)
    assert any(len(after[k]) > len(before.get(k, [])) for k in after)
    assert result.stores["joined-store"] == expected.stores["joined-store"]


def per_key(run: Any) -> dict[str, list[int | None]]:
    """Each key's results in order (one task writes a key's; tasks interleave)."""
    keyed: dict[str, list[int | None]] = {}
    for key, value in run.pairs("joined"):
        keyed.setdefault(key, []).append(value)
    return keyed
