"""Grouping, aggregations and tables, end to end on the memory broker."""

from __future__ import annotations

from typing import Any

import pytest
from dslkit import In, broker_of, make_app, produce, run_app

from aiostreams import TopologyError
from aiostreams.dsl.builder import Table


def lines_app(**settings: Any) -> tuple[Any, Any, Any]:
    app = make_app(**settings)
    lines = app.topic("lines", key=str, value=str, partitions=2)
    counts = app.topic("counts", key=str, value=int, partitions=2)
    return app, lines, counts


async def test_count_forwards_every_update_and_keeps_the_final_count() -> None:
    app, lines, counts = lines_app()
    table = (app.stream(lines).flat_map_values(str.split)
             .group_by(lambda _, word: word).count(materialized="word-counts"))
    table.to_stream().to(counts)
    produce(app, lines, [In("1", "the cat"), In("2", "the dog"), In("3", "the end")])
    result = await run_app(app, [counts])
    assert [v for k, v in result.pairs("counts") if k == "the"] == [1, 2, 3]
    assert sorted(result.pairs("counts")) == sorted(
        [("the", 1), ("the", 2), ("the", 3), ("cat", 1), ("dog", 1), ("end", 1)])
    assert result.stores["word-counts"] == {"the": 3, "cat": 1, "dog": 1, "end": 1}
    assert table.store_name == "word-counts"


async def test_repartitioned_counts_land_on_the_partition_of_their_key() -> None:
    from aiostreams.transport.partitioner import default_partition

    app, lines, counts = lines_app()
    app.stream(lines).group_by(lambda _, line: line).count().to_stream().to(counts)
    produce(app, lines, [In(str(i), f"w{i % 7}") for i in range(40)])
    result = await run_app(app, [counts])
    for partition, records in result.by_partition("counts").items():
        for key, _, _ in records:
            assert default_partition(key.encode(), 2, counter=iter(())) == partition


async def test_reduce_combines_values_per_key_starting_from_the_first() -> None:
    app = make_app()
    nums = app.topic("nums", key=str, value=int)
    out = app.topic("max", key=str, value=int)
    app.stream(nums).group_by_key().reduce(max, materialized="maxima").to_stream().to(out)
    produce(app, nums, [In("a", 3), In("b", 1), In("a", 2), In("a", 7)])
    result = await run_app(app, [out])
    assert result.pairs("max") == [("a", 3), ("b", 1), ("a", 3), ("a", 7)]
    assert result.stores["maxima"] == {"a": 7, "b": 1}


async def test_aggregate_deep_copies_a_mutable_initial_value_per_key() -> None:
    app = make_app()
    src = app.topic("events", key=str, value=str)
    out = app.topic("seen", key=str, value="json")
    (app.stream(src).group_by_key()
     .aggregate([], lambda k, v, acc: (acc.append(v), acc)[1])
     .to_stream().to(out))
    produce(app, src, [In("a", "x"), In("b", "y"), In("a", "z")])
    result = await run_app(app, [out])
    assert result.pairs("seen") == [("a", ["x"]), ("b", ["y"]), ("a", ["x", "z"])]


async def test_aggregate_with_callable_initializer_and_key_in_aggregator() -> None:
    app = make_app()
    src = app.topic("orders", key=str, value=float)
    out = app.topic("totals", key=str, value="json")
    (app.stream(src).group_by_key()
     .aggregate(lambda: {"n": 0, "sum": 0.0},
                lambda k, amount, acc: {"n": acc["n"] + 1, "sum": acc["sum"] + amount,
                                        "who": k})
     .to_stream().to(out))
    produce(app, src, [In("c1", 10.0), In("c1", 5.5)])
    result = await run_app(app, [out])
    assert result.values("totals")[-1] == {"n": 2, "sum": 15.5, "who": "c1"}


