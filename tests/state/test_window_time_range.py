"""``fetch_all(time_from, time_to)``: every key's windows in a time range, served by a time
index on both window store backends (what emit-on-window-close reads), equal to a filter of
the full scan whatever the writes, deletes, restores and retention."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from statekit import WINDOW_IMPLS, MakeStore, collect, new_slot, retire, running

from aiostreams.serde import StrSerde
from aiostreams.state.base import TOMBSTONE, StoreContext
from aiostreams.state.overlay import StoreOverlay, WindowStoreView, view_for

KEYS = st.sampled_from(["a", "ab", "b", "b c", "z", "é"])
VALUES = st.one_of(st.integers(-5, 5), st.just(TOMBSTONE))
STARTS = st.integers(-3, 12).map(lambda i: i * 0.5)
OPS = st.lists(st.one_of(
    st.tuples(st.just("apply"), st.tuples(KEYS, STARTS), VALUES),
    st.tuples(st.just("restore"), st.tuples(KEYS, STARTS), VALUES),
    st.tuples(st.just("flush"), st.none(), st.none()),
), max_size=50)
BOUNDS = [(-math.inf, math.inf), (0.0, 2.0), (1.5, 1.5), (2.0, 1.0), (-1.0, 0.2),
          (4.0004, 5.9996)]


def by_start_then_key(entry: tuple[tuple[str, float], Any]) -> tuple[float, bytes]:
    (key, start), _ = entry
    return start, key.encode()


async def assert_ranges_filter_the_full_scan(store: Any) -> None:
    everything = await collect(store.range(None, None))
    for lo, hi in BOUNDS:
        lo_r, hi_r = round(lo * 1000) / 1000 if math.isfinite(lo) else lo, (
            round(hi * 1000) / 1000 if math.isfinite(hi) else hi)
        expected = sorted((e for e in everything if lo_r <= e[0][1] <= hi_r),
                          key=by_start_then_key)
        assert await collect(store.fetch_all(lo, hi)) == expected, (lo, hi)


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, retention=st.sampled_from([1.0, 2.5, 100.0]),
       impl=st.sampled_from(sorted(WINDOW_IMPLS)))
def test_time_range_equals_a_filter_of_the_full_scan(
        ops: list[tuple[str, Any, Any]], retention: float, impl: str,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    async def check() -> None:
        store = WINDOW_IMPLS[impl]("w", retention=retention, key_serde=StrSerde())
        await store.open(StoreContext("0_0", tmp_path_factory.mktemp("w"), 0))
        try:
            for op, key, value in ops:
                if op == "apply":
                    store.apply(key, value)
                elif op == "restore":
                    store.restore(*store.changelog_record(key, value))
                else:
                    await store.flush()
                    await assert_ranges_filter_the_full_scan(store)
            await assert_ranges_filter_the_full_scan(store)  # unflushed writes included
            await store.flush()
            await assert_ranges_filter_the_full_scan(store)
        finally:
            await store.close()

    asyncio.run(check())


async def test_time_range_is_in_start_then_key_bytes_order(make_window: MakeStore) -> None:
    store = await make_window(key_serde=StrSerde())
    for key, start in [("b", 2.0), ("ab", 1.0), ("a", 2.0), ("b", 1.0), ("a", 3.0)]:
        store.apply((key, start), f"{key}@{start}")
    await store.flush()
    store.apply(("aa", 2.0), "aa@2.0")  # unflushed: merged in order
    store.apply(("b c", 2.0), "b c@2.0")  # after "b": key bytes, not composite bytes
    assert [k for k, _ in await collect(store.fetch_all(1.0, 2.0))] == [
        ("ab", 1.0), ("b", 1.0), ("a", 2.0), ("aa", 2.0), ("b", 2.0), ("b c", 2.0)]


async def test_time_range_leaves_out_deleted_and_expired_windows(
        make_window: MakeStore) -> None:
    store = await make_window(retention=10.0)
    for start in (0.0, 5.0, 20.0):
        store.apply(("k", start), start)
    store.apply(("j", 5.0), "j")
    await store.flush()
    store.apply(("k", 5.0), TOMBSTONE)  # unflushed delete of a flushed window
    # retained from 20 - 10 = 10: the windows at 0 and 5 are expired
    assert await collect(store.fetch_all(-math.inf, math.inf)) == [(("k", 20.0), 20.0)]
    store.apply(("k", 25.0), 25.0)
    store.apply(("k", 25.0), TOMBSTONE)
    await store.flush()
    assert await collect(store.fetch_all(0.0, 30.0)) == [(("k", 20.0), 20.0)]


async def test_window_view_time_range_merges_buffered_writes(
        make_window: MakeStore) -> None:
    store = await make_window()
    view = view_for(StoreOverlay(store))
    assert isinstance(view, WindowStoreView)
    store.apply(("k", 1.0), "stored")
    store.apply(("gone", 1.0), "stored")
    store.apply(("late", 9.0), "outside")
    first = new_slot()
    with running(first):
        view.put("k", 1.0, "buffered")
        view.delete("gone", 1.0)
        view.put("new", 2.0, "buffered")
        view.put("out", 3.0, "outside")
        view.put("early", 0.999, "outside")
    got = sorted(await view.fetch_all(1.0, 2.0))  # both bounds inclusive
    assert got == [("k", 1.0, "buffered"), ("new", 2.0, "buffered")]
    retire(first)
    await store.flush()
    assert sorted(await view.fetch_all(1.0, 2.0)) == got
