"""Per-record counts of what the stateful path does, for :mod:`benchmarks.stateful`.

:func:`counting` patches, for the length of a ``with`` block and in this process only, the
classes the stateful path goes through, so a run of a case tells per input record:

* ``view_reads``: reads processors make (a store view's ``get``/``get_now``/``fetch``/
  ``fetch_all``/``range``), and ``store_reads``: those that reach a store (not answered by
  the overlay of in-flight writes);
* ``store_writes``: writes applied to a store at retirement (``StoreOverlay.retire``);
* ``sqlite_reads`` / ``sqlite_writes``: statements sent to SQLite (queries, through
  aiosqlite or the stores' read-only connection; everything else, transactions included);
* ``serialize`` / ``deserialize``: serde method calls, outermost only (a timestamped value's
  inner long is not counted again). The engine's compiled topic codecs (the serdes'
  ``fast_*`` shortcuts) are not methods and are not counted: what is counted is the
  stores' and the DSL's own serde work;
* ``changelog_records``: records the run wrote to changelog topics (read from the broker
  afterwards, not patched).

The product has no counters for these: they exist only here.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import aiosqlite

from aiostreams import serde as serde_module
from aiostreams.processors import store_values, stream_stream_join
from aiostreams.state import sqlite as sqlite_store
from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.state.overlay import KeyValueStoreView, StoreOverlay, WindowStoreView
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.state.window import InMemoryWindowStore, SQLiteWindowStore
from aiostreams.windows import TimeWindowedSerde

STORE_READS = ("get", "get_now", "fetch", "fetch_all", "range")


def _serde_classes() -> list[type]:
    found: list[type] = [TimeWindowedSerde, store_values.TimestampedSerde,
                         store_values.ListSerde, store_values.TimedSerde,
                         stream_stream_join.WaitingKeySerde,
                         stream_stream_join.WaitingValueSerde]
    for value in vars(serde_module).values():
        if isinstance(value, type) and ("serialize" in vars(value)
                                        or "deserialize" in vars(value)):
            found.append(value)
    return found


class _CountedReader:
    """A store's read-only connection, counting its statements as ``sqlite_reads``."""

    def __init__(self, reader: Any, counts: Counter[str]) -> None:
        self._reader = reader
        self._counts = counts

    def execute(self, *args: Any) -> Any:
        self._counts["sqlite_reads"] += 1
        return self._reader.execute(*args)

    def close(self) -> None:
        self._reader.close()


@contextmanager
def counting() -> Iterator[Counter[str]]:
    """Count (see the module docstring) until the block ends; then restore the classes."""
    counts: Counter[str] = Counter()
    saved: list[tuple[type, str, Any]] = []
    depth = [0]

    def patch(cls: type, name: str, make: Callable[[Any], Any]) -> None:
        original = vars(cls)[name]
        saved.append((cls, name, original))
        setattr(cls, name, functools.wraps(original)(make(original)))

    def counted(what: str) -> Callable[[Any], Any]:
        def make(original: Any) -> Any:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                counts[what] += 1
                return original(*args, **kwargs)
            return wrapper
        return make

    def outermost(what: str) -> Callable[[Any], Any]:
        def make(original: Any) -> Any:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if depth[0] == 0:
                    counts[what] += 1
                depth[0] += 1
                try:
                    return original(*args, **kwargs)
                finally:
                    depth[0] -= 1
            return wrapper
        return make

    for view in (KeyValueStoreView, WindowStoreView):
        for name in STORE_READS:
            if name in vars(view):
                patch(view, name, counted("view_reads"))
    for store in (SQLiteKeyValueStore, SQLiteWindowStore, InMemoryKeyValueStore,
                  InMemoryWindowStore):
        for name in STORE_READS:
            if name in vars(store):
                patch(store, name, counted("store_reads"))
    patch(StoreOverlay, "retire", counted("store_writes"))
    patch(StoreOverlay, "retire_logged", counted("store_writes"))
    patch(aiosqlite.Connection, "execute_fetchall", counted("sqlite_reads"))
    opener = sqlite_store._open_reader  # point reads on the loop's thread

    def counting_reader(path: Any) -> Any:
        return _CountedReader(opener(path), counts)

    sqlite_store._open_reader = counting_reader
    for name in ("execute", "executemany"):
        patch(aiosqlite.Connection, name, counted("sqlite_writes"))
    for cls in _serde_classes():
        for name in ("serialize", "deserialize"):
            if name in vars(cls):
                patch(cls, name, outermost(name))
    try:
        yield counts
    finally:
        for cls, name, original in reversed(saved):
            setattr(cls, name, original)
        sqlite_store._open_reader = opener


__all__ = ["counting"]
