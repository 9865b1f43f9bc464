"""Versioned tables and stream-table joins with grace, end to end on the memory broker:
as-of joins, the grace buffer's timestamp order, build-time refusals naming the node, and
restore from the changelogs after the local state is deleted."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from dslkit import In, make_app, produce, run_app

from aiostreams import App, ConfigError, TopologyError, Versioned

IDLE: dict[str, Any] = {"max_task_idle_ms": 100.0}


def tiers_app(*, versioned: bool = True, grace: float | None = None,
              **settings: Any) -> tuple[App, Any, Any, Any]:
    app = make_app(**IDLE, **settings)
    orders = app.topic("orders", key=str, value=int, partitions=1)
    tiers = app.topic("tiers", key=str, value=str, partitions=1)
    out = app.topic("enriched", key=str, value="json", partitions=1)
    table = app.table(tiers, materialized="tiers-store",
                      versioned=Versioned(history_retention=60.0) if versioned else None)
    app.stream(orders).left_join(table, lambda o, t: [o, t], grace=grace,
                                 name="enrich").to(out)
    return app, orders, tiers, out


@pytest.mark.parametrize("max_in_flight", [1, 64])
async def test_a_late_stream_record_joins_the_table_value_valid_at_its_timestamp(
        max_in_flight: int) -> None:
    app, orders, tiers, out = tiers_app(max_in_flight=max_in_flight)
    produce(app, tiers, [In("c1", "gold", 1.0), In("c1", "platinum", 5.0)])
    produce(app, orders, [In("c1", 10, 6.0), In("c1", 20, 3.0), In("c1", 30, 0.5)])
    result = await run_app(app, [out])
    assert result.pairs("enriched") == [("c1", [10, "platinum"]), ("c1", [20, "gold"]),
                                        ("c1", [30, None])]


async def test_an_unversioned_table_joins_its_latest_value_instead() -> None:
    app, orders, tiers, out = tiers_app(versioned=False)
    produce(app, tiers, [In("c1", "gold", 1.0), In("c1", "platinum", 5.0)])
    produce(app, orders, [In("c1", 10, 6.0), In("c1", 20, 3.0)])
    result = await run_app(app, [out])
    assert result.values("enriched") == [[10, "platinum"], [20, "platinum"]]


GRACE_TIERS = [In("c1", "gold", 1.0), In("c1", "silver", 20.0), In("c1", "bronze", 8.0)]
GRACE_ORDERS = [In("c1", 10, 10.0), In("c1", 11, 9.0), In("c1", 99, 30.0)]


@pytest.mark.parametrize("max_in_flight", [1, 7, 64])
async def test_grace_holds_stream_records_back_and_joins_them_in_timestamp_order(
        max_in_flight: int) -> None:
    # Processed by timestamp across the topics: gold@1, order 10@10 and 11@9 (buffered),
    # silver@20, bronze@8 (an out-of-order table update, stored), order 99@30, which moves
    # the buffer's stream time to 30 and releases everything up to 25, oldest first.
    app, orders, tiers, out = tiers_app(grace=5.0, max_in_flight=max_in_flight)
    produce(app, tiers, GRACE_TIERS)
    produce(app, orders, GRACE_ORDERS)
    result = await run_app(app, [out])
    assert [(v, ts) for _, _, v, ts in result.outputs["enriched"]] == [
        ([11, "bronze"], 9.0), ([10, "bronze"], 10.0)]


async def test_without_grace_the_same_records_join_what_the_table_held_on_arrival() -> None:
    app, orders, tiers, out = tiers_app(grace=None)
    produce(app, tiers, GRACE_TIERS)
    produce(app, orders, GRACE_ORDERS)
    result = await run_app(app, [out])
    assert result.values("enriched") == [[10, "gold"], [11, "gold"], [99, "silver"]]


async def test_a_versioned_table_forwards_out_of_order_updates_but_not_expired_ones() -> None:
    app = make_app()
    tiers = app.topic("tiers", key=str, value=str, partitions=1)
    out = app.topic("changes", key=str, value=str, partitions=1)
    app.table(tiers, versioned=Versioned(history_retention=5.0)).to_stream().to(out)
    produce(app, tiers, [In("c1", "a", 10.0), In("c1", "b", 7.0), In("c2", "c", 20.0),
                         In("c1", "d", 16.0), In("c1", "e", 12.0)])
    result = await run_app(app, [out])
    # b@7 is out of order but within 5 s of stream time 10: stored and forwarded; once
    # stream time is 20, d@16 is within reach, e@12 is not (12 < 20 - 5): dropped.
    assert result.pairs("changes") == [("c1", "a"), ("c1", "b"), ("c2", "c"), ("c1", "d")]


def test_grace_on_an_unversioned_table_is_refused_naming_the_join() -> None:
    with pytest.raises(TopologyError, match=r"join 'enrich'.*versioned"):
        tiers_app(versioned=False, grace=1.0)


def test_stateful_table_operators_on_a_versioned_table_are_refused_naming_it() -> None:
    app = make_app()
    tiers = app.topic("tiers", key=str, value=str, partitions=1)
    other = app.table(app.topic("other", key=str, value=str, partitions=1))
    table = app.table(tiers, versioned=Versioned(10.0), name="vt")
    with pytest.raises(TopologyError, match=r"group_by\(\) on table 'vt'.*versioned table"):
        table.group_by(lambda k, v: (v, k))
    with pytest.raises(TopologyError, match="versioned table 'vt'"):
        table.filter(lambda k, v: True).join(other, lambda a, b: a)
    with pytest.raises(TopologyError, match="versioned table 'vt'"):
        app.stream(app.topic("s", key=str, value=str, partitions=1)).join(
            table.map_values(str.upper), lambda a, b: a)


def test_bad_versioned_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="history_retention"):
        Versioned(history_retention=-1.0)
    with pytest.raises(ConfigError, match="grace"):
        tiers_app(grace=-2.0)


# -- restore ----------------------------------------------------------------------------------


def restore_app(name: str, broker: str, state: Path, persistent: bool) -> tuple[App, Any, Any,
                                                                               Any]:
    app = App(name, broker=broker, commit_interval_ms=5.0, poll_timeout=0.01,
              state_dir=state, max_in_flight=16, **IDLE)
    orders = app.topic("orders", key=str, value=int, partitions=2)
    tiers = app.topic("tiers", key=str, value=int, partitions=2)
    out = app.topic("enriched", key=str, value="json", partitions=2)
    table = app.table(tiers, materialized="tiers-store", persistent=persistent,
                      versioned=Versioned(history_retention=30.0))
    app.stream(orders).join(table, lambda o, t: [o, t], grace=4.0, name="enrich").to(out)
    return app, orders, tiers, out


def inputs(lo: int, hi: int) -> tuple[list[In], list[In]]:
    """Table updates and orders over keys k0..k3 with out-of-order timestamps (every third
    record some seconds back) and a tombstone every seventh update. Records from 40 on are
    100 s later, so that both runs see the records in the same order."""
    def ts(i: int, back: int) -> float:
        return float(i * 2 - back + (100 if i >= 40 else 0))

    tiers = [In(f"k{i % 4}", None if i % 7 == 6 else i, ts(i, 6 if i % 3 == 2 else 0))
             for i in range(lo, hi)]
    orders = [In(f"k{i % 4}", 1000 + i, ts(i, 5 if i % 3 == 1 else -1))
              for i in range(lo, hi)]
    return tiers, orders


@pytest.mark.parametrize("persistent", [False, True])
async def test_versioned_joins_continue_exactly_after_local_state_is_deleted(
        tmp_path: Path, persistent: bool) -> None:
    first_tiers, first_orders = inputs(0, 40)
    second_tiers, second_orders = inputs(40, 80)
    whole, orders, tiers, out = restore_app("whole", f"memory://v-whole-{persistent}",
                                            tmp_path / "w", persistent)
    produce(whole, tiers, first_tiers + second_tiers)
    produce(whole, orders, first_orders + second_orders)
    expected = await run_app(whole, [out])
    assert len(expected.outputs["enriched"]) > 40

    state = tmp_path / "split"
    first, orders, tiers, out = restore_app("split", f"memory://v-split-{persistent}", state,
                                            persistent)
    produce(first, tiers, first_tiers)
    produce(first, orders, first_orders)
    await run_app(first, [out])
    shutil.rmtree(state, ignore_errors=True)  # in-memory stores leave no files
    second, orders, tiers, out = restore_app("split", f"memory://v-split-{persistent}", state,
                                             persistent)
    produce(second, tiers, second_tiers)
    produce(second, orders, second_orders)
    result = await run_app(second, [out])
    assert result.by_partition("enriched") == expected.by_partition("enriched")


def test_the_guides_versioned_join_example_runs_and_prints_what_it_says(
        capsys: pytest.CaptureFixture[str]) -> None:
    guide = Path(__file__).parents[2] / "docs" / "guides" / "windows-joins.md"
    text = guide.read_text()
    start = text.index("```python", text.index("## Versioned tables"))
    code = text[start + len("```python"):text.index("```", start + 3)]
    expected = code.strip().splitlines()[-1].removeprefix("# ")
    exec(compile(code, str(guide), "exec"), {"__name__": "guide_example"})
    assert capsys.readouterr().out.strip() == expected
