"""Joins: stream-table, stream-stream (windowed) and table-table, end to end on the memory
broker, with out-of-order and late records."""

from __future__ import annotations

from typing import Any

import pytest
from dslkit import In, make_app, produce, run_app

from aiostreams import CoPartitioningError, TopologyError
from aiostreams.windows import JoinWindows

IN_FLIGHT_PAST_CLOSE = [1, 64]


# A task reading two topics picks the smallest head timestamp only while it has data of
# both; tests let it wait for the other topic (KIP-353 idling) so the order is by time.
IDLE = {"max_task_idle_ms": 100.0}


def orders_app(**settings: Any) -> tuple[Any, Any, Any, Any]:
    app = make_app(**IDLE, **settings)
    orders = app.topic("orders", key=str, value="json", partitions=2)
    customers = app.topic("customers", key=str, value=str, partitions=2)
    out = app.topic("enriched", key=str, value="json", partitions=2)
    return app, orders, customers, out


# -- stream-table -----------------------------------------------------------------------------


async def test_stream_table_join_enriches_with_the_current_table_value() -> None:
    app, orders, customers, out = orders_app(max_in_flight=64)
    table = app.table(customers, materialized="customers")
    app.stream(orders).join(table, lambda o, tier: [o, tier]).to(out)
    produce(app, customers, [In("c1", "gold", 1.0), In("c2", "silver", 1.0),
                             In("c1", "platinum", 5.0)])
    produce(app, orders, [In("c1", 10, 2.0), In("c2", 20, 3.0), In("c3", 30, 4.0),
                          In("c1", 40, 6.0)])
    result = await run_app(app, [out])
    assert sorted(result.pairs("enriched")) == [("c1", [10, "gold"]), ("c1", [40, "platinum"]),
                                                ("c2", [20, "silver"])]


async def test_stream_table_left_join_emits_records_without_a_match() -> None:
    app, orders, customers, out = orders_app()
    table = app.table(customers)
    app.stream(orders).left_join(table, lambda o, tier: [o, tier]).to(out)
    produce(app, customers, [In("c1", "gold", 1.0)])
    produce(app, orders, [In("c1", 10, 2.0), In("c3", 30, 3.0)])
    result = await run_app(app, [out])
    assert sorted(result.pairs("enriched")) == [("c1", [10, "gold"]), ("c3", [30, None])]


async def test_table_updates_do_not_emit_join_results() -> None:
    app, orders, customers, out = orders_app()
    app.stream(orders).join(app.table(customers), lambda o, t: [o, t]).to(out)
    produce(app, customers, [In("c1", "gold", 1.0), In("c1", "silver", 3.0)])
    produce(app, orders, [In("c1", 10, 2.0)])
    result = await run_app(app, [out])
    assert result.pairs("enriched") == [("c1", [10, "gold"])]


async def test_stream_table_join_of_a_rekeyed_stream_repartitions_it_first() -> None:
    app = make_app(**IDLE)
    clicks = app.topic("clicks", key=str, value=str, partitions=3)
    users = app.topic("users", key=str, value=str, partitions=3)
    out = app.topic("named", key=str, value="json", partitions=3)
    (app.stream(clicks).select_key(lambda _, user: user)
     .join(app.table(users), lambda user, name: name).to(out))
    repartition = [t for t in app.topology.topics.values() if t.internal]
    assert len(repartition) == 1 and repartition[0].partitions == 3  # sized like the table
    produce(app, users, [In(f"u{i}", f"name{i}", 0.0) for i in range(6)])
    produce(app, clicks, [In(f"page{i}", f"u{i % 6}", 1.0 + i) for i in range(12)])
    result = await run_app(app, [out])
    assert sorted(result.pairs("named")) == sorted(
        (f"u{i % 6}", f"name{i % 6}") for i in range(12))


def test_a_stream_and_its_joined_table_end_in_one_sub_topology() -> None:
    app, orders, customers, out = orders_app()
    app.stream(orders).join(app.table(customers), lambda o, t: o).to(out)
    subs = app.build()
    assert len(subs) == 1
    assert sorted(subs[0].source_topics) == ["customers", "orders"]


def test_joining_topics_with_different_partition_counts_is_refused_at_build_time() -> None:
    app = make_app()
    orders = app.topic("orders", key=str, value=str, partitions=4)
    customers = app.topic("customers", key=str, value=str, partitions=2)
    with pytest.raises(CoPartitioningError, match=r"'orders' has 4.*'customers' has 2"):
        app.stream(orders).join(app.table(customers), lambda o, t: o)


