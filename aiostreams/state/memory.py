"""An in-memory key-value store: applied state lives in a dict; nothing survives a restart
except through the changelog.

The per-record path (``get``, ``apply``) touches only the dict: keys are told apart by Python
equality, and serdes run only for the changelog (``changelog_record``, ``restore``) and to
order ``range`` by the serialized key, like the persistent store (see
:mod:`aiostreams.state.base`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from operator import itemgetter
from typing import Any

from aiostreams.serde import Serde
from aiostreams.state.base import (
    TOMBSTONE,
    StoreContext,
    StoreKind,
    StoreState,
)
from aiostreams.state.core import StoreCore


class InMemoryKeyValueStore(StoreCore):
    """Key-value state in a dict.

    Invariant: ``_data`` holds exactly the applied writes (and restored records) that were
    not deleted since; it never holds ``TOMBSTONE`` or ``None``.
    """

    kind: StoreKind = StoreKind.KEY_VALUE
    persistent = False

    def __init__(
        self,
        name: str,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
    ) -> None:
        super().__init__(name, key_serde, value_serde)
        self.context: StoreContext | None = None
        self._data: dict[Any, Any] = {}

    async def open(self, context: StoreContext) -> None:
        self._require_created()
        self.context = context
        self.state = StoreState.OPEN

    async def get(self, key: Any) -> Any | None:
        return self._data.get(key)

    def apply(self, key: Any, value: Any) -> None:
        if value is TOMBSTONE:
            self._data.pop(key, None)
        else:
            self._data[key] = value

    def sort_key(self, key: Any) -> bytes:
        return self._key_bytes(key)

    def restore(self, key: bytes | None, value: bytes | None) -> None:
        k = self.key_serde.deserialize(self.name, self._changelog_key(key))
        if value is None:
            self._data.pop(k, None)
        else:
            self._data[k] = self.value_serde.deserialize(self.name, value)

    async def range(self, start: Any | None, end: Any | None) -> AsyncIterator[tuple[Any, Any]]:
        lo = None if start is None else self.sort_key(start)
        hi = None if end is None else self.sort_key(end)
        entries = []
        for k in self._data:
            sk = self.sort_key(k)
            if (lo is None or sk >= lo) and (hi is None or sk <= hi):
                entries.append((sk, k))
        entries.sort(key=itemgetter(0))
        for _, k in entries:
            # A write applied while the caller awaited between items may have deleted it.
            if k in self._data:
                yield k, self._data[k]

    async def approximate_num_entries(self) -> int:
        return len(self._data)

    async def flush(self) -> None:
        return None

    async def wipe(self) -> None:
        self._data.clear()
        self.fresh = True

    async def close(self) -> None:
        self.state = StoreState.CLOSED

    def snapshot(self) -> dict[Any, Any]:
        """A copy of the applied state (tests, the test driver)."""
        return dict(self._data)
