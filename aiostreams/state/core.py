"""What every store implementation here shares: its name, serdes and lifecycle fields, and
the byte forms of keys and changelog records.

A store's key bytes are its key serde's output (never None); its changelog record of a
write is ``(sort_key(key), serialized value)``, with a null value for ``TOMBSTONE``. The
in-memory and SQLite stores, key-value and window, differ in what ``sort_key`` makes of a
key (a window store appends the window start), not in these rules.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from aiostreams.serde import JsonSerde, Serde
from aiostreams.state.base import (
    TOMBSTONE,
    StoreKind,
    StoreState,
    StoreStateError,
    check_store_name,
)
from aiostreams.state.store_format import StoreFormat, format_for

__all__ = ["StoreCore"]


class StoreCore(ABC):
    """A store's identity and lifecycle fields (``fresh`` starts True, ``state`` CREATED);
    serdes default to JSON. Subclasses say what :meth:`sort_key` is. ``store_format`` is
    the format of its bytes (:mod:`aiostreams.state.store_format`), from its kind and
    value serde."""

    kind: StoreKind

    def __init__(self, name: str, key_serde: Serde[Any] | None,
                 value_serde: Serde[Any] | None) -> None:
        self.name = check_store_name(name)
        self.key_serde: Serde[Any] = key_serde if key_serde is not None else JsonSerde()
        self.value_serde: Serde[Any] = value_serde if value_serde is not None else JsonSerde()
        self.store_format: StoreFormat = format_for(self.kind, self.value_serde)
        self.fresh = True
        self.state = StoreState.CREATED

    @abstractmethod
    def sort_key(self, key: Any) -> bytes:
        """The bytes that order ``key`` (and key its changelog record)."""

    def changelog_record(self, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        kb = self.sort_key(key)
        if value is TOMBSTONE:
            return kb, None
        return kb, self.value_serde.serialize(self.name, value)

    def _key_bytes(self, key: Any) -> bytes:
        """``key`` serialized; a ``ValueError`` for a key the serde makes None."""
        data = self.key_serde.serialize(self.name, key)
        if data is None:
            raise ValueError(f"store {self.name!r}: a key cannot be None")
        return data

    def _changelog_key(self, key: bytes | None) -> bytes:
        """A restored record's key; a ``ValueError`` when it is null (not our record)."""
        if key is None:
            raise ValueError(
                f"store {self.name!r}: a changelog record has a null key; the changelog "
                "topic holds records this store did not write"
            )
        return key

    def _require_created(self) -> None:
        """Raise :class:`StoreStateError` unless the store was never opened."""
        if self.state is not StoreState.CREATED:
            raise StoreStateError(
                f"store {self.name!r} is {self.state.value}; open() a new instance instead"
            )
