"""The window store contract, run against every implementation (``window_impl``), and the
composite key encoding."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statekit import WINDOW_IMPLS, MakeStore, collect

from aiostreams.errors import ConfigError
from aiostreams.serde import BytesSerde, StrSerde
from aiostreams.state.base import TOMBSTONE, StoreContext, StoreKind
from aiostreams.state.window import (
    InMemoryWindowStore,
    SQLiteWindowStore,
    decode_window_key,
    encode_window_key,
    normalize_window_start,
    window_start_ms,
)

MS = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(key=st.binary(max_size=6), a=MS, b=MS)
def test_composite_key_bytes_order_by_start_within_a_key(key: bytes, a: int, b: int) -> None:
    assert (encode_window_key(key, a) < encode_window_key(key, b)) == (a < b)


@given(key_a=st.binary(min_size=4, max_size=4), key_b=st.binary(min_size=4, max_size=4),
       a=MS, b=MS)
def test_composite_key_bytes_order_by_key_first(key_a: bytes, key_b: bytes, a: int,
                                                b: int) -> None:
    assert ((encode_window_key(key_a, a) < encode_window_key(key_b, b))
            == ((key_a, a) < (key_b, b)))


@given(key=st.binary(max_size=10), ms=MS)
def test_composite_key_decodes_to_what_was_encoded(key: bytes, ms: int) -> None:
    assert decode_window_key(encode_window_key(key, ms)) == (key, ms)


def test_window_starts_are_kept_to_the_millisecond() -> None:
    assert normalize_window_start(0.1 + 0.2) == 0.3
    assert window_start_ms(1.0004) == 1000
    assert window_start_ms(-2.5) == -2500
    for bad in (math.nan, math.inf, "soon"):
        with pytest.raises(ValueError, match="finite float seconds"):
            window_start_ms(bad)  # type: ignore[arg-type]


async def test_fetch_returns_windows_of_the_key_in_bounds_in_start_order(
        make_window: MakeStore) -> None:
    store = await make_window()
    for start in (30.0, 10.0, 20.0, 40.0):
        store.apply(("user", start), {"start": start})
    store.apply(("other", 20.0), "not mine")
    await store.flush()
    store.apply(("user", 25.0), "pending")
    assert await collect(store.fetch("user", 10.0, 30.0)) == [
        (10.0, {"start": 10.0}), (20.0, {"start": 20.0}), (25.0, "pending"),
        (30.0, {"start": 30.0}),
    ]
    assert await collect(store.fetch("user", 10.5, 19.999)) == []
    assert await collect(store.fetch("user", -math.inf, math.inf)) == [
        (10.0, {"start": 10.0}), (20.0, {"start": 20.0}), (25.0, "pending"),
        (30.0, {"start": 30.0}), (40.0, {"start": 40.0}),
    ]
    assert await collect(store.fetch("nobody", 0.0, 100.0)) == []


async def test_fetch_bounds_are_rounded_to_the_millisecond_like_starts(
        make_window: MakeStore) -> None:
    store = await make_window()
    store.apply(("k", 0.3), "w")
    assert await collect(store.fetch("k", 0.1 + 0.2, 0.3)) == [(0.3, "w")]
    assert await collect(store.fetch("k", 0.3004, 0.3004)) == [(0.3, "w")]  # rounds to 0.3
    assert await collect(store.fetch("k", 0.3006, 1.0)) == []
    assert await collect(store.fetch("k", 0.0, 0.2994)) == []


async def test_fetch_does_not_return_windows_of_a_key_whose_bytes_extend_this_one(
        make_window: MakeStore) -> None:
    # b"a" + 8 bytes sorts between ("a", 0 ms) and ("a", 1 ms) once encoded.
    store = await make_window(key_serde=BytesSerde())
    longer = b"a\x80" + bytes(7)
    store.apply((b"a", 0.0), "a at 0")
    store.apply((b"a", 0.001), "a at 1ms")
    store.apply((longer, 5.0), "not a")
    await store.flush()
    assert await collect(store.fetch(b"a", 0.0, 10.0)) == [(0.0, "a at 0"),
                                                           (0.001, "a at 1ms")]


async def test_get_and_delete_address_one_window(make_window: MakeStore) -> None:
    store = await make_window()
    store.apply(("k", 60.0), 1)
    store.apply(("k", 120.0), 2)
    assert await store.get(("k", 60.0)) == 1
    await store.flush()
    store.apply(("k", 60.0), TOMBSTONE)
    assert await store.get(("k", 60.0)) is None
    assert await store.get(("k", 120.0)) == 2
    await store.flush()
    assert await collect(store.fetch("k", 0.0, 200.0)) == [(120.0, 2)]


async def test_windows_older_than_retention_are_never_returned_and_dropped_at_flush(
        make_window: MakeStore) -> None:
    store = await make_window(retention=100.0)
    store.apply(("k", 0.0), "old")
    store.apply(("k", 50.0), "kept")
    await store.flush()
    assert store.retained_from == -50.0
    store.apply(("j", 150.0), "newest")  # moves the line to 50.0
    assert store.retained_from == 50.0
    assert await store.get(("k", 0.0)) is None
    assert await collect(store.fetch("k", -math.inf, math.inf)) == [(50.0, "kept")]
    assert await collect(store.range(None, None)) == [(("j", 150.0), "newest"),
                                                      (("k", 50.0), "kept")]
    await store.flush()
    assert await store.approximate_num_entries() == 2


async def test_write_to_an_expired_window_is_ignored(make_window: MakeStore) -> None:
    store = await make_window(retention=10.0)
    store.apply(("k", 100.0), "now")
    store.apply(("k", 80.0), "late")
    store.restore(*store.changelog_record(("j", 85.0), "late too"))
    await store.flush()
    assert await store.get(("k", 80.0)) is None
    assert await collect(store.range(None, None)) == [(("k", 100.0), "now")]


async def test_range_walks_composite_keys_in_key_then_start_order(
        make_window: MakeStore) -> None:
    store = await make_window(key_serde=StrSerde())
    for key, start in [("b", 1.0), ("a", 2.0), ("a", -1.0), ("b", 0.5)]:
        store.apply((key, start), f"{key}@{start}")
    assert [k for k, _ in await collect(store.range(None, None))] == [
        ("a", -1.0), ("a", 2.0), ("b", 0.5), ("b", 1.0)]
    assert [k for k, _ in await collect(store.range(("a", 0.0), ("b", 0.5)))] == [
        ("a", 2.0), ("b", 0.5)]


@pytest.mark.parametrize("target", sorted(WINDOW_IMPLS))
async def test_changelog_records_restore_the_same_windows(
        make_window: MakeStore, open_store: MakeStore, target: str) -> None:
    source = await make_window(name="source")
    changelog = []
    writes: list[tuple[Any, Any]] = [
        (("a", 0.0), 1), (("a", 60.0), {"n": 2}), (("b", -60.0), "neg"), (("a", 0.0), 3),
        (("b", -60.0), TOMBSTONE), (("c", 1.5), [1]),
    ]
    for key, value in writes:
        source.apply(key, value)
        changelog.append(source.changelog_record(key, value))
    assert changelog[0] == (b'"a"' + (2**63).to_bytes(8, "big"), b"1")
    restored = await open_store(WINDOW_IMPLS[target], "restored", retention=3600.0)
    for key_bytes, value_bytes in changelog:
        restored.restore(key_bytes, value_bytes)
    await restored.flush()
    assert await collect(restored.range(None, None)) == await collect(source.range(None, None))
    assert await collect(restored.fetch("a", 0.0, 60.0)) == [(0.0, 3), (60.0, {"n": 2})]


async def test_store_declares_window_kind(make_window: MakeStore) -> None:
    store = await make_window()
    assert store.kind is StoreKind.WINDOW
    assert store.retention == 3600.0


@pytest.mark.parametrize("retention", [0, -1.0, math.inf, math.nan, "1h", True])
def test_retention_must_be_positive_seconds(retention: Any) -> None:
    for impl in (InMemoryWindowStore, SQLiteWindowStore):
        with pytest.raises(ConfigError, match="retention must be positive float seconds"):
            impl("w", retention=retention)


async def test_composite_key_must_be_key_and_start(make_window: MakeStore) -> None:
    store = await make_window()
    with pytest.raises(ValueError, match=r"takes \(key, window_start\) keys"):
        store.apply("just a key", 1)


async def test_sqlite_windows_and_retention_line_survive_reopen(
        context: StoreContext, state_dir: Path) -> None:
    first = SQLiteWindowStore("w", retention=100.0)
    await first.open(context)
    first.apply(("k", 10.0), "a")
    first.apply(("k", 200.0), "b")
    await first.flush()
    await first.close()
    second = SQLiteWindowStore("w", retention=100.0)
    await second.open(context)
    try:
        assert second.retained_from == 100.0
        assert await collect(second.fetch("k", 0.0, 1000.0)) == [(200.0, "b")]
        second.apply(("k", 50.0), "expired on arrival")
        assert await second.get(("k", 50.0)) is None
    finally:
        await second.close()


async def test_sqlite_retention_deletes_rows_from_the_file(open_store: MakeStore) -> None:
    import sqlite3

    store = await open_store(SQLiteWindowStore, "w", retention=10.0)
    for start in range(0, 100, 5):
        store.apply(("k", float(start)), start)
    await store.flush()
    conn = sqlite3.connect(store.path)
    try:
        assert conn.execute("SELECT count(*) FROM kv").fetchone()[0] == 3  # 85, 90, 95
    finally:
        conn.close()
