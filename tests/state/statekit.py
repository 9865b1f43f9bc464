"""Small helpers shared by the state tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from aiostreams.runtime.slot import CURRENT_SLOT, Slot, SlotKind
from aiostreams.state.base import StateStore
from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.state.window import InMemoryWindowStore, SQLiteWindowStore

T = TypeVar("T")

KV_IMPLS: dict[str, Callable[..., StateStore]] = {
    "memory": InMemoryKeyValueStore,
    "sqlite": SQLiteKeyValueStore,
}
WINDOW_IMPLS: dict[str, Callable[..., StateStore]] = {
    "memory": InMemoryWindowStore,
    "sqlite": SQLiteWindowStore,
}

MakeStore = Callable[..., Awaitable[Any]]
"""``await make(...)``: an opened store (see the fixtures in conftest.py)."""



async def collect(items: AsyncIterator[T]) -> list[T]:
    return [item async for item in items]


def new_slot() -> Slot:
    return Slot(SlotKind.RECORD, None, None, None)


@contextmanager
def running(slot: Slot) -> Iterator[Slot]:
    """Run the block as if ``slot``'s processor chain were executing (its writes buffer)."""
    token = CURRENT_SLOT.set(slot)
    try:
        yield slot
    finally:
        CURRENT_SLOT.reset(token)


def retire(slot: Slot) -> None:
    """What the engine does at retire: apply the slot's writes, in order."""
    for overlay, key, value in slot.writes:
        overlay.retire(slot, key, value)


