"""What the engine needs from a state store.

A store holds *applied* state: what retired records wrote. The engine never writes to a
store directly while a record executes; writes are buffered in the record's slot (see
:mod:`aiostreams.state.overlay`) and applied with :meth:`StateStore.apply` at retire, in
retire order.

Order: ``range`` (and a window store's ``fetch``) walk keys in the byte order of
:meth:`StateStore.sort_key`, the serialized key, in every implementation, so that choosing a
persistent store never changes what a topology computes. For ``str`` keys under
:class:`~aiostreams.serde.StrSerde` that is Python's order; under the default JSON serde it
is the order of the JSON text (the same for keys of letters, digits, ``-_.:/``; not for keys
holding spaces, ``!``, quotes, backslashes or control characters).

Lifecycle: ``CREATED → OPEN → CLOSED`` (:class:`StoreState`); a closed store is not
reopened: the task makes a new instance from its ``StoreSpec.factory``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

from aiostreams.errors import AiostreamsError, ConfigError
from aiostreams.types import RawRecord


class _Tombstone:
    __slots__ = ()

    def __repr__(self) -> str:
        return "TOMBSTONE"


TOMBSTONE: Final = _Tombstone()
"""The value of a buffered delete."""


class StoreKind(enum.Enum):
    """Which view a store gets (:func:`aiostreams.state.overlay.view_for`)."""

    KEY_VALUE = "key_value"
    WINDOW = "window"
    VERSIONED = "versioned"


class StoreState(enum.Enum):
    CREATED = "created"
    OPEN = "open"
    CLOSED = "closed"


class StoreStateError(AiostreamsError, RuntimeError):
    """A store was used outside its lifecycle (before ``open`` or after ``close``)."""


@dataclass(frozen=True)
class StoreContext:
    """Where a store instance lives: its task, and its directory for persistent files."""

    task_id: str
    state_dir: Path | None
    partition: int

    def task_dir(self, store_name: str) -> Path:
        """``<state_dir>/<task_id>``: where the task's persistent stores and checkpoint live.
        Raises :class:`ConfigError` when no ``state_dir`` is set."""
        if self.state_dir is None:
            raise ConfigError(
                f"store {store_name!r} is persistent and needs a directory for its files: "
                "set `state_dir` (Settings(state_dir=...) or AIOSTREAMS_STATE_DIR), or declare "
                "the store with persistent=False"
            )
        if not self.task_id or any(c in self.task_id for c in "/\\\0") or self.task_id in (
                ".", ".."):
            raise ConfigError(
                f"task id {self.task_id!r} cannot name a directory under `state_dir`"
            )
        return Path(self.state_dir) / self.task_id


_STORE_NAME: Final = re.compile(r"[A-Za-z0-9._-]+")


def check_store_name(name: str) -> str:
    """``name`` if it can name a changelog topic and a file; else a :class:`ConfigError`."""
    if not isinstance(name, str) or not _STORE_NAME.fullmatch(name) or name in (".", ".."):
        raise ConfigError(
            f"store name {name!r} is not allowed: it names the store's changelog topic and "
            "its file, so use only ASCII letters, digits, '.', '_' and '-'"
        )
    return name


@runtime_checkable
class StateStore(Protocol):
    """Common to every store. ``persistent`` stores keep applied state on disk between
    runs (then the checkpoint says how far the changelog is already in the files).

    ``fresh`` (meaningful after ``open``) is True when the store holds nothing from an
    earlier run: always for in-memory stores; for a persistent store when its file was
    missing, or unreadable and replaced. A fresh store is restored from the changelog's
    start whatever the checkpoint says.

    Values are shared, not copied: what ``get`` returns may be the object that was applied.
    Treat values as immutable (write a new value rather than mutating one read).
    """

    name: str
    kind: StoreKind
    persistent: bool
    fresh: bool

    async def open(self, context: StoreContext) -> None: ...

    def sort_key(self, key: Any) -> bytes:
        """The bytes that order ``key`` in ``range``: the serialized key (the same bytes
        as the changelog key). Raises ``ValueError`` for a ``None`` key."""
        ...

    def changelog_record(self, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        """The changelog (key, value) bytes of a write; ``value is TOMBSTONE`` gives a null
        value (a delete, compacted away by Kafka)."""
        ...

    def restore(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one changelog record during restore (``value is None`` deletes). A
        persistent store buffers it like ``apply``: ``flush`` after the restore."""
        ...

    async def get(self, key: Any) -> Any | None:
        """The applied value of ``key``, or None."""
        ...

    def apply(self, key: Any, value: Any) -> None:
        """Apply a retired write (``value is TOMBSTONE`` deletes). Must not block."""
        ...

    def range(self, start: Any | None, end: Any | None) -> AsyncIterator[tuple[Any, Any]]:
        """Applied entries with ``start <= key <= end`` in :meth:`sort_key` order (None:
        unbounded)."""
        ...

    async def approximate_num_entries(self) -> int: ...

    async def flush(self) -> None:
        """Make every applied write durable (a persistent store's batch commit)."""
        ...

    async def wipe(self) -> None:
        """Discard all applied state, in memory and on disk; the store stays open and
        ``fresh`` (before a restore from the changelog's start)."""
        ...

    async def close(self) -> None:
        """Release the store. Writes not yet flushed are discarded: on disk the store keeps
        what the last ``flush`` (the last commit) wrote."""
        ...


@runtime_checkable
class KeyValueStore(StateStore, Protocol):
    """Applied key-value state (see the overlay for what processors see)."""


@runtime_checkable
class WindowStore(StateStore, Protocol):
    """Applied windowed state: values addressed by ``(key, window_start)``.

    ``apply``/``get`` take the composite key ``(key, window_start)`` (start in float
    seconds, kept to the millisecond); ``range`` is over composite keys too. ``fetch``
    answers the common query directly.

    Retention: windows starting before :attr:`retained_from` (the greatest start applied so
    far minus ``retention``) are expired: never returned, ignored when written, dropped from
    memory and disk at ``flush``."""

    retention: float

    @property
    def retained_from(self) -> float:
        """The earliest window start still retained (``-inf`` before any write)."""
        ...

    def fetch(self, key: Any, time_from: float,
              time_to: float) -> AsyncIterator[tuple[float, Any]]:
        """``(window_start, value)`` for ``key`` with ``time_from <= start <= time_to``
        (bounds rounded to the millisecond, like starts), in start order."""
        ...

    def fetch_all(self, time_from: float,
                  time_to: float) -> AsyncIterator[tuple[tuple[Any, float], Any]]:
        """``((key, window_start), value)`` of every key's windows with ``time_from <=
        start <= time_to`` (bounds rounded like starts), in (start, key bytes) order. Costs
        what it returns (a time index), not the size of the store."""
        ...


def restore_each(store: Any, records: Sequence[RawRecord]) -> int:
    """``store.restore`` of each changelog record in order (what a replay does for a store
    without a ``restore_batch`` of its own); their key and value bytes."""
    restore = store.restore
    size = 0
    for record in records:
        key, value = record.key, record.value
        restore(key, value)
        size += (len(key) if key else 0) + (len(value) if value else 0)
    return size
