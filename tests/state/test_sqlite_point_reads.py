"""A SQLite store's reads see every applied write, whether its value is in the read cache,
the pending writes, the batch a flush is committing, or only the file (read on the event
loop's thread by the read-only connection); and ``apply_logged`` returns exactly the
changelog record ``changelog_record`` would, from one serialization.

Property: for random interleavings of writes (through ``apply_logged``), reads, flushes,
reads while a flush commits, kills (closed unflushed, opened again) and wipes, on a store
whose cache holds one entry (so reads reach the file), every read equals the model: the
applied writes, which a kill cuts back to the last flush and a wipe empties.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiostreams.serde import StrSerde
from aiostreams.state.base import TOMBSTONE, StoreContext
from aiostreams.state.overlay import logged_apply
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.state.window import SQLiteWindowStore

KEYS = st.sampled_from(["a", "b", "c"])
VALUES = st.one_of(st.text("xyz", max_size=3), st.just(TOMBSTONE))
OPS = st.lists(st.one_of(
    st.tuples(st.just("apply"), KEYS, VALUES),
    st.tuples(st.just("get"), KEYS, st.none()),
    st.tuples(st.sampled_from(["flush", "get_while_flushing", "kill", "wipe"]),
              KEYS, st.none()),
), max_size=40)


def make(windowed: bool) -> SQLiteKeyValueStore:
    if windowed:
        return SQLiteWindowStore("w", retention=3600.0, key_serde=StrSerde(),
                                 value_serde=StrSerde(), cache_size=1)
    return SQLiteKeyValueStore("s", StrSerde(), StrSerde(), cache_size=1)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, windowed=st.booleans())
def test_reads_see_every_applied_write_in_cache_buffers_or_file(
        ops: list[tuple[str, str, Any]], windowed: bool,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    def key_of(k: str) -> Any:
        return (k, 5.0) if windowed else k

    async def check() -> None:
        ctx = StoreContext("0_0", tmp_path_factory.mktemp("reads"), 0)
        store = make(windowed)
        await store.open(ctx)
        applied: dict[str, Any] = {}
        flushed: dict[str, Any] = {}
        try:
            for op, k, value in ops:
                key = key_of(k)
                if op == "apply":
                    expected = store.changelog_record(key, value)
                    assert store.apply_logged(key, value) == expected
                    applied[k] = value
                elif op == "get":
                    want = applied.get(k)
                    assert await store.get(key) == (None if want is TOMBSTONE else want)
                elif op == "flush":
                    await store.flush()
                    flushed = dict(applied)
                elif op == "get_while_flushing":
                    flush = asyncio.ensure_future(store.flush())
                    await asyncio.sleep(0)  # the flush has taken its batch
                    for other in "abc":
                        want = applied.get(other)
                        got = await store.get(key_of(other))
                        assert got == (None if want is TOMBSTONE else want)
                    await flush
                    flushed = dict(applied)
                elif op == "kill":
                    await store.close()
                    store = make(windowed)
                    await store.open(ctx)
                    applied = dict(flushed)
                else:
                    await store.wipe()
                    applied, flushed = {}, {}
        finally:
            await store.close()

    asyncio.run(check())


def test_a_subclass_that_overrides_apply_gets_its_apply_called() -> None:
    class Noting(SQLiteKeyValueStore):
        def apply(self, key: Any, value: Any) -> None:
            super().apply(key, value)

    assert logged_apply(Noting("n")) is None
    store = SQLiteKeyValueStore("s")
    assert logged_apply(store) == store.apply_logged
