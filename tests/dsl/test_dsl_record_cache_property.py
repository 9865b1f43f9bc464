"""The record cache changes how many updates come out, never what they converge to: for
random inputs, commit points and budgets (and an async step upstream, so records execute
out of order), the cache-on run's emitted updates of each key are a subsequence of the
cache-off run's, its last update of each key is the cache-off run's last, and the stores
end equal - for a key-value aggregate, a re-grouped count fed by it (old values), and a
tumbling-window count; and, with out-of-order and late records, for session counts and
aggregates (merges included) and a sliding-window count.

The re-grouped count is held to its final values only: a flush sends each key once, in the
order of the keys' last updates (as Kafka Streams' cache does), not every update in record
order, so a group downstream may pass through a value the serial run never showed."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiostreams import App
from aiostreams.testing.driver import TopologyTestDriver
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.windows import (
    SessionWindowedSerde,
    SessionWindows,
    SlidingWindows,
    TimeWindowedSerde,
    TumblingWindows,
)

OUTS = ("sums", "per-sum", "window-counts")
STORES = ("sums-store", "per-sum-store", "window-store")


async def _identity(value: int) -> int:
    await asyncio.sleep(0)
    return value


def clicks_app(name: str, async_upstream: bool, **settings: Any) -> tuple[App, Any]:
    """An app committing only when told, and its stream of clicks (through an async step
    when ``async_upstream``, so records execute out of order)."""
    app = App(name, transport=MemoryTransport(MemoryBroker()),
              commit_interval_ms=3_600_000, **settings)
    stream = app.stream(app.topic("clicks", key=str, value=int))
    if async_upstream:
        stream = stream.map_values_async(_identity)
    return app, stream


def pipeline(async_upstream: bool, **settings: Any) -> App:
    app, stream = clicks_app("prop", async_upstream, **settings)
    sums = stream.group_by_key().aggregate(0, lambda k, v, acc: acc + v,
                                           materialized="sums-store", value_serde=int)
    sums.to_stream().to(app.topic("sums", key=str, value=int))
    (sums.group_by(lambda k, total: (total % 3, 1), key_serde=int, value_serde=int)
     .count(materialized="per-sum-store").to_stream()
     .to(app.topic("per-sum", key=int, value=int)))
    (stream.group_by_key().windowed_by(TumblingWindows(5.0))
     .count(materialized="window-store").to_stream()
     .to(app.topic("window-counts", key=TimeWindowedSerde(str, size=5.0), value=int)))
    return app


def _key(k: Any) -> Any:
    return (k.key, k.start) if hasattr(k, "start") else k


async def run(inputs: list[tuple[str, int, bool]], async_upstream: bool,
              budget: int) -> tuple[dict[str, dict[Any, list[Any]]], dict[str, dict[Any, Any]]]:
    app = pipeline(async_upstream, cache_max_bytes=budget)
    emitted: dict[str, dict[Any, list[Any]]] = {t: {} for t in OUTS}

    def read(driver: TopologyTestDriver) -> None:
        for topic in OUTS:
            for r in driver.read_output(topic):
                emitted[topic].setdefault(_key(r.key), []).append(r.value)

    async with TopologyTestDriver(app) as driver:
        for i, (key, value, commit_after) in enumerate(inputs):
            driver.pipe_input("clicks", key, value, float(i))
            if commit_after:
                await driver.process_all()
                await driver.commit()
                await driver.process_all()  # what the flush sent to the repartition topic
                read(driver)
        await driver.process_all()
        for _ in range(3):  # a flush feeds the re-grouped count's task: commit it too
            await driver.commit()
            await driver.process_all()
        read(driver)
        return emitted, flushed_stores(driver, STORES)


def flushed_stores(driver: TopologyTestDriver, names: tuple[str, ...]
                   ) -> dict[str, dict[Any, Any]]:
    """The stores ``names`` as of the driver's last snapshot; their caches must be empty
    (the last commit flushed them)."""
    for task in driver.tasks.values():
        for name in names:
            assert not task.cached_entries(name), "a commit left a cache dirty"
    return {name: driver.store(name) for name in names}


def is_subsequence(short: list[Any], long: list[Any]) -> bool:
    it = iter(long)
    return all(any(x == y for y in it) for x in short)


inputs_strategy = st.lists(
    st.tuples(st.sampled_from("abcde"), st.integers(-3, 5), st.booleans()),
    min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=inputs_strategy, async_upstream=st.booleans(),
       budget=st.sampled_from([1, 300, 700, 10_000_000]))
def test_cached_updates_are_a_subsequence_ending_in_the_uncached_final_values(
        inputs: list[tuple[str, int, bool]], async_upstream: bool, budget: int) -> None:
    plain_out, plain_stores = asyncio.run(run(inputs, async_upstream, 0))
    cached_out, cached_stores = asyncio.run(run(inputs, async_upstream, budget))
    # A group of the re-grouped count that only intermediate sums reached holds 0 (and
    # emitted a last 0) without the cache, and never appears with it (as in Kafka Streams)
    for stores in (plain_stores, cached_stores):
        stores["per-sum-store"] = {k: n for k, n in stores["per-sum-store"].items() if n}
    assert cached_stores == plain_stores
    for topic in OUTS:
        plain = plain_out[topic]
        for key, updates in cached_out[topic].items():
            assert updates[-1] == plain[key][-1], (topic, key)
            if topic != "per-sum":
                assert is_subsequence(updates, plain[key]), (topic, key)
        missing = {k: v[-1] for k, v in plain.items() if k not in cached_out[topic]}
        assert all(last == 0 for last in missing.values()) if topic == "per-sum" \
            else not missing, (topic, missing)


# -- session and sliding windows ---------------------------------------------------------

WINDOW_OUTS = ("session-counts", "session-sums", "sliding-counts")
WINDOW_STORES = ("session-count-store", "session-sum-store", "sliding-store")


def window_pipeline(async_upstream: bool, **settings: Any) -> App:
    """A session count, a session aggregate (merged by a sum) and a sliding-window count,
    each with a gap or time difference of 2 s and a grace of 3 s."""
    app, stream = clicks_app("window-prop", async_upstream, **settings)
    sessions = stream.group_by_key().windowed_by(SessionWindows(2.0, grace=3.0))
    session_key = SessionWindowedSerde(str)
    (sessions.count(materialized="session-count-store").to_stream()
     .to(app.topic("session-counts", key=session_key, value=int)))
    (sessions.aggregate(0, lambda k, v, acc: acc + v, lambda k, a, b: a + b,
                        materialized="session-sum-store", value_serde=int).to_stream()
     .to(app.topic("session-sums", key=session_key, value=int)))
    (stream.group_by_key().windowed_by(SlidingWindows.of_time_difference_and_grace(2.0, 3.0))
     .count(materialized="sliding-store").to_stream()
     .to(app.topic("sliding-counts", key=TimeWindowedSerde(str, size=2.0), value=int)))
    return app


async def run_windows(inputs: list[tuple[str, int, bool]], async_upstream: bool, budget: int
                      ) -> tuple[dict[str, dict[Any, list[Any]]], dict[str, dict[Any, Any]]]:
    """Each input is (key, seconds since the previous input's timestamp - negative: out
    of order, up to twice the grace -, commit after it)."""
    app = window_pipeline(async_upstream, cache_max_bytes=budget)
    emitted: dict[str, dict[Any, list[Any]]] = {t: {} for t in WINDOW_OUTS}

    def read(driver: TopologyTestDriver) -> None:
        for topic in WINDOW_OUTS:
            for r in driver.read_output(topic):
                emitted[topic].setdefault((r.key.key, r.key.start, r.key.end), []).append(
                    r.value)

    async with TopologyTestDriver(app) as driver:
        ts = 10.0
        for key, step, commit_after in inputs:
            ts = max(0.0, ts + step / 2)
            driver.pipe_input("clicks", key, 1, ts)
            if commit_after:
                await driver.process_all()
                await driver.commit()
                read(driver)
        await driver.process_all()
        await driver.commit()
        await driver.process_all()  # the store snapshot after the flush
        read(driver)
        return emitted, flushed_stores(driver, WINDOW_STORES)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=st.lists(st.tuples(st.sampled_from("abc"), st.integers(-12, 6), st.booleans()),
                       min_size=1, max_size=30),
       async_upstream=st.booleans(), budget=st.sampled_from([1, 500, 10_000_000]))
def test_cached_session_and_sliding_updates_end_in_the_uncached_final_values(
        inputs: list[tuple[str, int, bool]], async_upstream: bool, budget: int) -> None:
    """Out-of-order records (late ones too: the cache never shows a window the uncached run
    would not find) and session merges: the stores end equal; each window's cached updates
    are a subsequence of the uncached ones ending in the same value; a window the cached
    run never sent ended deleted in the uncached run (made and merged away, or removed,
    between two flushes)."""
    plain_out, plain_stores = asyncio.run(run_windows(inputs, async_upstream, 0))
    cached_out, cached_stores = asyncio.run(run_windows(inputs, async_upstream, budget))
    assert cached_stores == plain_stores
    for topic in WINDOW_OUTS:
        plain = plain_out[topic]
        for window, updates in cached_out[topic].items():
            assert updates[-1] == plain[window][-1], (topic, window)
            assert is_subsequence(updates, plain[window]), (topic, window)
        missing = {w: v[-1] for w, v in plain.items() if w not in cached_out[topic]}
        assert all(last is None for last in missing.values()), (topic, missing)
