"""The record cache of session- and sliding-window aggregates (``cache_max_bytes``), through
the test driver: a commit flushes each held session or window once; a session merge flushes
the tombstones of the sessions downstream had seen (and of none it had not) before the
merged session; the aggregate's own reads see the sessions held in the cache; and
``caching=False`` opts a store out; a join reads the held sessions. A cogroup's aggregators
share one store and cache, flushed once."""

from __future__ import annotations

from typing import Any

import pytest

from aiostreams import (
    App,
    SessionWindowedSerde,
    SessionWindows,
    SlidingWindows,
    TimeWindowedSerde,
    Topic,
    TumblingWindows,
    Windowed,
)
from aiostreams.errors import TopologyError
from aiostreams.processors.store_values import TimestampedSerde, kv_store_spec
from aiostreams.processors.tables import AggregateProcessor
from aiostreams.serde import JsonSerde, LongSerde, StrSerde
from aiostreams.testing.driver import TopologyTestDriver
from aiostreams.topology.topology import Topology
from aiostreams.transport.memory import MemoryBroker, MemoryTransport


def session_app(caching: bool = True, **settings: Any) -> App:
    app = App("sessions", transport=MemoryTransport(MemoryBroker()),
              commit_interval_ms=3_600_000, **settings)
    clicks = app.topic("clicks", key=str, value=int)
    out = app.topic("sessions", key=SessionWindowedSerde(str), value=int)
    (app.stream(clicks).group_by_key().windowed_by(SessionWindows(5.0, grace=100.0))
     .count(materialized="session-store", caching=caching).to_stream().to(out))
    return app


Out = tuple[str, float, float, Any]


async def _step(driver: TopologyTestDriver, times: list[float], commit: bool = True
                ) -> list[Out]:
    for ts in times:
        driver.pipe_input("clicks", "a", 1, ts)
    await driver.process_all()
    if commit:
        await driver.commit()
        await driver.process_all()
    return [(r.key.key, r.key.start, r.key.end, r.value)
            for r in driver.read_output("sessions")]


async def test_a_merge_flushes_the_tombstones_of_the_flushed_sessions_then_the_merged_one(
        ) -> None:
    async with TopologyTestDriver(session_app(cache_max_bytes=1_000_000)) as driver:
        assert await _step(driver, [1.0, 10.0]) == [("a", 1.0, 1.0, 1), ("a", 10.0, 10.0, 1)]
        # a@5 bridges both sessions; a@8 lands in the merged one
        out = await _step(driver, [5.0, 8.0])
        assert out == [("a", 1.0, 1.0, None), ("a", 10.0, 10.0, None), ("a", 1.0, 10.0, 4)]
        assert driver.store("session-store") == {("a", 10.0): (1.0, 4)}


async def test_a_session_made_and_merged_away_between_flushes_is_never_sent() -> None:
    async with TopologyTestDriver(session_app(cache_max_bytes=1_000_000)) as driver:
        # [20, 20], then [20, 22]: the first one never left the cache
        assert await _step(driver, [20.0, 22.0]) == [("a", 20.0, 22.0, 2)]


async def test_a_merge_that_keeps_the_end_and_moves_the_start_sends_the_old_tombstone(
        ) -> None:
    """The store keeps one session per (key, end): [10, 10] and [8, 10] share a slot, but
    downstream must still see [10, 10] removed."""
    async with TopologyTestDriver(session_app(cache_max_bytes=1_000_000)) as driver:
        assert await _step(driver, [10.0]) == [("a", 10.0, 10.0, 1)]
        assert await _step(driver, [8.0]) == [("a", 10.0, 10.0, None), ("a", 8.0, 10.0, 2)]


async def test_the_aggregate_merges_with_sessions_held_in_the_cache() -> None:
    async with TopologyTestDriver(session_app(cache_max_bytes=1_000_000)) as driver:
        out = await _step(driver, [1.0, 10.0, 5.0], commit=False)
        assert out == []  # all held
        assert driver.store("session-store") == {("a", 10.0): (1.0, 3)}  # read through it
        assert await _step(driver, []) == [("a", 1.0, 10.0, 3)]


async def test_caching_false_opts_a_session_store_out() -> None:
    async with TopologyTestDriver(session_app(caching=False,
                                              cache_max_bytes=1_000_000)) as driver:
        assert await _step(driver, [1.0, 3.0], commit=False) == [
            ("a", 1.0, 1.0, 1), ("a", 1.0, 1.0, None), ("a", 1.0, 3.0, 2)]


def sliding_app(**settings: Any) -> App:
    app = App("sliding", transport=MemoryTransport(MemoryBroker()),
              commit_interval_ms=3_600_000, **settings)
    clicks = app.topic("clicks", key=str, value=int)
    out = app.topic("windows", key=TimeWindowedSerde(str, size=5.0), value=int)
    (app.stream(clicks).group_by_key()
     .windowed_by(SlidingWindows.of_time_difference_and_grace(5.0, 100.0))
     .count(materialized="sliding-store").to_stream().to(out))
    return app


async def _sliding(app: App, times: list[float]) -> tuple[list[Out], dict[Any, Any]]:
    async with TopologyTestDriver(app) as driver:
        for ts in times:
            driver.pipe_input("clicks", "a", 1, ts)
        await driver.process_all()
        await driver.commit()
        await driver.process_all()
        return ([(r.key.key, r.key.start, r.key.end, r.value)
                 for r in driver.read_output("windows")], driver.store("sliding-store"))


