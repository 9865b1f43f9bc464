"""State stores: declare them with :func:`kv_store` and :func:`window_store`.

::

    topology.add_store(kv_store("counts", key_serde=str, value_serde=int), "count")
    topology.add_store(window_store("clicks-1m", retention=3600.0, persistent=True), "win")

In-memory stores (the default) are rebuilt from their changelog on every start; persistent
ones live in SQLite files under ``state_dir`` and replay only the changelog's tail past the
task's checkpoint. ``logged=False`` drops the changelog: the state is then lost with the
process (in memory) or with the disk (persistent), and is not moved when the task is.
"""

from aiostreams.state.base import (
    TOMBSTONE,
    KeyValueStore,
    StateStore,
    StoreContext,
    StoreKind,
    WindowStore,
)
from aiostreams.state.declarations import kv_store, window_store
from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.state.versioned import VersionedKeyValueStore, versioned_store
from aiostreams.state.window import InMemoryWindowStore, SQLiteWindowStore

__all__ = [
    "TOMBSTONE",
    "InMemoryKeyValueStore",
    "InMemoryWindowStore",
    "KeyValueStore",
    "SQLiteKeyValueStore",
    "SQLiteWindowStore",
    "StateStore",
    "StoreContext",
    "StoreKind",
    "VersionedKeyValueStore",
    "WindowStore",
    "kv_store",
    "versioned_store",
    "window_store",
]
