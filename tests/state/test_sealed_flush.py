"""Sealed flushes (exactly-once): a store file holds exactly what the last completed
``flush_sealed`` set apart at its ``seal`` - never a write applied after the seal - with the
mark written in the same SQLite transaction; reads see every applied write meanwhile.

Property: for random interleavings of writes, seals, sealed flushes and kills (the store
closed without flushing, then opened again from its file), the file always equals the model
of what was sealed at the last completed sealed flush, and the mark is that flush's.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from statekit import collect

from aiostreams.serde import StrSerde
from aiostreams.state.base import TOMBSTONE, StoreContext
from aiostreams.state.changelog_mark import ChangelogMark
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.state.window import SQLiteWindowStore

KEYS = st.sampled_from(["a", "b", "c", "d"])
VALUES = st.one_of(st.integers(0, 9), st.just(TOMBSTONE))
OPS = st.lists(st.one_of(
    st.tuples(st.just("apply"), KEYS, VALUES),
    st.tuples(st.just("seal"), st.none(), st.none()),
    st.tuples(st.just("flush_sealed"), st.none(), st.none()),
    st.tuples(st.just("kill"), st.none(), st.none()),
), max_size=40)


def mark(n: int) -> ChangelogMark:
    return ChangelogMark("app-s-changelog", 0, n, 3)


def applied_state(model: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sorted(model.items()) if v is not TOMBSTONE}


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_the_file_holds_exactly_the_last_flushed_seal(
        ops: list[tuple[str, Any, Any]], tmp_path_factory: pytest.TempPathFactory) -> None:
    async def check() -> None:
        ctx = StoreContext("0_0", tmp_path_factory.mktemp("sealed"), 0)
        store = SQLiteKeyValueStore("s", StrSerde())
        await store.open(ctx)
        applied: dict[str, Any] = {}   # what reads see
        sealed: dict[str, Any] | None = None
        on_file: dict[str, Any] = {}   # what the file must hold
        flushes = 0
        try:
            for op, key, value in ops:
                if op == "apply":
                    store.apply(key, value)
                    applied[key] = value
                elif op == "seal":
                    store.seal()
                    sealed = dict(applied)
                elif op == "flush_sealed":
                    flushes += 1
                    await store.flush_sealed(mark(flushes))
                    if sealed is not None:
                        on_file = sealed
                    sealed = None
                else:  # killed: what was not flushed is gone
                    await store.close()
                    store = SQLiteKeyValueStore("s", StrSerde())
                    await store.open(ctx)
                    applied, sealed = dict(on_file), None
                    assert await collect(store.range(None, None)) == list(
                        applied_state(on_file).items())
                    assert store.changelog_mark == (mark(flushes) if flushes else None)
                assert await collect(store.range(None, None)) == list(
                    applied_state(applied).items())
        finally:
            await store.close()

    asyncio.run(check())


async def test_writes_after_the_seal_stay_pending_and_are_read(tmp_path: Any) -> None:
    ctx = StoreContext("0_0", tmp_path, 0)
    store = SQLiteKeyValueStore("s", StrSerde())
    await store.open(ctx)
    store.apply("a", 1)
    store.seal()
    store.apply("a", 2)  # the next transaction's
    store.apply("b", 3)
    await store.flush_sealed(mark(7))
    assert await store.get("a") == 2 and await store.get("b") == 3
    assert store.pending_writes == 2
    await store.close()
    again = SQLiteKeyValueStore("s", StrSerde())
    await again.open(ctx)
    try:
        assert await collect(again.range(None, None)) == [("a", 1)]
        assert again.changelog_mark == mark(7)
    finally:
        await again.close()


async def test_a_sealed_flush_drops_windows_only_below_the_sealed_retention_line(
        tmp_path: Any) -> None:
    ctx = StoreContext("0_0", tmp_path, 0)
    store = SQLiteWindowStore("w", retention=10.0, key_serde=StrSerde())
    await store.open(ctx)
    store.apply(("a", 0.0), 1)
    await store.flush_sealed(None)
    store.apply(("a", 5.0), 2)
    store.seal()
    store.apply(("a", 100.0), 3)  # a later transaction's: moves the retention line past 0
    await store.flush_sealed(mark(1))
    await store.close()
    again = SQLiteWindowStore("w", retention=10.0, key_serde=StrSerde())
    await again.open(ctx)
    try:
        assert await collect(again.fetch("a", 0.0, 200.0)) == [(0.0, 1), (5.0, 2)]
    finally:
        await again.close()
