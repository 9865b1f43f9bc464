"""A table's processors and value getters: filter and map_values of a table, stream
aggregation, and the getters joins read a table's current value through (Kafka's
``KTableValueGetter``): a materialized table reads its store; a filtered or mapped one
computes its value from its parent's on the fly.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from aiostreams.processors.record_caching import CachedTable, cached_stamped
from aiostreams.processors.store_values import plain_value
from aiostreams.processors.table_changes import (
    NO_TIMESTAMP,
    OldValues,
    old_value,
    read_stamped,
    read_stamped_now,
    update,
    write_stamped,
)
from aiostreams.topology.processor import Processor, ProcessorContext
from aiostreams.types import Record
from aiostreams.windows import to_ms

AnyRecord = Record[Any, Any]

def initial_value(initializer: Any) -> Any:
    """What an aggregation starts from: ``initializer()`` when callable, else a deep copy
    of the value (so a mutable initial value is never shared between keys)."""
    if callable(initializer):
        return initializer()
    return copy.deepcopy(initializer)


# -- value getters ----------------------------------------------------------------------


class ValueGetter:
    """Reads a table's current value of a key from a processor connected to ``stores``.

    ``reads_now``: whether :meth:`get_now` answers without awaiting (a getter over the
    DSL's own stores); a processor built on such a getter can be synchronous."""

    stores: tuple[str, ...] = ()
    reads_now = False

    async def get(self, ctx: ProcessorContext, key: Any) -> Any | None:
        raise NotImplementedError

    def get_now(self, ctx: ProcessorContext, key: Any) -> Any | None:
        raise NotImplementedError(f"{type(self).__name__} reads only by awaiting get()")

    async def get_stamped(self, ctx: ProcessorContext, key: Any) -> tuple[Any, int]:
        """The value of ``key`` and its timestamp (ms; ``NO_TIMESTAMP`` when unknown)."""
        return await self.get(ctx, key), NO_TIMESTAMP


class StoreGetter(ValueGetter):
    """Reads a materialized table's store (values with their timestamps), its record
    cache first when the store has one in the task (Kafka's caching store reads)."""

    reads_now = True  # the DSL's key-value stores (kv_store_spec) all have get_now

    def __init__(self, store: str) -> None:
        self.store = store
        self.stores = (store,)

    async def get(self, ctx: ProcessorContext, key: Any) -> Any | None:
        found, stored = cached_stamped(ctx, self.store, key)
        if found:
            return plain_value(stored)
        return plain_value(await ctx.store(self.store).get(key))

    def get_now(self, ctx: ProcessorContext, key: Any) -> Any | None:
        found, stored = cached_stamped(ctx, self.store, key)
        if found:
            return plain_value(stored)
        return plain_value(ctx.store(self.store).get_now(key))

    async def get_stamped(self, ctx: ProcessorContext, key: Any) -> tuple[Any, int]:
        found, stored = cached_stamped(ctx, self.store, key)
        if found:
            return (None, NO_TIMESTAMP) if stored is None else (stored.value,
                                                                to_ms(stored.timestamp))
        return await read_stamped(ctx, self.store, key)


class FilterGetter(ValueGetter):
    def __init__(self, parent: ValueGetter, predicate: Callable[[Any, Any], Any],
                 keep: bool) -> None:
        self.parent = parent
        self.predicate = predicate
        self.keep = keep
        self.stores = parent.stores
        self.reads_now = parent.reads_now

    def _apply(self, key: Any, value: Any) -> Any:
        if value is None or bool(self.predicate(key, value)) is not self.keep:
            return None
        return value

    async def get(self, ctx: ProcessorContext, key: Any) -> Any | None:
        return self._apply(key, await self.parent.get(ctx, key))

    def get_now(self, ctx: ProcessorContext, key: Any) -> Any | None:
        return self._apply(key, self.parent.get_now(ctx, key))

    async def get_stamped(self, ctx: ProcessorContext, key: Any) -> tuple[Any, int]:
        value, stamp = await self.parent.get_stamped(ctx, key)
        value = self._apply(key, value)
        return value, stamp if value is not None else NO_TIMESTAMP


class MapValuesGetter(ValueGetter):
    def __init__(self, parent: ValueGetter, mapper: Callable[[Any], Any]) -> None:
        self.parent = parent
        self.mapper = mapper
        self.stores = parent.stores
        self.reads_now = parent.reads_now

    async def get(self, ctx: ProcessorContext, key: Any) -> Any | None:
        value = await self.parent.get(ctx, key)
        return None if value is None else self.mapper(value)

    def get_now(self, ctx: ProcessorContext, key: Any) -> Any | None:
        value = self.parent.get_now(ctx, key)
        return None if value is None else self.mapper(value)

    async def get_stamped(self, ctx: ProcessorContext, key: Any) -> tuple[Any, int]:
        value, stamp = await self.parent.get_stamped(ctx, key)
        return (None, stamp) if value is None else (self.mapper(value), stamp)


# -- processors -------------------------------------------------------------------------


class TableFilterProcessor(Processor[Any, Any]):
    """Forwards updates that pass; a failing (or deleting) update becomes a tombstone, so
    downstream forgets the key. With old values on, an update whose old and new results
    are both absent forwards nothing (Kafka's ``KTableFilter``). Writes its own store when
    materialized."""

    def __init__(self, predicate: Callable[[Any, Any], Any], keep: bool,
                 store: str | None, old_values: OldValues) -> None:
        self.predicate = predicate
        self.keep = keep
        self.store_name = store
        self.old_values = old_values

    def _apply(self, key: Any, value: Any) -> Any:
        if value is not None and bool(self.predicate(key, value)) is not self.keep:
            return None
        return value

    def process(self, record: AnyRecord) -> None:
        value = self._apply(record.key, record.value)
        old = (self._apply(record.key, old_value(record)) if self.old_values.enabled
               else None)
        if self.old_values.enabled and value is None and old is None:
            return
        _materialize(self.context, self.store_name, record, value)
        self.context.forward(update(record, value, old))


class TableMapValuesProcessor(Processor[Any, Any]):
    def __init__(self, mapper: Callable[[Any], Any], store: str | None,
                 old_values: OldValues) -> None:
        self.mapper = mapper
        self.store_name = store
        self.old_values = old_values

    def process(self, record: AnyRecord) -> None:
        value = None if record.value is None else self.mapper(record.value)
        before = old_value(record) if self.old_values.enabled else None
        old = None if before is None else self.mapper(before)
        _materialize(self.context, self.store_name, record, value)
        self.context.forward(update(record, value, old))


def _materialize(ctx: ProcessorContext, store_name: str | None, record: AnyRecord,
                 value: Any) -> None:
    if store_name is None or record.key is None:
        return
    write_stamped(ctx, store_name, record.key, value, to_ms(record.timestamp))


class AggregateProcessor(Processor[Any, Any]):
    """``new = adder(key, value, old)`` per record, written to the store and forwarded.

    ``old`` is the stored aggregate, or ``start()`` for a new key. Records with a null key
    or value are skipped (Kafka's rule), counted in ``skipped``. An adder returning
    ``None`` deletes the key (a tombstone goes downstream). The update is stamped with the
    latest timestamp of the records that made the aggregate (Kafka's ``KStreamAggregate``),
    kept in the store's companion timestamps store.

    Synchronous: its store (the DSL's key-value store) answers point reads without
    awaiting, so a record never suspends here and a chain of synchronous steps around it
    takes the engine's synchronous path. Per-key order (``ordering="key"``) is what makes
    the read-modify-write correct, as before: not awaiting changes no result.

    With a record cache (``cache_max_bytes`` > 0 and ``caching``), an update goes to the
    cache only - nothing is written or forwarded - and the flush writes and forwards the
    newest update of each key with the value the store held before it
    (:class:`~aiostreams.processors.record_caching.CachedTable`)."""

    def __init__(self, store: str, start: Callable[[], Any],
                 adder: Callable[[Any, Any, Any], Any], caching: bool = True) -> None:
        self.store_name = store
        self.start = start
        self.adder = adder
        self.caching = caching
        self.skipped = 0
        self._table = CachedTable(store)

    async def init(self, context: ProcessorContext) -> None:
        await super().init(context)
        require_reads_now(context, self.store_name)
        if self.caching:
            self._table.open(context, lambda: self._table.flush(self.context))

    def process(self, record: AnyRecord) -> None:
        if record.key is None or record.value is None:
            self.skipped += 1
            return
        ctx = self.context
        ts = to_ms(record.timestamp)
        table = self._table
        if table.cache is not None:
            old, old_ts = table.read(ctx, record.key)
            new = self.adder(record.key, record.value, self.start() if old is None else old)
            table.write(record.key, new, ts if old is None else max(ts, old_ts), record)
            return
        old, old_ts = read_stamped_now(ctx, self.store_name, record.key)
        new = self.adder(record.key, record.value, self.start() if old is None else old)
        stamp = ts if old is None else max(ts, old_ts)
        write_stamped(ctx, self.store_name, record.key, new, stamp)
        ctx.forward(update(record, new, old, stamp / 1000))


def require_reads_now(context: ProcessorContext, store: str) -> None:
    """A ``TypeError`` unless ``store``'s view answers ``get_now`` (checked at init, so a
    wrong store fails before any record)."""
    view = context.store(store)
    if not getattr(view, "reads_now", False):
        raise TypeError(
            f"store {store!r} cannot be read without awaiting: the DSL's aggregations and "
            "tables need a store with get_now (declare it with kv_store(...), in memory or "
            "SQLite)"
        )


__all__ = [
    "AggregateProcessor",
    "FilterGetter",
    "MapValuesGetter",
    "StoreGetter",
    "TableFilterProcessor",
    "TableMapValuesProcessor",
    "ValueGetter",
    "initial_value",
    "require_reads_now",
]