def test_joining_sides_with_different_key_serdes_is_refused() -> None:
    app = make_app()
    orders = app.topic("orders", key=str, value=str)
    customers = app.topic("customers", key=int, value=str)
    with pytest.raises(TopologyError, match="keys are encoded differently"):
        app.stream(orders).join(app.table(customers), lambda o, t: o)


def test_stream_table_outer_join_is_refused() -> None:
    app, orders, customers, _ = orders_app()
    with pytest.raises(TopologyError, match="'join' or 'left_join'"):
        app.stream(orders).outer_join(app.table(customers), lambda o, t: o,  # type: ignore
                                      JoinWindows(1.0))


# -- stream-stream ----------------------------------------------------------------------------


def impressions_app(max_in_flight: int = 16) -> tuple[Any, Any, Any, Any]:
    app = make_app(max_in_flight=max_in_flight, **IDLE)
    views = app.topic("views", key=str, value=str)
    clicks = app.topic("clicks", key=str, value=str)
    out = app.topic("joined", key=str, value="json")
    return app, views, clicks, out


@pytest.mark.parametrize("max_in_flight", IN_FLIGHT_PAST_CLOSE)
async def test_stream_stream_join_matches_records_within_the_window_both_ways(
        max_in_flight: int) -> None:
    app, views, clicks, out = impressions_app(max_in_flight)
    (app.stream(views).join(app.stream(clicks), lambda v, c: [v, c],
                            JoinWindows(before=5.0, after=10.0))
     .to(out))
    produce(app, views, [In("a", "v1", 10.0), In("b", "v2", 30.0), In("a", "v3", 50.0)])
    produce(app, clicks, [In("a", "c1", 12.0),   # 2s after v1: joins
                          In("a", "c2", 19.5),   # 9.5s after v1: joins (after=10)
                          In("b", "c3", 24.0),   # 6s before v2: outside before=5
                          In("a", "c4", 46.0)])  # 4s before v3: joins when v3 arrives
    result = await run_app(app, [out])
    assert result.values("joined") == [["v1", "c1"], ["v1", "c2"], ["v3", "c4"]]
    stamps = [ts for _, _, _, ts in result.outputs["joined"]]
    assert stamps == [12.0, 19.5, 50.0]  # the later of the two records


@pytest.mark.parametrize("max_in_flight", [1, 64])
async def test_out_of_order_record_within_grace_still_joins(max_in_flight: int) -> None:
    app, views, clicks, out = impressions_app(max_in_flight)
    (app.stream(views).join(app.stream(clicks), lambda v, c: [v, c],
                            JoinWindows.of(2.0, grace=10.0)).to(out))
    produce(app, views, [In("a", "v1", 10.0)])
    # c1 comes after a click at 15.0 in its partition: out of order, within grace
    produce(app, clicks, [In("z", "c0", 15.0), In("a", "c1", 11.0)])
    result = await run_app(app, [out])
    assert result.values("joined") == [["v1", "c1"]]
    assert app.late_records.total == 0


@pytest.mark.parametrize("max_in_flight", [1, 64])
async def test_a_record_past_the_join_grace_still_joins_what_the_other_side_holds(
        max_in_flight: int) -> None:
    # Kafka Streams 3.9 (checked with the oracle, tests/oracle): no record is dropped as
    # late; the stores' retention (before + after + grace = 5 s) decides what is visible.
    # c1@11 comes after c0@20 (11 + 2 + 1 <= 20) yet sees v1@10 and v3@10.5 (the views
    # store's time is 10.5).
    app, views, clicks, out = impressions_app(max_in_flight)
    (app.stream(views).join(app.stream(clicks), lambda v, c: [v, c],
                            JoinWindows.of(2.0, grace=1.0), name="vc").to(out))
    produce(app, views, [In("a", "v1", 10.0), In("a", "v3", 10.5)])
    produce(app, clicks, [In("z", "c0", 20.0), In("a", "c1", 11.0)])
    result = await run_app(app, [out])
    assert result.values("joined") == [["v1", "c1"], ["v3", "c1"]]
    assert app.late_records.total == 0


