"""What only the in-memory stores do (the shared contract is in test_kv_store_contract.py)."""

from __future__ import annotations

from statekit import MakeStore

from aiostreams.serde import IntSerde, JsonSerde, StrSerde
from aiostreams.state.base import TOMBSTONE
from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.state.window import InMemoryWindowStore


def test_serdes_default_to_json() -> None:
    store = InMemoryKeyValueStore("s")
    assert store.key_serde == JsonSerde()
    assert store.value_serde == JsonSerde()
    assert store.persistent is False


async def test_snapshot_is_a_copy_of_the_applied_state(open_store: MakeStore) -> None:
    store = await open_store(InMemoryKeyValueStore, "s")
    store.apply("a", 1)
    store.apply("b", 2)
    store.apply("b", TOMBSTONE)
    snapshot = store.snapshot()
    assert snapshot == {"a": 1}
    snapshot["c"] = 3
    assert store.snapshot() == {"a": 1}


async def test_applied_values_are_kept_as_python_objects(open_store: MakeStore) -> None:
    store = await open_store(InMemoryKeyValueStore, "s")
    value = ("a", "tuple")  # JSON would read it back as a list
    store.apply(("composite", 1), value)
    assert await store.get(("composite", 1)) is value


async def test_restore_decodes_with_the_stores_serdes(open_store: MakeStore) -> None:
    store = await open_store(InMemoryKeyValueStore, "s", StrSerde(), IntSerde())
    store.restore(b"k", b"\x00\x00\x01\x00")
    assert store.snapshot() == {"k": 256}
    assert store.changelog_record("k", 256) == (b"k", b"\x00\x00\x01\x00")


async def test_window_snapshot_lists_retained_windows(open_store: MakeStore) -> None:
    store = await open_store(InMemoryWindowStore, "w", retention=10.0)
    store.apply(("k", 0.0), "expired soon")
    store.apply(("k", 15.0), "kept")
    assert store.snapshot() == {("k", 15.0): "kept"}
    await store.flush()
    assert await store.approximate_num_entries() == 1
