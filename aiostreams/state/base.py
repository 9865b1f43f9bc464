"""What the engine needs from a state store.

A store holds *applied* state: what retired records wrote. The engine never writes to a
store directly while a record executes; writes are buffered in the record's slot (see
:mod:`aiostreams.state.overlay`) and applied with :meth:`StateStore.apply` at retire, in
retire order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable


class _Tombstone:
    __slots__ = ()

    def __repr__(self) -> str:
        return "TOMBSTONE"


TOMBSTONE: Final = _Tombstone()
"""The value of a buffered delete."""


@dataclass(frozen=True)
class StoreContext:
    """Where a store instance lives: its task, and its directory for persistent files."""

    task_id: str
    state_dir: Path | None
    partition: int


@runtime_checkable
class StateStore(Protocol):
    name: str

    async def open(self, context: StoreContext) -> None: ...

    async def get(self, key: Any) -> Any | None:
        """The applied value of ``key``, or None."""
        ...

    def apply(self, key: Any, value: Any) -> None:
        """Apply a retired write (``value is TOMBSTONE`` deletes). Must not block."""
        ...

    def range(self, start: Any | None, end: Any | None) -> AsyncIterator[tuple[Any, Any]]:
        """Applied entries with ``start <= key <= end`` in key order (None: unbounded)."""
        ...

    async def approximate_num_entries(self) -> int: ...

    async def flush(self) -> None:
        """Make every applied write durable (a persistent store's batch commit)."""
        ...

    async def close(self) -> None: ...
