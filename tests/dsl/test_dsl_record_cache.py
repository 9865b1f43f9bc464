"""The record cache (``cache_max_bytes``, Kafka Streams' KIP-63) of the DSL's aggregates,
through the test driver: updates of a key within a commit come out once, with the value the
store held before them; a tiny budget flushes early; the store and a join's reads see the
cached values; with the cache off every update comes out, as before."""

from __future__ import annotations

from typing import Any

import pytest

from aiostreams import App
from aiostreams.testing.driver import TopologyTestDriver
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.windows import SessionWindows, TimeWindowedSerde, TumblingWindows


def counting_app(**settings: Any) -> App:
    app = App("cached", transport=MemoryTransport(MemoryBroker()), **settings)
    clicks = app.topic("clicks", key=str, value=int)
    counts = app.topic("counts", key=str, value=int)
    (app.stream(clicks).group_by_key().count(materialized="counts-store")
     .to_stream().to(counts))
    return app


CLICKS = [("a", 1), ("b", 1), ("a", 1), ("a", 1), ("c", 1), ("b", 1)]


async def _pipe(driver: TopologyTestDriver, inputs: list[tuple[str, int]],
                start: float = 0.0) -> None:
    for i, (key, value) in enumerate(inputs):
        driver.pipe_input("clicks", key, value, start + i)
    await driver.process_all()


async def test_updates_of_a_key_within_a_commit_come_out_once_at_the_commit() -> None:
    app = counting_app(cache_max_bytes=10_000_000, commit_interval_ms=3_600_000)
    async with TopologyTestDriver(app) as driver:
        await _pipe(driver, CLICKS)
        assert driver.read_output("counts") == []  # nothing leaves before a flush
        # the store is read through its cache (as an interactive query would be)
        assert driver.store("counts-store") == {"a": 3, "b": 2, "c": 1}
        task = next(iter(driver.tasks.values()))
        assert await task.stores["counts-store"].approximate_num_entries() == 0
        await driver.commit()
        await driver.process_all()
        assert await task.stores["counts-store"].approximate_num_entries() == 3
        out = [(r.key, r.value, r.timestamp) for r in driver.read_output("counts")]
        # in the order of the keys' last updates (b, updated at 1 and 5, after c at 4, as
        # Kafka Streams' NamedCache moves a re-written key to the end), each with its
        # newest value and the timestamp of its last update
        assert out == [("a", 3, 3.0), ("c", 1, 4.0), ("b", 2, 5.0)]
        assert {k: v for k, v in driver.store("counts-store").items()} == {
            "a": 3, "b": 2, "c": 1}
        await _pipe(driver, [("a", 1)], start=10.0)
        await driver.commit()
        assert [(r.key, r.value) for r in driver.read_output("counts")] == [("a", 4)]


async def test_with_the_cache_off_every_update_comes_out_as_it_happens() -> None:
    app = counting_app(commit_interval_ms=3_600_000)
    async with TopologyTestDriver(app) as driver:
        await _pipe(driver, CLICKS)
        assert [(r.key, r.value) for r in driver.read_output("counts")] == [
            ("a", 1), ("b", 1), ("a", 2), ("a", 3), ("c", 1), ("b", 2)]


def old_values_app(**settings: Any) -> App:
    """A re-grouped count downstream of a cached count: its result is right only if each
    flushed update carries the value the store held before the entry became dirty (the
    subtractor takes the old value out of the old group)."""
    app = App("olds", transport=MemoryTransport(MemoryBroker()), **settings)
    clicks = app.topic("clicks", key=str, value=int)
    out = app.topic("per-count", key=int, value=int)
    (app.stream(clicks).group_by_key().count(materialized="per-key")
     .group_by(lambda k, n: (n, 1), key_serde=int, value_serde=int)
     .count(materialized="keys-per-count")
     .to_stream().to(out))
    return app


async def test_a_flushed_update_carries_the_value_before_it_became_dirty() -> None:
    final: dict[int, int] = {}
    async with TopologyTestDriver(old_values_app(cache_max_bytes=1_000_000,
                                                 commit_interval_ms=3_600_000)) as driver:
        await _pipe(driver, CLICKS)
        await driver.commit()
        await driver.process_all()
        await _pipe(driver, [("c", 1), ("c", 1), ("b", 1)], start=10.0)
        await driver.commit()
        await driver.process_all()
        await driver.commit()
        for r in driver.read_output("per-count"):
            final[r.key] = r.value
        cached_store = driver.store("keys-per-count")
    expected: dict[int, int] = {}
    async with TopologyTestDriver(old_values_app()) as driver:
        await _pipe(driver, CLICKS)
        await _pipe(driver, [("c", 1), ("c", 1), ("b", 1)], start=10.0)
        await driver.commit()
        for r in driver.read_output("per-count"):
            expected[r.key] = r.value
        assert cached_store == driver.store("keys-per-count")
    # a: 3, b: 3, c: 3 -> three keys with count 3, none with 1 or 2
    assert final == expected
    assert final[3] == 3 and final[1] == 0 and final[2] == 0


