"""Differential property: whatever the writes, restores and flushes, the SQLite stores
answer exactly as the in-memory ones (so ``persistent=True`` never changes results)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from statekit import collect

from aiostreams.serde import StrSerde
from aiostreams.state.base import TOMBSTONE, StoreContext
from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.state.window import InMemoryWindowStore, SQLiteWindowStore

KEYS = st.sampled_from(["a", "ab", "b", "b c", "z", "é"])
VALUES = st.one_of(st.integers(-5, 5), st.text(max_size=3), st.just(TOMBSTONE))
STARTS = st.integers(-3, 12).map(lambda i: i * 0.5)

KV_OPS = st.lists(st.one_of(
    st.tuples(st.just("apply"), KEYS, VALUES),
    st.tuples(st.just("restore"), KEYS, VALUES),
    st.tuples(st.just("flush"), st.none(), st.none()),
), max_size=40)

WINDOW_OPS = st.lists(st.one_of(
    st.tuples(st.just("apply"), st.tuples(KEYS, STARTS), VALUES),
    st.tuples(st.just("restore"), st.tuples(KEYS, STARTS), VALUES),
    st.tuples(st.just("flush"), st.none(), st.none()),
), max_size=40)

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


async def replay(stores: list[Any], ops: list[tuple[str, Any, Any]]) -> None:
    for op, key, value in ops:
        for store in stores:
            if op == "apply":
                store.apply(key, value)
            elif op == "restore":
                store.restore(*stores[0].changelog_record(key, value))
            else:
                await store.flush()


@SETTINGS
@given(ops=KV_OPS, cache_size=st.sampled_from([0, 2, 100]))
def test_sqlite_kv_store_answers_like_the_memory_store(
        ops: list[tuple[str, Any, Any]], cache_size: int,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    async def check() -> None:
        ctx = StoreContext("0_0", tmp_path_factory.mktemp("kv"), 0)
        memory = InMemoryKeyValueStore("s", StrSerde())
        sqlite = SQLiteKeyValueStore("s", StrSerde(), cache_size=cache_size)
        for store in (memory, sqlite):
            await store.open(ctx)
        try:
            await replay([memory, sqlite], ops)
            assert await collect(sqlite.range(None, None)) == await collect(
                memory.range(None, None))
            assert await collect(sqlite.range("ab", "b c")) == await collect(
                memory.range("ab", "b c"))
            for key in ["a", "ab", "b", "b c", "z", "é", "missing"]:
                assert await sqlite.get(key) == await memory.get(key)
        finally:
            for store in (memory, sqlite):
                await store.close()

    asyncio.run(check())


@SETTINGS
@given(ops=WINDOW_OPS, retention=st.sampled_from([1.0, 2.5, 100.0]))
def test_sqlite_window_store_answers_like_the_memory_store(
        ops: list[tuple[str, Any, Any]], retention: float,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    async def check() -> None:
        ctx = StoreContext("0_0", tmp_path_factory.mktemp("w"), 0)
        memory = InMemoryWindowStore("w", retention=retention, key_serde=StrSerde())
        sqlite = SQLiteWindowStore("w", retention=retention, key_serde=StrSerde(),
                                   cache_size=3)
        for store in (memory, sqlite):
            await store.open(ctx)
        try:
            await replay([memory, sqlite], ops)
            assert sqlite.retained_from == memory.retained_from
            assert await collect(sqlite.range(None, None)) == await collect(
                memory.range(None, None))
            for key in ["a", "ab", "b", "missing"]:
                for lo, hi in [(-math.inf, math.inf), (0.0, 2.0), (1.5, 1.5)]:
                    assert await collect(sqlite.fetch(key, lo, hi)) == await collect(
                        memory.fetch(key, lo, hi))
                for start in (-1.5, 0.0, 2.5, 6.0):
                    assert await sqlite.get((key, start)) == await memory.get((key, start))
            await sqlite.flush()
            await memory.flush()
            assert await sqlite.approximate_num_entries() == (
                await memory.approximate_num_entries())
        finally:
            for store in (memory, sqlite):
                await store.close()

    asyncio.run(check())


