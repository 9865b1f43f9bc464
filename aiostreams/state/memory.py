"""An in-memory key-value store (applied state lives in a dict; nothing survives a restart
except through the changelog)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from aiostreams.state.base import TOMBSTONE, StoreContext


class InMemoryKeyValueStore:
    def __init__(self, name: str) -> None:
        self.name = name
        self._data: dict[Any, Any] = {}
        self.context: StoreContext | None = None

    async def open(self, context: StoreContext) -> None:
        self.context = context

    async def get(self, key: Any) -> Any | None:
        return self._data.get(key)

    def apply(self, key: Any, value: Any) -> None:
        if value is TOMBSTONE:
            self._data.pop(key, None)
        else:
            self._data[key] = value

    async def range(self, start: Any | None, end: Any | None) -> AsyncIterator[tuple[Any, Any]]:
        keys = sorted(k for k in self._data
                      if (start is None or k >= start) and (end is None or k <= end))
        for k in keys:
            if k in self._data:
                yield k, self._data[k]

    async def approximate_num_entries(self) -> int:
        return len(self._data)

    async def flush(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def snapshot(self) -> dict[Any, Any]:
        """A copy of the applied state (tests, the test driver)."""
        return dict(self._data)