async def test_a_tiny_budget_flushes_before_the_commit() -> None:
    app = counting_app(cache_max_bytes=1, commit_interval_ms=3_600_000)
    async with TopologyTestDriver(app) as driver:
        await _pipe(driver, [("a", 1), ("a", 1), ("b", 1)])
        out = [(r.key, r.value) for r in driver.read_output("counts")]
        # every entry passes a 1-byte budget: each flushes right after its record
        assert out == [("a", 1), ("a", 2), ("b", 1)]


def join_app(**settings: Any) -> App:
    app = App("joined", transport=MemoryTransport(MemoryBroker()), **settings)
    clicks = app.topic("clicks", key=str, value=int)
    views = app.topic("views", key=str, value=str)
    out = app.topic("enriched", key=str, value=str)
    counts = app.stream(clicks).group_by_key().count(materialized="click-counts")
    (app.stream(views).join(counts, lambda view, n: f"{view}:{n}").to(out))
    return app


async def test_a_join_reads_the_cached_value_before_it_is_flushed() -> None:
    app = join_app(cache_max_bytes=10_000_000, commit_interval_ms=3_600_000)
    async with TopologyTestDriver(app) as driver:
        await _pipe(driver, [("a", 1), ("a", 1)])
        task = next(t for t in driver.tasks.values() if "click-counts" in t.stores)
        assert task.cached_entries("click-counts")  # still in the cache
        driver.pipe_input("views", "a", "home", 5.0)
        await driver.process_all()
        assert [(r.key, r.value) for r in driver.read_output("enriched")] == [
            ("a", "home:2")]


def windowed_app(**settings: Any) -> App:
    app = App("windows", transport=MemoryTransport(MemoryBroker()), **settings)
    clicks = app.topic("clicks", key=str, value=int)
    out = app.topic("window-counts", key=TimeWindowedSerde(str, size=10.0), value=int)
    (app.stream(clicks).group_by_key().windowed_by(TumblingWindows(10.0))
     .count(materialized="window-counts-store").to_stream().to(out))
    return app


async def test_a_windowed_count_emits_each_window_once_a_commit() -> None:
    app = windowed_app(cache_max_bytes=10_000_000, commit_interval_ms=3_600_000)
    async with TopologyTestDriver(app) as driver:
        for key, ts in [("a", 1.0), ("a", 2.0), ("b", 3.0), ("a", 11.0), ("a", 12.0)]:
            driver.pipe_input("clicks", key, 1, ts)
        await driver.process_all()
        assert driver.read_output("window-counts") == []
        await driver.commit()
        out = [(r.key.key, r.key.start, r.value, r.timestamp)
               for r in driver.read_output("window-counts")]
    assert out == [("a", 0.0, 2, 2.0), ("b", 0.0, 1, 3.0), ("a", 10.0, 2, 12.0)]


async def test_caching_false_opts_one_store_out() -> None:
    app = App("optout", transport=MemoryTransport(MemoryBroker()),
              cache_max_bytes=10_000_000, commit_interval_ms=3_600_000)
    clicks = app.topic("clicks", key=str, value=int)
    counts = app.topic("counts", key=str, value=int)
    (app.stream(clicks).group_by_key().count(caching=False).to_stream().to(counts))
    async with TopologyTestDriver(app) as driver:
        await _pipe(driver, [("a", 1), ("a", 1)])
        assert [(r.key, r.value) for r in driver.read_output("counts")] == [
            ("a", 1), ("a", 2)]


def table_join_app(**settings: Any) -> App:
    """A cached count joined table-table with a plain table, re-grouped and summed: the
    sum is right only if the join reads what the cached side has flushed (what downstream
    has seen), so each update's old result is the one downstream added before."""
    app = App("tt", transport=MemoryTransport(MemoryBroker()), **settings)
    clicks = app.topic("clicks", key=str, value=int)
    pages = app.topic("pages", key=str, value=str)
    out = app.topic("per-site", key=str, value=int)
    counts = app.stream(clicks).group_by_key().count(materialized="clicks-per-page")
    sites = app.table(pages, materialized="page-sites")
    (counts.join(sites, lambda n, site: (site, n))
     .group_by(lambda _page, site_n: site_n, key_serde=str, value_serde=int)
     .aggregate(0, lambda _s, n, total: total + n, lambda _s, n, total: total - n,
                materialized="clicks-per-site", value_serde=int)
     .to_stream().to(out))
    return app