async def test_left_join_emits_unmatched_left_records_when_their_window_closes() -> None:
    # Kafka 3.1+ (KAFKA-10847): v1 waits and is then matched by c1, so it is never emitted
    # unmatched; v2 is emitted once stream time passes 11 + 5 + 60, stamped 11; a right
    # record without a match (c-alone) is not emitted by a left join.
    app, views, clicks, out = impressions_app()
    (app.stream(views).left_join(app.stream(clicks), lambda v, c: [v, c],
                                 JoinWindows.of(5.0, grace=60.0)).to(out))
    produce(app, views, [In("a", "v1", 10.0), In("b", "v2", 11.0)])
    produce(app, clicks, [In("a", "c1", 12.0), In("c", "c-alone", 13.0),
                          In("d", "closer", 100.0)])
    result = await run_app(app, [out])
    assert result.values("joined") == [["v1", "c1"], ["v2", None]]
    assert [ts for _, _, _, ts in result.outputs["joined"]] == [12.0, 11.0]


async def test_outer_join_emits_unmatched_records_of_both_sides_when_windows_close() -> None:
    app, views, clicks, out = impressions_app()
    (app.stream(views).outer_join(app.stream(clicks), lambda v, c: [v, c],
                                  JoinWindows.of(5.0, grace=60.0)).to(out))
    produce(app, views, [In("a", "v1", 10.0)])
    produce(app, clicks, [In("c", "c-alone", 11.0), In("a", "c1", 12.0),
                          In("d", "closer", 100.0)])
    result = await run_app(app, [out])
    assert result.values("joined") == [["v1", "c1"], [None, "c-alone"]]


def test_stream_stream_join_needs_join_windows() -> None:
    from aiostreams import ConfigError

    app, views, clicks, _ = impressions_app()
    with pytest.raises(ConfigError, match="JoinWindows"):
        app.stream(views).join(app.stream(clicks), lambda v, c: v)  # type: ignore


def test_both_sides_of_a_stream_join_share_their_window_stores() -> None:
    app, views, clicks, out = impressions_app()
    app.stream(views).join(app.stream(clicks), lambda v, c: v, JoinWindows(1.0)).to(out)
    subs = app.build()
    assert len(subs) == 1
    assert len(subs[0].stores) == 2
    assert all(len(p.stores) == 2 for p in subs[0].processors if "JOIN" in p.name)


# -- table-table ------------------------------------------------------------------------------


def tables_app() -> tuple[Any, Any, Any, Any]:
    app = make_app(**IDLE)
    left = app.topic("left", key=str, value=str, partitions=1)
    right = app.topic("right", key=str, value=str, partitions=1)
    out = app.topic("joined", key=str, value="json")
    return app, left, right, out


@pytest.mark.parametrize(("kind", "expected"), [
    # an inner join emits nothing while the other side has never had a value
    ("join", [("k", ["l1", "r1"]), ("k", ["l2", "r1"]), ("k", None)]),
    ("left_join", [("k", ["l1", None]), ("k", ["l1", "r1"]), ("k", ["l2", "r1"]),
                   ("k", ["l2", None])]),
    ("outer_join", [("k", ["l1", None]), ("k", ["l1", "r1"]), ("k", ["l2", "r1"]),
                    ("k", ["l2", None])]),
])
async def test_table_table_joins_emit_the_new_result_on_every_update(
        kind: str, expected: list[tuple[str, Any]]) -> None:
    app, left, right, out = tables_app()
    joined = getattr(app.table(left), kind)(app.table(right), lambda a, b: [a, b])
    joined.to_stream().to(out)
    produce(app, left, [In("k", "l1", 1.0), In("k", "l2", 3.0)])
    produce(app, right, [In("k", "r1", 2.0), In("k", None, 4.0)])
    result = await run_app(app, [out])
    assert result.pairs("joined") == expected


async def test_outer_table_join_keeps_a_key_only_the_right_side_has() -> None:
    app, left, right, out = tables_app()
    app.table(left).outer_join(app.table(right), lambda a, b: [a, b]).to_stream().to(out)
    produce(app, right, [In("k", "r1", 1.0)])
    result = await run_app(app, [out])
    assert result.pairs("joined") == [("k", [None, "r1"])]


async def test_a_joined_table_can_be_joined_by_a_stream() -> None:
    app, left, right, out = tables_app()
    events = app.topic("events", key=str, value=str)
    profile = app.table(left).join(app.table(right).map_values(str.upper),
                                   lambda a, b: f"{a}/{b}")
    app.stream(events).join(profile, lambda e, p: [e, p]).to(out)
    produce(app, left, [In("k", "l1", 1.0)])
    produce(app, right, [In("k", "r1", 1.0)])
    produce(app, events, [In("k", "e1", 2.0), In("x", "e2", 2.0)])
    result = await run_app(app, [out])
    assert result.pairs("joined") == [("k", ["e1", "l1/R1"])]
