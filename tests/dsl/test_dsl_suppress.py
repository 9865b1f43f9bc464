"""``table.suppress(...)``: final window results, time limits, a bounded buffer, build-time
errors, and a buffer that continues exactly after the local state is deleted."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from dslkit import In, produce, run_app

from aiostreams import App, TopologyError
from aiostreams.errors import ConfigError, TaskFailedError
from aiostreams.processors.suppress import SuppressBufferFullError
from aiostreams.testing.driver import TopologyTestDriver
from aiostreams.windows import (
    TimeWindowedSerde,
    TumblingWindows,
    until_time_limit,
    until_window_closes,
)


def driver_app(**settings: Any) -> tuple[App, Any, Any]:
    app = App(f"sup-{uuid.uuid4().hex[:8]}", broker=f"memory://{uuid.uuid4().hex}",
              default_partitions=1, **settings)
    clicks = app.topic("clicks", key=str, value=int, partitions=1)
    out = app.topic("out", key=TimeWindowedSerde(str, size=10.0), value=int, partitions=1)
    return app, clicks, out


async def test_until_window_closes_emits_each_window_once_when_stream_time_passes_it() -> None:
    app, clicks, out = driver_app()
    (app.stream(clicks).group_by_key().windowed_by(TumblingWindows(10.0, grace=2.0))
     .count().suppress(until_window_closes()).to_stream().to(out))
    async with TopologyTestDriver(app) as driver:
        for key, ts in [("a", 1.0), ("a", 5.0), ("b", 6.0), ("a", 11.0), ("a", 11.5)]:
            driver.pipe_input("clicks", key, 1, ts)
        await driver.process_all()
        assert driver.read_output("out") == []  # [0, 10) closes at stream time 12
        driver.pipe_input("clicks", "c", 1, 12.0)
        await driver.process_all()
        assert [(r.key.key, r.key.start, r.value, r.timestamp)
                for r in driver.read_output("out")] == [("a", 0.0, 2, 5.0),
                                                       ("b", 0.0, 1, 6.0)]


async def test_until_time_limit_emits_the_latest_value_after_the_first_update_waited() -> None:
    app, clicks, _ = driver_app()
    counts = app.topic("counts", key=str, value=int, partitions=1)
    (app.stream(clicks).group_by_key().count().suppress(until_time_limit(3.0))
     .to_stream().to(counts))
    async with TopologyTestDriver(app) as driver:
        for key, ts in [("a", 0.0), ("a", 2.0), ("b", 2.5), ("a", 3.0), ("b", 5.0)]:
            driver.pipe_input("clicks", key, 1, ts)
        await driver.process_all()
        # a keeps the buffer time of its first update (0, non-resetting), so at stream
        # time 3 it is due and emits its latest count; b (first held at 2.5) still waits.
        assert [(r.key, r.value, r.timestamp) for r in driver.read_output("counts")] == [
            ("a", 3, 3.0)]


async def test_a_full_time_limit_buffer_emits_its_earliest_entries_early() -> None:
    app, clicks, _ = driver_app()
    counts = app.topic("counts", key=str, value=int, partitions=1)
    (app.stream(clicks).group_by_key().count()
     .suppress(until_time_limit(100.0, max_records=2)).to_stream().to(counts))
    async with TopologyTestDriver(app) as driver:
        for key, ts in [("a", 1.0), ("b", 2.0), ("c", 3.0), ("a", 4.0), ("d", 5.0)]:
            driver.pipe_input("clicks", key, 1, ts)
        await driver.process_all()
        # Each arrival past 2 held keys emits the earliest held one: a, then b, then c
        # (a's second update is a new entry, held at 4).
        assert [(r.key, r.value) for r in driver.read_output("counts")] == [
            ("a", 1), ("b", 1), ("c", 1)]


async def test_a_full_shut_down_buffer_fails_the_task_naming_the_node() -> None:
    app, clicks, _ = driver_app(on_error="fail")
    counts = app.topic("counts", key=str, value=int, partitions=1)
    (app.stream(clicks).group_by_key().count()
     .suppress(until_time_limit(100.0, max_records=1, when_full="shut_down"),
               name="held-counts").to_stream().to(counts))
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input("clicks", "a", 1, 1.0)
        driver.pipe_input("clicks", "b", 1, 2.0)
        with pytest.raises(TaskFailedError) as failed:
            await driver.process_all()
    cause = failed.value.__cause__ or failed.value.__context__
    assert "held-counts" in str(failed.value) + str(cause)
    assert isinstance(cause, SuppressBufferFullError) or "max_records=1" in str(failed.value)


def test_until_window_closes_on_an_unwindowed_table_is_refused_naming_the_node() -> None:
    app, clicks, _ = driver_app()
    table = app.stream(clicks).group_by_key().count(name="plain-count")
    with pytest.raises(TopologyError, match=r"plain-count.*only defined for windowed"):
        table.suppress(until_window_closes())


def test_bad_suppression_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="when_full"):
        until_time_limit(1.0, when_full="drop")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_records"):
        until_window_closes(max_records=-1)


def final_totals_app(name: str, broker: str, state: Path) -> tuple[App, Any, Any]:
    app = App(name, broker=broker, commit_interval_ms=5.0, poll_timeout=0.01,
              state_dir=state, max_in_flight=16)
    sales = app.topic("sales", key=str, value=int, partitions=2)
    totals = app.topic("final-totals", key=TimeWindowedSerde(str, size=10.0), value=int,
                       partitions=2)
    (app.stream(sales).group_by_key()
     .windowed_by(TumblingWindows(10.0, grace=5.0))
     .reduce(lambda a, b: a + b, persistent=True)
     .suppress(until_window_closes(), name="final").to_stream().to(totals))
    return app, sales, totals


# Timestamps only increase: the suppression's stream time starts again after a restart (as
# Kafka's does), so an out-of-order record right after it could be judged differently.
SALES = [In(f"shop{i % 3}", i, float(i)) for i in range(60)]


async def test_final_results_continue_exactly_after_state_is_deleted(tmp_path: Path) -> None:
    whole, sales, totals = final_totals_app("whole", "memory://final-whole", tmp_path / "w")
    produce(whole, sales, SALES)
    expected = await run_app(whole, [totals])
    windows = [(k.key, k.start) for _, k, _, _ in expected.outputs["final-totals"]]
    assert len(windows) == len(set(windows)) >= 9  # one final result per closed window

    state = tmp_path / "split"
    first, sales, totals = final_totals_app("split", "memory://final-split", state)
    produce(first, sales, SALES[:31])
    await run_app(first, [totals])
    shutil.rmtree(state)
    second, sales, totals = final_totals_app("split", "memory://final-split", state)
    produce(second, sales, SALES[31:])
    result = await run_app(second, [totals])
    # Two tasks (one per input partition) write to each output partition, in an order
    # that depends on scheduling; each closed window's final result comes once, so the
    # sets per partition are what must match.
    assert ({p: sorted(rs, key=repr) for p, rs in result.by_partition("final-totals").items()}
            == {p: sorted(rs, key=repr)
                for p, rs in expected.by_partition("final-totals").items()})
    assert result.stores["final-store"] == expected.stores["final-store"]


def test_the_guides_final_results_example_runs_and_prints_what_it_says(
        capsys: pytest.CaptureFixture[str]) -> None:
    guide = Path(__file__).parents[2] / "docs" / "guides" / "windows-joins.md"
    text = guide.read_text()
    start = text.index("```python", text.index("## Final results"))
    code = text[start + len("```python"):text.index("```", start + 3)]
    expected = code.strip().splitlines()[-1].removeprefix("# ")
    exec(compile(code, str(guide), "exec"), {"__name__": "guide_example"})
    assert capsys.readouterr().out.strip() == expected


def test_joining_a_suppressed_table_is_refused_at_build_time_naming_it() -> None:
    app, clicks, _ = driver_app()
    stream = app.stream(clicks)
    held = stream.group_by_key().count().suppress(until_time_limit(1.0), name="held")
    with pytest.raises(TopologyError, match=r"'held'.*no store to read"):
        stream.join(held, lambda click, count: count)
