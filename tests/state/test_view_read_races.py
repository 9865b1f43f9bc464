"""A read that awaits the store must not lose an earlier record's write that retires while
it waits (the write leaves the overlay for a store whose read has already passed it).

The stores below take what they hold when the read starts and then wait for a gate, as a
SQLite read does while its query runs on the database thread; the earlier record retires
meanwhile. The views must have taken the buffered writes before reading the store."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from typing import Any

from statekit import new_slot, retire, running

from aiostreams.serde import StrSerde
from aiostreams.state.base import StoreContext
from aiostreams.state.overlay import StoreOverlay, WindowStoreView, view_for
from aiostreams.state.versioned import VersionedKeyValueStore
from aiostreams.state.versioned_view import VersionedStoreView
from aiostreams.state.window import InMemoryWindowStore


class SlowWindowStore(InMemoryWindowStore):
    """Reads what it holds at once, then answers only when ``gate`` opens."""

    def __init__(self) -> None:
        super().__init__("w", retention=3600.0, key_serde=StrSerde())
        self.reading = asyncio.Event()
        self.gate = asyncio.Event()

    async def _slowly(self, rows: list[Any]) -> AsyncIterator[Any]:
        self.reading.set()
        await self.gate.wait()
        for row in rows:
            yield row

    async def fetch(self, key: Any, time_from: float,
                    time_to: float) -> AsyncIterator[tuple[float, Any]]:
        rows = [row async for row in super().fetch(key, time_from, time_to)]
        async for row in self._slowly(rows):
            yield row

    async def fetch_all(self, time_from: float,
                        time_to: float) -> AsyncIterator[tuple[tuple[Any, float], Any]]:
        rows = [row async for row in super().fetch_all(time_from, time_to)]
        async for row in self._slowly(rows):
            yield row


async def read_while_an_earlier_record_retires(store: SlowWindowStore, view: Any,
                                               read: Any) -> Any:
    earlier = new_slot()
    with running(earlier):
        view.put("k", 10.0, "earlier")
    reader = asyncio.ensure_future(read())
    await store.reading.wait()  # the store's read has passed: it holds nothing yet
    retire(earlier)  # ... and the earlier record's write lands in the store now
    store.gate.set()
    return await reader


async def test_a_window_fetch_sees_a_write_that_retires_while_the_store_is_read() -> None:
    store = SlowWindowStore()
    await store.open(StoreContext("0_0", None, 0))
    view = view_for(StoreOverlay(store))
    assert isinstance(view, WindowStoreView)
    got = await read_while_an_earlier_record_retires(
        store, view, lambda: view.fetch("k", 0.0, 60.0))
    assert got == [(10.0, "earlier")]


async def test_a_window_fetch_all_sees_a_write_that_retires_while_the_store_is_read() -> None:
    store = SlowWindowStore()
    await store.open(StoreContext("0_0", None, 0))
    view = view_for(StoreOverlay(store))
    got = await read_while_an_earlier_record_retires(
        store, view, lambda: view.fetch_all(0.0, 60.0))
    assert got == [("k", 10.0, "earlier")]


class SlowVersionedStore(VersionedKeyValueStore):
    def __init__(self) -> None:
        super().__init__("v", history_retention=3600.0, key_serde=StrSerde(),
                         value_serde=StrSerde())
        self.reading = asyncio.Event()
        self.gate = asyncio.Event()
        self.slow = False  # the put's own read answers at once

    async def versions(self, key: Any) -> list[tuple[int, Any]]:
        rows = await super().versions(key)
        if self.slow:
            self.reading.set()
            await self.gate.wait()
        return rows


async def test_a_versioned_get_sees_a_version_that_retires_while_the_store_is_read() -> None:
    store = SlowVersionedStore()
    await store.open(StoreContext("0_0", None, 0))
    view = view_for(StoreOverlay(store))
    assert isinstance(view, VersionedStoreView)
    earlier = new_slot()
    with running(earlier):
        assert await view.put("k", "earlier", 10.0) == math.inf
    store.slow = True
    reader = asyncio.ensure_future(view.get("k"))
    await store.reading.wait()
    retire(earlier)
    store.gate.set()
    got = await reader
    assert got is not None and got.value == "earlier"