async def test_aggregations_skip_records_with_null_key_or_value() -> None:
    app = make_app()
    src = app.topic("events", key=str, value=str)
    out = app.topic("counts", key=str, value=int)
    app.stream(src).group_by_key().count().to_stream().to(out)
    produce(app, src, [In(None, "x"), In("a", None), In("a", "y")])
    result = await run_app(app, [out])
    assert result.pairs("counts") == [("a", 1)]


async def test_an_aggregator_returning_none_deletes_the_key() -> None:
    app = make_app()
    src = app.topic("ops", key=str, value=str)
    out = app.topic("state", key=str, value="json")
    (app.stream(src).group_by_key()
     .aggregate(0, lambda k, op, n: None if op == "reset" else n + 1, materialized="st")
     .to_stream().to(out))
    produce(app, src, [In("a", "inc"), In("a", "reset"), In("b", "inc")])
    result = await run_app(app, [out])
    assert result.pairs("state") == [("a", 1), ("a", None), ("b", 1)]
    assert result.stores["st"] == {"b": 1}


# -- tables ---------------------------------------------------------------------------------


async def test_table_materializes_the_latest_value_and_null_deletes() -> None:
    app = make_app()
    users = app.topic("users", key=str, value=str)
    out = app.topic("updates", key=str, value=str)
    table = app.table(users, materialized="users-store")
    assert isinstance(table, Table)
    table.to_stream().to(out)
    produce(app, users, [In("u1", "ann"), In("u2", "bob"), In("u1", "anna"), In("u2", None)])
    result = await run_app(app, [out])
    assert result.pairs("updates") == [("u1", "ann"), ("u2", "bob"), ("u1", "anna"),
                                       ("u2", None)]
    assert result.stores["users-store"] == {"u1": "anna"}


async def test_table_filter_turns_failing_updates_of_held_keys_into_deletes() -> None:
    # As Kafka Streams' KTableFilter (old values on): "b" was never in the filtered table,
    # so its failing update forwards nothing; "a" was, so its failing update deletes it.
    app = make_app()
    scores = app.topic("scores", key=str, value=int)
    out = app.topic("high", key=str, value=int)
    high = app.table(scores).filter(lambda k, v: v >= 10, materialized="high-scores")
    high.to_stream().to(out)
    produce(app, scores, [In("a", 12), In("b", 3), In("a", 4)])
    result = await run_app(app, [out])
    assert result.pairs("high") == [("a", 12), ("a", None)]
    assert result.stores["high-scores"] == {}


async def test_table_map_values_maps_values_and_keeps_deletes() -> None:
    app = make_app()
    names = app.topic("names", key=str, value=str)
    out = app.topic("lengths", key=str, value=int)
    app.table(names).map_values(len).to_stream().to(out)
    produce(app, names, [In("a", "xyz"), In("a", None)])
    result = await run_app(app, [out])
    assert result.pairs("lengths") == [("a", 3), ("a", None)]


def test_table_filter_refuses_a_coroutine_predicate() -> None:
    app = make_app()

    async def pred(k: str, v: str) -> bool:
        return True

    with pytest.raises(TopologyError, match="filter_async"):
        app.table(app.topic("t", key=str, value=str)).filter(pred)


async def test_aggregation_store_is_backed_by_a_changelog_topic() -> None:
    app, lines, counts = lines_app()
    app.stream(lines).group_by_key().count(materialized="per-key").to_stream().to(counts)
    produce(app, lines, [In("a", "x"), In("a", "y")])
    await run_app(app, [counts])
    changelog = broker_of(app).records(f"{app.name}-per-key-changelog")
    assert len(changelog) == 2


async def test_persistent_aggregation_keeps_its_state_in_sqlite(tmp_path: Any) -> None:
    app, lines, counts = lines_app(state_dir=tmp_path)
    app.stream(lines).group_by_key().count(materialized="on-disk", persistent=True
                                           ).to_stream().to(counts)
    produce(app, lines, [In("a", "x"), In("a", "y"), In("b", "z")])
    result = await run_app(app, [counts])
    assert result.stores["on-disk"] == {"a": 2, "b": 1}
    assert any(tmp_path.rglob("*on-disk*"))