async def test_a_sliding_window_count_sends_each_window_once_a_commit() -> None:
    times = [10.0, 12.0, 11.0, 20.0, 13.0]  # out of order, within grace
    plain, plain_store = await _sliding(sliding_app(), times)
    cached, cached_store = await _sliding(sliding_app(cache_max_bytes=1_000_000), times)
    assert cached_store == plain_store
    final = {(k, s, e): v for k, s, e, v in plain}
    assert len(cached) == len(final) < len(plain)
    assert {(k, s, e): v for k, s, e, v in cached} == final


async def test_a_join_reads_a_session_held_in_the_cache() -> None:
    """A stream-table join on a cached session table reads the held session (and not the
    one merged into it), as it reads a flushed one."""
    app = App("session-join", transport=MemoryTransport(MemoryBroker()),
              commit_interval_ms=3_600_000, cache_max_bytes=1_000_000)
    clicks = app.topic("clicks", key=str, value=int)
    asks = app.topic("asks", key=SessionWindowedSerde(str), value=str)
    answers = app.topic("answers", key=SessionWindowedSerde(str), value=str)
    sessions = (app.stream(clicks).group_by_key().windowed_by(SessionWindows(5.0, grace=100.0))
                .count(materialized="session-store"))
    app.stream(asks).left_join(sessions, lambda ask, n: f"{ask}:{n}").to(answers)
    async with TopologyTestDriver(app) as driver:
        for ts in (1.0, 3.0):
            driver.pipe_input("clicks", "a", 1, ts)
        await driver.process_all()
        task = next(t for t in driver.tasks.values() if "session-store" in t.stores)
        assert task.cached_entries("session-store")  # nothing flushed yet
        driver.pipe_input("asks", Windowed("a", 1.0, 3.0), "merged", 4.0)
        driver.pipe_input("asks", Windowed("a", 1.0, 1.0), "first", 4.0)
        await driver.process_all()
        assert [(r.key, r.value) for r in driver.read_output("answers")] == [
            (Windowed("a", 1.0, 3.0), "merged:2"), (Windowed("a", 1.0, 1.0), "first:None")]


def cogroup_app(windowed: bool, caching: bool = True, **settings: Any) -> App:
    """Deposits add, withdrawals subtract: two aggregators, one store, one cache."""
    app = App("cogroup", transport=MemoryTransport(MemoryBroker()),
              commit_interval_ms=3_600_000, **settings)
    deposits = app.topic("deposits", key=str, value=int)
    withdrawals = app.topic("withdrawals", key=str, value=int)
    cogrouped = (app.stream(deposits).group_by_key().cogroup(lambda k, v, acc: acc + v)
                 .cogroup(app.stream(withdrawals).group_by_key(), lambda k, v, acc: acc - v))
    if windowed:
        out = app.topic("balances", key=TimeWindowedSerde(str, size=10.0), value=int)
        (cogrouped.windowed_by(TumblingWindows(10.0))
         .aggregate(0, materialized="balances-store", value_serde=int, caching=caching)
         .to_stream().to(out))
    else:
        out = app.topic("balances", key=str, value=int)
        (cogrouped.aggregate(0, materialized="balances-store", value_serde=int,
                             caching=caching)
         .to_stream().to(out))
    return app


async def _balances(app: App) -> tuple[list[tuple[Any, int]], dict[Any, Any]]:
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input("deposits", "x", 5, 1.0)
        driver.pipe_input("withdrawals", "x", 2, 2.0)
        driver.pipe_input("deposits", "y", 1, 3.0)
        await driver.process_all()
        await driver.commit()
        await driver.process_all()
        return ([(r.key, r.value) for r in driver.read_output("balances")],
                driver.store("balances-store"))


async def test_a_cogroup_flushes_each_key_once_whichever_aggregator_made_it() -> None:
    for windowed in (False, True):
        out, store = await _balances(cogroup_app(windowed, cache_max_bytes=1_000_000))
        keys = [k.key if windowed else k for k, _ in out]
        assert (keys, [v for _, v in out]) == (["x", "y"], [3, 1]), windowed
        assert sorted(store.values()) == [1, 3]


async def test_caching_false_opts_a_cogroup_out() -> None:
    for windowed in (False, True):
        out, _ = await _balances(cogroup_app(windowed, caching=False,
                                             cache_max_bytes=1_000_000))
        assert [v for _, v in out] == [5, 3, 1], windowed


async def test_aggregates_sharing_a_cached_store_must_share_their_children() -> None:
    """One flush forwards a shared cache's entries for every node writing it: two nodes
    forwarding to different places are refused at start, with what to change."""
    topology = (
        Topology().add_source("src", Topic("in", StrSerde(), JsonSerde()))
        .add_processor("one", lambda: AggregateProcessor("s", lambda: 0,
                                                         lambda k, v, a: a + v), "src")
        .add_processor("two", lambda: AggregateProcessor("s", lambda: 0,
                                                         lambda k, v, a: a - v), "src")
        .add_store(kv_store_spec("s", persistent=False, key_serde=StrSerde(),
                                 value_serde=TimestampedSerde(LongSerde())), "one", "two")
        .add_sink("out1", Topic("o1", StrSerde(), JsonSerde()), "one")
        .add_sink("out2", Topic("o2", StrSerde(), JsonSerde()), "two"))
    with pytest.raises(TopologyError, match="caching=False"):
        async with TopologyTestDriver(topology, {"cache_max_bytes": 1000}):
            pass
