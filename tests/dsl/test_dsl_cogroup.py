"""``cogroup``: grouped streams aggregated into one table, each by its own aggregator, and
state that continues exactly after the local state is deleted."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from dslkit import In, make_app, produce, run_app

from aiostreams import App, TopologyError


def totals_app(app: App) -> tuple[Any, Any, Any]:
    deposits = app.topic("deposits", key=str, value=int, partitions=2)
    withdrawals = app.topic("withdrawals", key=str, value=int, partitions=2)
    balances = app.topic("balances", key=str, value=int, partitions=2)
    (app.stream(deposits).group_by_key()
     .cogroup(lambda _k, amount, balance: balance + amount)
     .cogroup(app.stream(withdrawals).group_by_key(),
              lambda _k, amount, balance: balance - amount)
     .aggregate(0, materialized="balances", persistent=True, value_serde=int)
     .to_stream().to(balances))
    return deposits, withdrawals, balances


async def test_each_cogrouped_stream_updates_the_shared_aggregate_by_its_aggregator(
        tmp_path: Path) -> None:
    app = make_app(state_dir=tmp_path)
    deposits, withdrawals, balances = totals_app(app)
    produce(app, deposits, [In("ann", 10, 1.0), In("bob", 5, 2.0)])
    produce(app, withdrawals, [In("ann", 3, 3.0)])
    result = await run_app(app, [balances])
    assert result.stores["balances"] == {"ann": 7, "bob": 5}
    assert sorted(v for k, v in result.pairs("balances") if k == "ann") == [7, 10]


def test_a_grouped_stream_cannot_join_a_cogroup_twice() -> None:
    app = make_app()
    grouped = app.stream(app.topic("a", key=str, value=int)).group_by_key()
    with pytest.raises(TopologyError, match="already in the cogroup"):
        grouped.cogroup(lambda k, v, agg: agg).cogroup(grouped, lambda k, v, agg: agg)


DEPOSITS = [In(f"u{i % 4}", i, float(i)) for i in range(30)]
WITHDRAWALS = [In(f"u{i % 3}", 1, float(i) + 0.5) for i in range(30)]


async def test_cogrouped_balances_continue_exactly_after_state_is_deleted(
        tmp_path: Path) -> None:
    def app_at(name: str, state: Path) -> tuple[App, Any, Any, Any]:
        app = App(name, broker=f"memory://cogroup-{name}", commit_interval_ms=5.0,
                  poll_timeout=0.01, state_dir=state, max_in_flight=16)
        return (app, *totals_app(app))

    whole, deposits, withdrawals, balances = app_at("whole", tmp_path / "w")
    produce(whole, deposits, DEPOSITS)
    produce(whole, withdrawals, WITHDRAWALS)
    expected = await run_app(whole, [balances])

    state = tmp_path / "split"
    first, deposits, withdrawals, balances = app_at("split", state)
    produce(first, deposits, DEPOSITS[:15])
    produce(first, withdrawals, WITHDRAWALS[:15])
    await run_app(first, [balances])
    shutil.rmtree(state)
    second, deposits, withdrawals, balances = app_at("split", state)
    produce(second, deposits, DEPOSITS[15:])
    produce(second, withdrawals, WITHDRAWALS[15:])
    result = await run_app(second, [balances])
    assert result.stores["balances"] == expected.stores["balances"]
    last = {k: v for k, v in result.pairs("balances")}
    assert last == expected.stores["balances"]
