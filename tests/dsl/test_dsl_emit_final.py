"""Emit strategy ``on_window_close`` on time, sliding and session windows: each window's
final aggregate once, when stream time passes its end + grace (sessions: end + gap +
grace), every key's due windows in (start, key) order (sessions: end, start, key); and the
close time of the last emission is state that continues after the local state is deleted
(nothing emitted twice, nothing lost)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from dslkit import In, make_app, produce, run_app

from aiostreams import App
from aiostreams.testing.driver import TopologyTestDriver
from aiostreams.windows import (
    SessionWindowedSerde,
    SessionWindows,
    SlidingWindows,
    TimeWindowedSerde,
    TumblingWindows,
)


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


async def emitted_per_record(app: App, topic: str,
                             records: list[tuple[str, float]]) -> list[list[Any]]:
    """What ``topic`` received after each of ``records`` (key, timestamp; value 1)."""
    seen: list[list[Any]] = []
    async with TopologyTestDriver(app) as driver:
        for key, ts in records:
            driver.pipe_input("clicks", key, 1, ts)
            await driver.process_all()
            seen.append([(r.key.key, r.key.start, r.key.end, r.value, r.timestamp)
                         for r in driver.read_output(topic)])
    return seen


async def test_sliding_windows_are_emitted_once_each_when_they_close() -> None:
    app = make_app()
    out = app.topic("final", key=TimeWindowedSerde(str, size=10.0), value=int)
    (app.stream(app.topic("clicks", key=str, value=int)).group_by_key()
     .windowed_by(SlidingWindows.of_time_difference_and_grace(10.0, 0.0))
     .emit_on_window_close().count().to_stream().to(out))
    seen = await emitted_per_record(app, "final",
                                    [("a", 12.0), ("a", 15.0), ("a", 30.0), ("b", 40.0)])
    # a@15 closes a's left window [2, 12]; a@30 closes [5, 15] (both records) and the
    # right window of 12 [12.001, 22.001]; b@40 closes [20, 30].
    assert seen == [[], [("a", 2.0, 12.0, 1, 12.0)],
                    [("a", 5.0, 15.0, 2, 15.0), ("a", 12.001, 22.001, 1, 15.0)],
                    [("a", 20.0, 30.0, 1, 30.0)]]


async def test_sessions_are_emitted_once_each_when_they_close_stamped_with_their_end() -> None:
    app = make_app()
    out = app.topic("final", key=SessionWindowedSerde(str), value=int)
    (app.stream(app.topic("clicks", key=str, value=int)).group_by_key()
     .windowed_by(SessionWindows(5.0, grace=0.0))
     .emit_on_window_close().count().to_stream().to(out))
    seen = await emitted_per_record(app, "final", [("a", 1.0), ("a", 4.0), ("b", 3.0),
                                                   ("a", 20.0), ("b", 22.0), ("c", 40.0)])
    # a's two records merge into [1, 4] with no output; a@20 closes every session ending
    # before 20 - 5, in order of end: b's [3, 3], then a's [1, 4].
    assert seen == [[], [], [], [("b", 3.0, 3.0, 1, 3.0), ("a", 1.0, 4.0, 2, 4.0)], [],
                    [("a", 20.0, 20.0, 1, 20.0), ("b", 22.0, 22.0, 1, 22.0)]]


def windowed_restore_app(name: str, state: Path, kind: str) -> tuple[App, Any, Any]:
    app = App(name, broker=f"memory://emit-final-{kind}-{name}", commit_interval_ms=5.0,
              poll_timeout=0.01, state_dir=state, max_in_flight=16)
    clicks = app.topic("clicks", key=str, value=int, partitions=2)
    grouped = app.stream(clicks).group_by_key()
    if kind == "session":
        out = app.topic("final-counts", key=SessionWindowedSerde(str), value=int,
                        partitions=2)
        table = grouped.windowed_by(SessionWindows(2.0, grace=1.0)).emit_on_window_close()
    else:
        out = app.topic("final-counts", key=TimeWindowedSerde(str, size=3.0), value=int,
                        partitions=2)
        table = grouped.windowed_by(
            SlidingWindows.of_time_difference_and_grace(3.0, 1.0)).emit_on_window_close()
    table.count(materialized="final", persistent=True,
                retention=100.0).to_stream().to(out)
    return app, clicks, out


# gaps of 0-4.5 s between a key's records: sessions both merge and close
BURSTS = [In(f"u{i % 3}", 1, float(i) * 1.5 + (i % 5) * 0.75) for i in range(40)]


@pytest.mark.parametrize("kind", ["sliding", "session"])
async def test_sliding_and_session_final_results_continue_exactly_after_state_is_deleted(
        tmp_path: Path, kind: str) -> None:
    whole, clicks, out = windowed_restore_app("whole", tmp_path / "w", kind)
    produce(whole, clicks, BURSTS)
    expected = finals(await run_app(whole, [out]))
    assert len(expected) >= 10
    state = tmp_path / "split"
    first, clicks, out = windowed_restore_app("split", state, kind)
    produce(first, clicks, BURSTS[:20])
    await run_app(first, [out])
    shutil.rmtree(state)
    second, clicks, out = windowed_restore_app("split", state, kind)
    produce(second, clicks, BURSTS[20:])
    result = finals(await run_app(second, [out]))
    assert result == expected
    assert len(set(result)) == len(result)  # no window emitted twice


def test_the_guides_session_example_runs_and_prints_what_it_says(
        capsys: pytest.CaptureFixture[str]) -> None:
    guide = Path(__file__).parents[2] / "docs" / "guides" / "windows-joins.md"
    text = guide.read_text()
    start = text.index("```python", text.index("### Sliding windows and sessions"))
    code = text[start + len("```python"):text.index("```", start + 3)]
    expected = code.strip().splitlines()[-1].removeprefix("# ")
    exec(compile(code, str(guide), "exec"), {"__name__": "guide_example"})
    assert capsys.readouterr().out.strip() == expected
