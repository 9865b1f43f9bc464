"""What only the SQLite store does: files, write-back, the read cache, failures."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from statekit import MakeStore, collect

from aiostreams.errors import ConfigError, SerializationError
from aiostreams.serde import StrSerde
from aiostreams.state.base import TOMBSTONE, StoreContext, StoreStateError
from aiostreams.state.sqlite import SQLiteKeyValueStore


def rows_on_disk(path: Path) -> dict[bytes, bytes]:
    """What another connection reads from the file: committed state only."""
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT k, v FROM kv ORDER BY k").fetchall())
    finally:
        conn.close()


async def test_file_is_state_dir_task_id_store_name(open_store: MakeStore,
                                                    state_dir: Path) -> None:
    store = await open_store(SQLiteKeyValueStore, "counts")
    assert store.path == state_dir / "1_0" / "counts.sqlite"
    assert store.path.exists()


async def test_missing_state_dir_is_a_config_error_saying_to_set_it() -> None:
    store = SQLiteKeyValueStore("counts")
    with pytest.raises(ConfigError, match="set `state_dir`"):
        await store.open(StoreContext("1_0", None, 0))


async def test_file_uses_wal_and_synchronous_full(open_store: MakeStore) -> None:
    store = await open_store(SQLiteKeyValueStore, "s")
    db = store._db
    assert (await db.execute_fetchall("PRAGMA journal_mode"))[0][0] == "wal"
    # FULL: a flushed commit survives power loss, so a checkpoint never overstates the file
    assert (await db.execute_fetchall("PRAGMA synchronous"))[0][0] == 2


async def test_write_is_visible_at_once_and_on_disk_only_after_flush(
        open_store: MakeStore) -> None:
    store = await open_store(SQLiteKeyValueStore, "s", StrSerde())
    store.apply("a", 1)
    assert await store.get("a") == 1
    assert rows_on_disk(store.path) == {}
    await store.flush()
    assert rows_on_disk(store.path) == {b"a": b"1"}
    store.apply("a", TOMBSTONE)
    assert await store.get("a") is None
    assert rows_on_disk(store.path) == {b"a": b"1"}
    await store.flush()
    assert rows_on_disk(store.path) == {}


async def test_flushed_writes_survive_close_and_reopen_by_a_new_instance(
        context: StoreContext) -> None:
    first = SQLiteKeyValueStore("s")
    await first.open(context)
    assert first.fresh
    first.apply("a", {"n": 1})
    first.apply("b", [1, 2])
    await first.flush()
    await first.close()

    second = SQLiteKeyValueStore("s")
    await second.open(context)
    try:
        assert not second.fresh
        assert await second.get("a") == {"n": 1}
        assert await collect(second.range(None, None)) == [("a", {"n": 1}), ("b", [1, 2])]
    finally:
        await second.close()


async def test_close_discards_writes_not_flushed(context: StoreContext) -> None:
    first = SQLiteKeyValueStore("s")
    await first.open(context)
    first.apply("committed", 1)
    await first.flush()
    first.apply("uncommitted", 2)
    await first.close()

    second = SQLiteKeyValueStore("s")
    await second.open(context)
    try:
        assert await collect(second.range(None, None)) == [("committed", 1)]
    finally:
        await second.close()


async def test_flush_of_many_writes_is_one_transaction(open_store: MakeStore) -> None:
    store = await open_store(SQLiteKeyValueStore, "s")
    statements: list[str] = []
    await store._db.set_trace_callback(statements.append)
    for i in range(1000):
        store.apply(f"k{i}", i)
    for i in range(0, 1000, 10):
        store.apply(f"k{i}", TOMBSTONE)
    await store.flush()
    assert sum(s.startswith("COMMIT") for s in statements) == 1
    assert sum(s.startswith("BEGIN") for s in statements) == 1
    assert await store.approximate_num_entries() == 900


async def test_flush_with_nothing_pending_touches_nothing(open_store: MakeStore) -> None:
    store = await open_store(SQLiteKeyValueStore, "s")
    statements: list[str] = []
    await store._db.set_trace_callback(statements.append)
    await store.flush()
    assert statements == []


async def test_evicted_write_is_read_from_pending_then_from_file(
        open_store: MakeStore) -> None:
    store = await open_store(SQLiteKeyValueStore, "s", cache_size=1)
    store.apply("a", 1)
    store.apply("b", 2)  # evicts a from the cache; a is still pending
    assert await store.get("a") == 1
    await store.flush()
    store.apply("c", 3)  # evicts again
    assert await store.get("a") == 1  # from the file
    assert await store.get("b") == 2


async def test_uncached_read_of_a_reopened_store_comes_from_the_file(
        context: StoreContext) -> None:
    first = SQLiteKeyValueStore("s", cache_size=0)
    await first.open(context)
    first.apply("a", "x")
    await first.flush()
    await first.close()
    second = SQLiteKeyValueStore("s", cache_size=0)
    await second.open(context)
    try:
        assert await second.get("a") == "x"
        assert await second.get("missing") is None
    finally:
        await second.close()


async def test_read_cache_is_bounded(open_store: MakeStore) -> None:
    store = await open_store(SQLiteKeyValueStore, "s", cache_size=10)
    for i in range(100):
        store.apply(i, i)
    await store.flush()
    for i in range(100):
        assert await store.get(i) == i
    assert len(store._cache) == 10


async def test_restore_buffers_records_until_flush(open_store: MakeStore) -> None:
    store = await open_store(SQLiteKeyValueStore, "s", StrSerde())
    store.restore(b"a", b"1")
    store.restore(b"b", b"2")
    store.restore(b"a", None)
    assert await store.get("b") == 2
    assert rows_on_disk(store.path) == {}
    await store.flush()
    assert rows_on_disk(store.path) == {b"b": b"2"}


async def test_range_merges_pending_writes_with_the_file(open_store: MakeStore) -> None:
    store = await open_store(SQLiteKeyValueStore, "s", StrSerde())
    for k in "acegi":
        store.apply(k, f"old-{k}")
    await store.flush()
    store.apply("b", "new-b")  # between file rows
    store.apply("c", "new-c")  # replaces a file row
    store.apply("e", TOMBSTONE)  # deletes a file row
    store.apply("z", "new-z")  # after every file row
    assert await collect(store.range(None, None)) == [
        ("a", "old-a"), ("b", "new-b"), ("c", "new-c"), ("g", "old-g"), ("i", "old-i"),
        ("z", "new-z"),
    ]
    assert await collect(store.range("b", "e")) == [("b", "new-b"), ("c", "new-c")]


async def test_range_walks_more_rows_than_one_page(open_store: MakeStore) -> None:
    store = await open_store(SQLiteKeyValueStore, "s", StrSerde())
    keys = [f"{i:05d}" for i in range(1300)]
    for k in keys:
        store.apply(k, k)
    await store.flush()
    store.apply("00600", "changed")
    assert [k for k, _ in await collect(store.range(None, None))] == keys
    assert dict(await collect(store.range("00599", "00601")))["00600"] == "changed"


async def test_value_the_serde_refuses_fails_at_apply_naming_the_store(
        open_store: MakeStore) -> None:
    store = await open_store(SQLiteKeyValueStore, "s")
    with pytest.raises(SerializationError) as caught:
        store.apply("a", object())
    assert caught.value.topic == "s"
    assert await store.get("a") is None


async def test_unreadable_file_is_replaced_and_store_is_fresh(
        context: StoreContext, state_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = state_dir / "1_0" / "s.sqlite"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)
    store = SQLiteKeyValueStore("s")
    with caplog.at_level(logging.WARNING):
        await store.open(context)
    try:
        assert store.fresh
        assert "not a readable SQLite database" in caplog.text
        store.apply("a", 1)
        await store.flush()
        assert rows_on_disk(path) == {b'"a"': b"1"}
    finally:
        await store.close()


async def test_file_of_a_newer_schema_is_refused_and_left_alone(
        context: StoreContext, state_dir: Path) -> None:
    path = state_dir / "1_0" / "s.sqlite"
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version=99")
    conn.close()
    store = SQLiteKeyValueStore("s")
    with pytest.raises(ConfigError, match="newer aiostreams"):
        await store.open(context)
    assert path.exists()


async def test_wipe_empties_the_file(open_store: MakeStore) -> None:
    store = await open_store(SQLiteKeyValueStore, "s")
    store.apply("a", 1)
    await store.flush()
    await store.wipe()
    assert rows_on_disk(store.path) == {}
    assert await store.get("a") is None


async def test_failed_flush_keeps_its_writes_for_the_next_flush(
        open_store: MakeStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store = await open_store(SQLiteKeyValueStore, "s", StrSerde())
    store.apply("a", 1)

    async def disk_full(db: aiosqlite.Connection, *, sealed: bool) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store, "_housekeep", disk_full)
    with pytest.raises(sqlite3.OperationalError):
        await store.flush()
    assert rows_on_disk(store.path) == {}  # rolled back
    assert await store.get("a") == 1
    store.apply("b", 2)
    monkeypatch.undo()
    await store.flush()
    assert rows_on_disk(store.path) == {b"a": b"1", b"b": b"2"}


async def test_cancelled_flush_loses_no_write_and_never_reorders_them(
        open_store: MakeStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store = await open_store(SQLiteKeyValueStore, "s", StrSerde())
    entered = asyncio.Event()
    release = asyncio.Event()
    original = store._housekeep

    async def slow(db: aiosqlite.Connection, *, sealed: bool) -> None:
        entered.set()
        await release.wait()
        await original(db, sealed=sealed)

    monkeypatch.setattr(store, "_housekeep", slow)
    store.apply("a", "first")
    store.apply("b", "kept")
    flushing = asyncio.create_task(store.flush())
    await entered.wait()
    store.apply("a", "second")  # newer than the batch being committed
    flushing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await flushing
    assert await store.get("a") == "second"
    assert await store.get("b") == "kept"
    release.set()
    monkeypatch.undo()
    await store.flush()  # waits for the shielded transaction, then writes the rest
    assert rows_on_disk(store.path) == {b"a": b'"second"', b"b": b'"kept"'}


async def test_use_before_open_says_to_open(context: StoreContext) -> None:
    store = SQLiteKeyValueStore("s")
    with pytest.raises(StoreStateError, match="open"):
        await store.get("a")
    await store.open(context)
    await store.close()
    with pytest.raises(StoreStateError, match="new instance"):
        await store.open(context)


@pytest.mark.parametrize("name", ["a/b", "..", "", "with space", "ünïcode"])
def test_store_name_that_cannot_name_a_file_or_topic_is_refused(name: Any) -> None:
    with pytest.raises(ConfigError, match="not allowed"):
        SQLiteKeyValueStore(name)


async def test_task_id_that_is_not_a_directory_name_is_refused(state_dir: Path) -> None:
    store = SQLiteKeyValueStore("s")
    with pytest.raises(ConfigError, match="task id"):
        await store.open(StoreContext("../escape", state_dir, 0))
