"""``cogroup(...).windowed_by(windows)``: the grouped streams' aggregators update the same
windows of one store; each stream's processor keeps its own stream time; the windows are
restored after the local state is deleted."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from dslkit import In, produce, run_app

from aiostreams import App, ConfigError
from aiostreams.testing.driver import TopologyTestDriver
from aiostreams.windows import SessionWindows, TimeWindowedSerde, TumblingWindows


def balances_app(app: App, *, persistent: bool = False) -> tuple[Any, Any, Any]:
    deposits = app.topic("deposits", key=str, value=int, partitions=2)
    withdrawals = app.topic("withdrawals", key=str, value=int, partitions=2)
    out = app.topic("per-window", key=TimeWindowedSerde(str, size=10.0), value=int,
                    partitions=2)
    (app.stream(deposits).group_by_key()
     .cogroup(lambda account, amount, balance: balance + amount)
     .cogroup(app.stream(withdrawals).group_by_key(),
              lambda account, amount, balance: balance - amount)
     .windowed_by(TumblingWindows(10.0, grace=1.0))
     .aggregate(0, materialized="flows", persistent=persistent, value_serde=int)
     .to_stream().to(out))
    return deposits, withdrawals, out


async def test_both_streams_update_the_same_windows() -> None:
    app = App("flows", broker="memory://windowed-cogroup-doc", max_task_idle_ms=0.0)
    balances_app(app)
    async with TopologyTestDriver(app) as driver:
        for topic, amount, at in [("deposits", 10, 1.0), ("withdrawals", 3, 2.0),
                                  ("deposits", 5, 12.0), ("withdrawals", 1, 9.5)]:
            driver.pipe_input(topic, "acct", amount, at)
            await driver.process_all()
        got = [(r.key.start, r.value) for r in driver.read_output("per-window")]
    # The withdrawal at 9.5 is late for [0, 10) only by the *withdrawals'* stream time
    # (2.0), not by the deposit at 12.0: it still counts (Kafka keeps one stream time per
    # grouped stream's processor).
    assert got == [(0.0, 10), (0.0, 7), (10.0, 5), (0.0, 6)]


def test_sessions_are_refused_for_a_cogroup() -> None:
    app = App("flows-bad", broker="memory://windowed-cogroup-bad")
    deposits = app.topic("deposits", key=str, value=int)
    cogrouped = app.stream(deposits).group_by_key().cogroup(lambda k, v, agg: agg + v)
    with pytest.raises(ConfigError, match="TumblingWindows or HoppingWindows, got Session"):
        cogrouped.windowed_by(SessionWindows(5.0))  # type: ignore[arg-type]


DEPOSITS = [In(f"a{i % 3}", i, float(i)) for i in range(30)]
WITHDRAWALS = [In(f"a{i % 3}", 1, float(i) + 0.5) for i in range(30)]


async def test_windows_continue_exactly_after_state_is_deleted(tmp_path: Path) -> None:
    def app_at(name: str, broker: str, state: Path) -> App:
        return App(name, broker=broker, commit_interval_ms=5.0, poll_timeout=0.01,
                   state_dir=state, max_in_flight=16)

    whole = app_at("whole", "memory://wcg-whole", tmp_path / "w")
    deposits, withdrawals, out = balances_app(whole, persistent=True)
    produce(whole, deposits, DEPOSITS)
    produce(whole, withdrawals, WITHDRAWALS)
    expected = await run_app(whole, [out])
    state = tmp_path / "split"
    first = app_at("split", "memory://wcg-split", state)
    deposits, withdrawals, out = balances_app(first, persistent=True)
    produce(first, deposits, DEPOSITS[:15])
    produce(first, withdrawals, WITHDRAWALS[:15])
    await run_app(first, [out])
    shutil.rmtree(state)
    second = app_at("split", "memory://wcg-split", state)
    deposits, withdrawals, out = balances_app(second, persistent=True)
    produce(second, deposits, DEPOSITS[15:])
    produce(second, withdrawals, WITHDRAWALS[15:])
    result = await run_app(second, [out])
    assert result.stores["flows"] == expected.stores["flows"]
