"""The key-value store contract, run against every implementation (``kv_impl``)."""

from __future__ import annotations

from typing import Any

import pytest
from statekit import KV_IMPLS, MakeStore, collect

from aiostreams.serde import LongSerde, StrSerde
from aiostreams.state.base import TOMBSTONE, StoreKind


async def test_missing_key_reads_as_none(make_kv: MakeStore) -> None:
    store = await make_kv()
    assert await store.get("nobody") is None


async def test_applied_write_is_read_back(make_kv: MakeStore) -> None:
    store = await make_kv()
    store.apply("a", {"n": 1})
    assert await store.get("a") == {"n": 1}


async def test_later_write_replaces_earlier(make_kv: MakeStore) -> None:
    store = await make_kv()
    store.apply("a", 1)
    store.apply("a", 2)
    assert await store.get("a") == 2
    await store.flush()
    store.apply("a", 3)
    assert await store.get("a") == 3


async def test_tombstone_deletes_key(make_kv: MakeStore) -> None:
    store = await make_kv()
    store.apply("a", 1)
    await store.flush()
    store.apply("a", TOMBSTONE)
    assert await store.get("a") is None
    await store.flush()
    assert await store.get("a") is None
    assert await collect(store.range(None, None)) == []


async def test_tombstone_of_missing_key_is_harmless(make_kv: MakeStore) -> None:
    store = await make_kv()
    store.apply("ghost", TOMBSTONE)
    await store.flush()
    assert await store.get("ghost") is None


async def test_range_walks_str_keys_in_python_order_with_inclusive_bounds(
        make_kv: MakeStore) -> None:
    store = await make_kv(key_serde=StrSerde())
    keys = ["b", "a", "ab", "a!", "A", "é", "z", "a b"]
    for i, k in enumerate(keys):
        store.apply(k, i)
        if i == 3:
            await store.flush()  # some keys flushed, some pending
    everything = await collect(store.range(None, None))
    assert [k for k, _ in everything] == sorted(keys)
    assert dict(everything) == {k: i for i, k in enumerate(keys)}
    assert [k for k, _ in await collect(store.range("a", "b"))] == ["a", "a b", "a!", "ab", "b"]
    assert [k for k, _ in await collect(store.range("b", None))] == ["b", "z", "é"]
    assert [k for k, _ in await collect(store.range(None, "A"))] == ["A"]
    assert await collect(store.range("z", "a")) == []


async def test_range_orders_by_serialized_key_not_python_value(make_kv: MakeStore) -> None:
    # JSON ints order as text ("10" < "9"); LongSerde puts negatives after positives.
    # Both implementations agree, so persistence never changes what range returns.
    json_store = await make_kv(name="json")
    long_store = await make_kv(name="long", key_serde=LongSerde())
    for k in (9, 10, -1, 2):
        json_store.apply(k, k)
        long_store.apply(k, k)
    assert [k for k, _ in await collect(json_store.range(None, None))] == [-1, 10, 2, 9]
    assert [k for k, _ in await collect(long_store.range(None, None))] == [2, 9, 10, -1]


async def test_range_skips_deleted_keys(make_kv: MakeStore) -> None:
    store = await make_kv(key_serde=StrSerde())
    for k in "abcd":
        store.apply(k, k)
    await store.flush()
    store.apply("b", TOMBSTONE)
    store.apply("e", "e")
    store.apply("e", TOMBSTONE)
    assert await collect(store.range(None, None)) == [("a", "a"), ("c", "c"), ("d", "d")]


async def test_changelog_record_of_a_delete_has_null_value(make_kv: MakeStore) -> None:
    store = await make_kv(key_serde=StrSerde())
    assert store.changelog_record("k", TOMBSTONE) == (b"k", None)
    assert store.changelog_record("k", {"x": [1, 2]}) == (b"k", b'{"x":[1,2]}')


@pytest.mark.parametrize("target", sorted(KV_IMPLS))
async def test_changelog_records_restore_the_same_state(
        make_kv: MakeStore, open_store: MakeStore, target: str) -> None:
    source = await make_kv(name="source")
    changelog: list[tuple[bytes | None, bytes | None]] = []
    writes: list[tuple[Any, Any]] = [
        ("a", 1), ("b", {"deep": [1, "x"]}), ("a", 2), ("c", "text"), ("b", TOMBSTONE),
        ("d", 4.5), ("d", TOMBSTONE), ("e", True),
    ]
    for key, value in writes:
        source.apply(key, value)
        changelog.append(source.changelog_record(key, value))
    restored = await open_store(KV_IMPLS[target], "restored")
    for key_bytes, value_bytes in changelog:
        restored.restore(key_bytes, value_bytes)
    await restored.flush()
    assert await collect(restored.range(None, None)) == await collect(source.range(None, None))
    assert await restored.get("a") == 2
    assert await restored.get("b") is None


async def test_restored_record_replaces_applied_value(make_kv: MakeStore) -> None:
    store = await make_kv()
    store.apply("a", 1)
    assert await store.get("a") == 1  # now cached, in a store with a cache
    store.restore(b'"a"', b"2")
    assert await store.get("a") == 2
    store.restore(b'"a"', None)
    assert await store.get("a") is None


async def test_restore_refuses_a_null_key(make_kv: MakeStore) -> None:
    store = await make_kv()
    with pytest.raises(ValueError, match="null key"):
        store.restore(None, b"1")


async def test_none_key_has_no_sort_key(make_kv: MakeStore) -> None:
    store = await make_kv()
    with pytest.raises(ValueError, match="cannot be None"):
        store.sort_key(None)


async def test_approximate_num_entries_counts_flushed_entries(make_kv: MakeStore) -> None:
    store = await make_kv()
    for i in range(5):
        store.apply(f"k{i}", i)
    store.apply("k0", TOMBSTONE)
    await store.flush()
    assert await store.approximate_num_entries() == 4


async def test_wipe_discards_everything_and_leaves_store_fresh_and_usable(
        make_kv: MakeStore) -> None:
    store = await make_kv()
    store.apply("a", 1)
    await store.flush()
    store.apply("b", 2)
    await store.wipe()
    assert store.fresh
    assert await store.get("a") is None
    assert await store.get("b") is None
    store.apply("c", 3)
    await store.flush()
    assert await collect(store.range(None, None)) == [("c", 3)]


async def test_store_declares_its_kind_and_persistence(make_kv: MakeStore) -> None:
    store = await make_kv()
    assert store.kind is StoreKind.KEY_VALUE
    assert store.persistent is (type(store) is KV_IMPLS["sqlite"])