async def _final_per_site(app: App, commits: bool) -> dict[str, int]:
    async with TopologyTestDriver(app) as driver:
        # a page's clicks arrive before the page itself (as a bid may be processed before
        # its auction on a real broker), then more clicks
        await _pipe(driver, [("p1", 1), ("p1", 1), ("p2", 1)])
        driver.pipe_input("pages", "p1", "s1", 5.0)
        driver.pipe_input("pages", "p2", "s1", 5.5)
        await driver.process_all()
        await _pipe(driver, [("p1", 1), ("p2", 1)], start=6.0)
        if commits:
            for _ in range(3):
                await driver.commit()
                await driver.process_all()
        final = {r.key: r.value for r in driver.read_output("per-site")}
        assert driver.store("clicks-per-site") == final
        return final


async def test_a_table_table_join_reads_the_flushed_value_of_a_cached_table() -> None:
    expected = await _final_per_site(table_join_app(), commits=False)
    assert expected == {"s1": 5}
    cached = await _final_per_site(table_join_app(cache_max_bytes=1_000_000,
                                                  commit_interval_ms=3_600_000), commits=True)
    assert cached == expected


async def test_a_grouped_table_aggregate_emits_each_group_once_a_commit() -> None:
    app = old_values_app(cache_max_bytes=1_000_000, commit_interval_ms=3_600_000)
    async with TopologyTestDriver(app) as driver:
        await _pipe(driver, CLICKS)
        await driver.commit()  # the per-key counts flush into the repartition topic
        await driver.process_all()
        assert driver.read_output("per-count") == []  # held in the group's cache
        await driver.commit()
        out = [(r.key, r.value) for r in driver.read_output("per-count")]
    # a: 3, b: 2, c: 1 -> one key in each of the groups 1, 2 and 3, each sent once
    assert sorted(out) == [(1, 1), (2, 1), (3, 1)]


async def test_caching_false_opts_a_grouped_table_aggregate_out() -> None:
    app = App("optout-table", transport=MemoryTransport(MemoryBroker()),
              cache_max_bytes=1_000_000, commit_interval_ms=3_600_000)
    clicks = app.topic("clicks", key=str, value=int)
    out = app.topic("per-count", key=int, value=int)
    (app.stream(clicks).group_by_key().count(caching=False)
     .group_by(lambda k, n: (n, 1), key_serde=int, value_serde=int)
     .count(caching=False).to_stream().to(out))
    async with TopologyTestDriver(app) as driver:
        await _pipe(driver, [("a", 1), ("a", 1)])
        assert [(r.key, r.value) for r in driver.read_output("per-count")] == [
            (1, 1), (1, 0), (2, 1)]


def regrouped_windows_app(windows: Any, **settings: Any) -> App:
    """Clicks counted per key and window, then re-grouped by window start and summed:
    the sum subtracts each window's old count, so it needs the windowed table's old
    values, cached or not."""
    app = App("regrouped", transport=MemoryTransport(MemoryBroker()), **settings)
    clicks = app.topic("clicks", key=str, value=int)
    totals = app.topic("totals", key=str, value=int)
    (app.stream(clicks).group_by_key().windowed_by(windows).count()
     .group_by(lambda wk, n: (str(wk.start), n), key_serde=str, value_serde=int)
     .reduce(lambda a, b: a + b, lambda a, b: a - b, materialized="per-window")
     .to_stream().to(totals))
    return app


@pytest.mark.parametrize("windows", [TumblingWindows(10.0), SessionWindows(3.0)],
                         ids=["tumbling", "session"])
@pytest.mark.parametrize("cache", [0, 10_000_000], ids=["uncached", "cached"])
async def test_a_regrouped_windowed_count_subtracts_the_windows_old_counts(
        windows: Any, cache: int) -> None:
    app = regrouped_windows_app(windows, cache_max_bytes=cache, commit_interval_ms=3_600_000)
    clicks = [("a", 0.0), ("b", 1.0), ("a", 2.0), ("a", 4.0), ("a", 3.0), ("b", 12.0),
              ("a", 13.0)]
    async with TopologyTestDriver(app) as driver:
        for i, (key, ts) in enumerate(clicks):
            driver.pipe_input("clicks", key, 1, timestamp=ts)
            await driver.process_all()
            if i in (2, 3):  # flushes between updates of a's first window: a window (or
                await driver.commit()  # session) the store holds is updated, then grows
        await driver.commit()  # the windowed counts' flush goes through the repartition...
        await driver.process_all()  # ... to the re-grouped sums
        store = driver.store("per-window")
    windowed = isinstance(windows, TumblingWindows)
    # every click counted once in the total of the window (or session) it ends up in
    assert sum(store.values()) == len(clicks)
    if windowed:
        assert store == {"0.0": 5, "10.0": 2}
    else:  # sessions a[0, 4], b[1, 1], b[12, 12], a[13, 13]
        assert store == {"0.0": 4, "1.0": 1, "12.0": 1, "13.0": 1}
