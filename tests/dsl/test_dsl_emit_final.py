"""Emit strategy ``on_window_close`` on time windows: each window's final aggregate once,
when stream time passes its end + grace, every key's due windows in (start, key) order;
and the close time of the last emission is state that continues after the local state is
deleted (nothing emitted twice, nothing lost)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from dslkit import In, make_app, produce, run_app

from aiostreams import App
from aiostreams.test_driver import TopologyTestDriver
from aiostreams.windows import TimeWindowedSerde, TumblingWindows


def clicks_app(**settings: Any) -> tuple[App, Any, Any]:
    app = make_app(**settings)
    clicks = app.topic("clicks", key=str, value=int)
    out = app.topic("final-counts", key=TimeWindowedSerde(str, size=10.0), value=int)
    (app.stream(clicks).group_by_key().windowed_by(TumblingWindows(10.0, grace=2.0))
     .emit_on_window_close().count().to_stream().to(out))
    return app, clicks, out


async def test_each_window_is_emitted_once_with_its_final_count_when_it_closes() -> None:
    app, _, _ = clicks_app()
    async with TopologyTestDriver(app) as driver:
        seen: list[list[tuple[str, float, int, float]]] = []
        for key, ts in [("b", 1.0), ("a", 2.0), ("a", 9.0), ("b", 11.0), ("a", 11.5),
                        ("a", 12.0), ("c", 25.0)]:
            driver.pipe_input("clicks", key, 1, ts)
            await driver.process_all()
            seen.append([(r.key.key, r.key.start, r.value, r.timestamp)
                         for r in driver.read_output("final-counts")])
    # Nothing until stream time reaches 10 + 2; then [0, 10) of every key, a before b;
    # the record at 11.5 (late for nothing: the window is open until 12) still counts
    # in [10, 20), which closes at 22.
    assert seen[:5] == [[], [], [], [], []]
    assert seen[5] == [("a", 0.0, 2, 9.0), ("b", 0.0, 1, 1.0)]
    assert seen[6] == [("a", 10.0, 2, 12.0), ("b", 10.0, 1, 11.0)]


def restore_app(state: Path) -> tuple[App, Any, Any]:
    app = App("final", broker="memory://emit-final-restore", commit_interval_ms=5.0,
              poll_timeout=0.01, state_dir=state, max_in_flight=16)
    clicks = app.topic("clicks", key=str, value=int, partitions=2)
    out = app.topic("final-counts", key=TimeWindowedSerde(str, size=10.0), value=int,
                    partitions=2)
    (app.stream(clicks).group_by_key().windowed_by(TumblingWindows(10.0, grace=1.0))
     .emit_on_window_close().count(materialized="final", persistent=True, retention=100.0)
     .to_stream().to(out))
    return app, clicks, out


CLICKS = [In(f"u{i % 3}", 1, float(i) * 1.5) for i in range(40)]


async def test_final_results_continue_exactly_after_state_is_deleted(tmp_path: Path) -> None:
    # A retention long enough that every closed window is still in the store after the
    # restart: only the restored close time of the last emission keeps them from being
    # emitted again.
    whole_state = tmp_path / "whole"
    app = App("whole", broker="memory://emit-final-whole", commit_interval_ms=5.0,
              poll_timeout=0.01, state_dir=whole_state, max_in_flight=16)
    clicks = app.topic("clicks", key=str, value=int, partitions=2)
    out = app.topic("final-counts", key=TimeWindowedSerde(str, size=10.0), value=int,
                    partitions=2)
    (app.stream(clicks).group_by_key().windowed_by(TumblingWindows(10.0, grace=1.0))
     .emit_on_window_close().count(materialized="final", persistent=True, retention=100.0)
     .to_stream().to(out))
    produce(app, clicks, CLICKS)
    expected = finals(await run_app(app, [out]))
    state = tmp_path / "split"
    first, clicks, out = restore_app(state)
    produce(first, clicks, CLICKS[:20])
    await run_app(first, [out])
    shutil.rmtree(state)
    second, clicks, out = restore_app(state)
    produce(second, clicks, CLICKS[20:])
    result = finals(await run_app(second, [out]))
    assert result == expected
    assert len(set(result)) == len(result)  # no window emitted twice


def finals(run: Any) -> list[tuple[str, float, int]]:
    return sorted((k.key, k.start, v) for _, k, v, _ in run.outputs["final-counts"])
