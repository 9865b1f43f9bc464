"""Store-to-load forwarding through the overlay: what processors see of their stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from statekit import MakeStore, collect, new_slot, retire, running

from aiostreams.serde import StrSerde
from aiostreams.state.base import StoreContext
from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.state.overlay import (
    KeyValueStoreView,
    StoreOverlay,
    WindowStoreView,
    store_kind,
    view_for,
)
from aiostreams.state.window import InMemoryWindowStore


async def kv_view(make_kv: MakeStore, **kwargs: Any) -> tuple[Any, KeyValueStoreView]:
    store = await make_kv(**kwargs)
    view = view_for(StoreOverlay(store))
    assert isinstance(view, KeyValueStoreView)
    return store, view


async def window_view(make_window: MakeStore, **kwargs: Any) -> tuple[Any, WindowStoreView]:
    store = await make_window(**kwargs)
    view = view_for(StoreOverlay(store))
    assert isinstance(view, WindowStoreView)
    return store, view


async def test_read_sees_an_earlier_records_buffered_write_before_it_retires(
        make_kv: MakeStore) -> None:
    store, view = await kv_view(make_kv)
    first, second = new_slot(), new_slot()
    with running(first):
        view.put("k", 1)
    assert await store.get("k") is None  # not applied: first has not retired
    with running(second):
        assert await view.get("k") == 1
        view.put("k", 2)
    with running(new_slot()):
        assert await view.get("k") == 2  # the newest buffered write wins
    retire(first)
    assert await store.get("k") == 1
    retire(second)
    assert await store.get("k") == 2
    assert await view.get("k") == 2


async def test_buffered_delete_hides_the_applied_value_until_withdrawn(
        make_kv: MakeStore) -> None:
    store, view = await kv_view(make_kv)
    store.apply("k", "applied")
    slot = new_slot()
    with running(slot):
        view.delete("k")
        assert await view.get("k") is None
    for overlay, key, _ in slot.writes:
        overlay.withdraw(slot, key)  # the attempt failed
    assert await view.get("k") == "applied"


async def test_range_merges_buffered_writes_in_store_order(make_kv: MakeStore) -> None:
    store, view = await kv_view(make_kv, key_serde=StrSerde())
    for k in "aceg":
        store.apply(k, f"applied-{k}")
    await store.flush()
    with running(new_slot()):
        view.put("b", "buffered-b")
        view.put("c", "buffered-c")
        view.delete("e")
        view.put("z", "buffered-z")
    assert await collect(view.range()) == [
        ("a", "applied-a"), ("b", "buffered-b"), ("c", "buffered-c"), ("g", "applied-g"),
        ("z", "buffered-z"),
    ]
    assert await collect(view.range("b", "e")) == [("b", "buffered-b"), ("c", "buffered-c")]
    assert await collect(view.all()) == await collect(view.range())


@pytest.mark.parametrize("call", ["put", "delete"])
async def test_none_key_is_refused_while_the_record_executes(make_kv: MakeStore,
                                                             call: str) -> None:
    _, view = await kv_view(make_kv)
    with running(new_slot()), pytest.raises(ValueError, match="key cannot be None"):
        if call == "put":
            view.put(None, 1)
        else:
            view.delete(None)


async def test_window_read_sees_buffered_window_write(make_window: MakeStore) -> None:
    store, view = await window_view(make_window)
    writer = new_slot()
    with running(writer):
        view.put("k", 60.0, {"count": 1})
    with running(new_slot()):
        assert await view.get("k", 60.0) == {"count": 1}
        assert await view.get("k", 0.06e3) == {"count": 1}  # same millisecond, same window
        assert await view.get("k", 120.0) is None
    retire(writer)
    assert await store.get(("k", 60.0)) == {"count": 1}


async def test_window_fetch_merges_buffered_writes_with_the_store(
        make_window: MakeStore) -> None:
    store, view = await window_view(make_window)
    store.apply(("k", 0.0), "applied-0")
    store.apply(("k", 60.0), "applied-60")
    store.apply(("k", 120.0), "applied-120")
    await store.flush()
    store.apply(("other", 30.0), "other key")
    with running(new_slot()):
        view.put("k", 30.0, "buffered-30")
        view.put("k", 60.0, "buffered-60")
        view.delete("k", 120.0)
        view.put("k", 500.0, "out of bounds")
        view.put("other", 45.0, "other key")
    assert await view.fetch("k", 0.0, 180.0) == [
        (0.0, "applied-0"), (30.0, "buffered-30"), (60.0, "buffered-60"),
    ]


async def test_window_fetch_forgets_withdrawn_writes(make_window: MakeStore) -> None:
    _, view = await window_view(make_window)
    slot = new_slot()
    with running(slot):
        view.put("k", 10.0, "attempt")
    assert await view.fetch("k", 0.0, 20.0) == [(10.0, "attempt")]
    for overlay, key, _ in slot.writes:
        overlay.withdraw(slot, key)
    assert await view.fetch("k", 0.0, 20.0) == []


async def test_window_view_hides_buffered_writes_to_expired_windows(
        make_window: MakeStore) -> None:
    store, view = await window_view(make_window, retention=100.0)
    store.apply(("j", 1000.0), "moves the retention line to 900")
    with running(new_slot()):
        view.put("k", 850.0, "late")
        assert await view.get("k", 850.0) is None
        assert await view.fetch("k", 0.0, 2000.0) == []


def test_put_of_none_says_to_delete() -> None:
    view = view_for(StoreOverlay(InMemoryWindowStore("w", retention=60.0)))
    assert isinstance(view, WindowStoreView)
    with running(new_slot()), pytest.raises(ValueError, match="delete"):
        view.put("k", 0.0, None)


class DuckWindowStore:
    """A user's window store without a ``kind`` attribute."""

    name = "duck"
    persistent = False
    fresh = True
    retention = 60.0
    retained_from = float("-inf")

    async def open(self, context: StoreContext) -> None: ...
    def sort_key(self, key: Any) -> bytes: return b""
    def changelog_record(self, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        return None, None
    def restore(self, key: bytes | None, value: bytes | None) -> None: ...
    async def get(self, key: Any) -> Any | None: return None
    def apply(self, key: Any, value: Any) -> None: ...
    async def range(self, start: Any, end: Any) -> AsyncIterator[tuple[Any, Any]]:
        nothing: list[tuple[Any, Any]] = []
        for item in nothing:
            yield item
    async def fetch(self, key: Any, time_from: float,
                    time_to: float) -> AsyncIterator[tuple[float, Any]]:
        nothing: list[tuple[float, Any]] = []
        for item in nothing:
            yield item
    async def approximate_num_entries(self) -> int: return 0
    async def flush(self) -> None: ...
    async def wipe(self) -> None: ...
    async def close(self) -> None: ...


def test_view_for_chooses_the_view_by_store_kind() -> None:
    assert type(view_for(StoreOverlay(InMemoryKeyValueStore("kv")))) is KeyValueStoreView
    assert type(view_for(StoreOverlay(InMemoryWindowStore("w", retention=1.0)))) is (
        WindowStoreView)
    duck: Any = DuckWindowStore()  # no ``kind``: not quite the protocol, on purpose
    assert store_kind(duck) is store_kind(InMemoryWindowStore("w", retention=1.0))
    assert type(view_for(StoreOverlay(duck))) is WindowStoreView


def test_window_view_refuses_a_key_value_store() -> None:
    with pytest.raises(TypeError, match="not a window store"):
        WindowStoreView(StoreOverlay(InMemoryKeyValueStore("kv")))
