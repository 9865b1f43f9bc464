"""Sliding windows: windows made by record pairs, early records, late records, and a store
that continues exactly after the local state is deleted."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from dslkit import In, produce, run_app

from aiostreams import App
from aiostreams.errors import ConfigError
from aiostreams.testing.driver import TopologyTestDriver
from aiostreams.windows import SlidingWindows, TimeWindowedSerde


def sliding_app(**settings: Any) -> tuple[App, Any]:
    app = App(f"slide-{uuid.uuid4().hex[:8]}", broker=f"memory://{uuid.uuid4().hex}",
              default_partitions=1, **settings)
    clicks = app.topic("clicks", key=str, value=int, partitions=1)
    out = app.topic("out", key=TimeWindowedSerde(str, size=10.0), value=int, partitions=1)
    (app.stream(clicks).group_by_key()
     .windowed_by(SlidingWindows.of_time_difference_and_grace(10.0, 0.0))
     .count().to_stream().to(out))
    return app, clicks


async def run(app: App, records: list[tuple[str, float]]) -> list[tuple[float, float, int]]:
    async with TopologyTestDriver(app) as driver:
        for key, ts in records:
            driver.pipe_input("clicks", key, 1, ts)
        await driver.process_all()
        return [(r.key.start, r.key.end, r.value) for r in driver.read_output("out")]


async def test_a_record_pair_makes_left_and_right_windows_not_epoch_aligned_ones() -> None:
    app, _ = sliding_app()
    assert await run(app, [("a", 20.0), ("a", 25.0)]) == [
        (10.0, 20.0, 1),      # left window of 20
        (20.001, 30.001, 1),  # right window of 20 (just after it) holds 25
        (15.0, 25.0, 2),      # left window of 25 holds both
    ]


async def test_an_early_record_goes_into_the_window_starting_at_zero() -> None:
    app, _ = sliding_app()
    assert await run(app, [("a", 3.0), ("a", 4.0)]) == [
        (0.0, 10.0, 1), (3.001, 13.001, 1), (0.0, 10.0, 2)]


async def test_a_record_older_than_the_window_close_is_dropped() -> None:
    app, _ = sliding_app()
    assert await run(app, [("a", 30.0), ("a", 19.0)]) == [(20.0, 30.0, 1)]


def test_a_retention_shorter_than_two_differences_plus_grace_is_refused() -> None:
    app = App("short-retention", broker=f"memory://{uuid.uuid4().hex}")
    clicks = app.topic("clicks", key=str, value=int)
    windowed = app.stream(clicks).group_by_key().windowed_by(
        SlidingWindows.of_time_difference_and_grace(10.0, 5.0))
    with pytest.raises(ConfigError, match="2 x time difference"):
        windowed.count(retention=20.0)


def restore_app(name: str, broker: str, state: Path) -> tuple[App, Any, Any]:
    app = App(name, broker=broker, commit_interval_ms=5.0, poll_timeout=0.01,
              state_dir=state, max_in_flight=16)
    clicks = app.topic("clicks", key=str, value=int, partitions=2)
    out = app.topic("sliding-counts", key=TimeWindowedSerde(str, size=3.0), value=int,
                    partitions=2)
    (app.stream(clicks).group_by_key()
     .windowed_by(SlidingWindows.of_time_difference_and_grace(3.0, 1.0))
     .count(materialized="sliding", persistent=True).to_stream().to(out))
    return app, clicks, out


CLICKS = [In(f"u{i % 3}", 1, float(i) + (i % 4) / 2) for i in range(40)]


async def test_sliding_counts_continue_exactly_after_state_is_deleted(tmp_path: Path) -> None:
    whole, clicks, out = restore_app("whole", "memory://slide-whole", tmp_path / "w")
    produce(whole, clicks, CLICKS)
    expected = await run_app(whole, [out])
    state = tmp_path / "split"
    first, clicks, out = restore_app("split", "memory://slide-split", state)
    produce(first, clicks, CLICKS[:20])
    await run_app(first, [out])
    shutil.rmtree(state)
    second, clicks, out = restore_app("split", "memory://slide-split", state)
    produce(second, clicks, CLICKS[20:])
    result = await run_app(second, [out])
    # Two tasks write to each output partition in a scheduling-dependent interleaving;
    # each key's updates (one task's) must come in the same order.
    def per_key(run: Any) -> dict[str, list[Any]]:
        keyed: dict[str, list[Any]] = {}
        for _, k, v, ts in run.outputs["sliding-counts"]:
            keyed.setdefault(k.key, []).append((k.start, v, ts))
        return keyed

    assert per_key(result) == per_key(expected)
    assert result.stores["sliding"] == expected.stores["sliding"]
