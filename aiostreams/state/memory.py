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
from aiostreams.state.key_identity import EncodedKey, key_identity


class InMemoryKeyValueStore(StoreCore):
    """Key-value state in a dict.

    Invariant: ``_data`` holds exactly the applied writes (and restored records) that were
    not deleted since; it never holds ``TOMBSTONE`` or ``None``. It is indexed by
    :func:`~aiostreams.state.key_identity.key_identity` (keys the serde tells apart stay
    apart: ``1`` and ``True`` under JSON), and ``_keys`` holds the original of every
    ``EncodedKey``.
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
        self._keys: dict[Any, Any] = {}

    def _identity(self, key: Any) -> Any:
        return key_identity(key, self._key_bytes)

    def _original(self, ident: Any) -> Any:
        return self._keys[ident] if isinstance(ident, EncodedKey) else ident

    async def open(self, context: StoreContext) -> None:
        self._require_created()
        self.context = context
        self.state = StoreState.OPEN

    async def get(self, key: Any) -> Any | None:
        return self._data.get(self._identity(key))

    def get_now(self, key: Any) -> Any | None:
        """:meth:`get` without awaiting."""
        return self._data.get(self._identity(key))

    def apply(self, key: Any, value: Any) -> None:
        ident = self._identity(key)
        if value is TOMBSTONE:
            self._data.pop(ident, None)
            self._keys.pop(ident, None)
        else:
            self._data[ident] = value
            if ident is not key:
                self._keys[ident] = key

    def sort_key(self, key: Any) -> bytes:
        return self._key_bytes(key)

    def restore(self, key: bytes | None, value: bytes | None) -> None:
        k = self.key_serde.deserialize(self.name, self._changelog_key(key))
        self.apply(k, TOMBSTONE if value is None
                   else self.value_serde.deserialize(self.name, value))

    async def range(self, start: Any | None, end: Any | None) -> AsyncIterator[tuple[Any, Any]]:
        lo = None if start is None else self.sort_key(start)
        hi = None if end is None else self.sort_key(end)
        entries = []
        for ident in self._data:
            sk = ident.data if isinstance(ident, EncodedKey) else self.sort_key(ident)
            if (lo is None or sk >= lo) and (hi is None or sk <= hi):
                entries.append((sk, ident))
        entries.sort(key=itemgetter(0))
        for _, ident in entries:
            # A write applied while the caller awaited between items may have deleted it.
            if ident in self._data:
                yield self._original(ident), self._data[ident]

    async def approximate_num_entries(self) -> int:
        return len(self._data)

    async def flush(self) -> None:
        return None

    async def wipe(self) -> None:
        self._data.clear()
        self._keys.clear()
        self.fresh = True

    async def close(self) -> None:
        self.state = StoreState.CLOSED

    def snapshot(self) -> dict[Any, Any]:
        """A copy of the applied state (tests, the test driver), by original key where it
        can be a dict key (an unhashable key appears as its ``EncodedKey``)."""
        out: dict[Any, Any] = {}
        for ident, value in self._data.items():
            original = self._original(ident)
            try:
                out[original] = value
            except TypeError:
                out[ident] = value
        return out
