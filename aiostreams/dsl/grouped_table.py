"""A table re-grouped by a new key, aggregated with an adder and a subtractor (see
:mod:`aiostreams.processors.table_regroup` for the processors and their semantics).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from aiostreams.processors.steps import require_sync
from aiostreams.processors.store_values import TimestampedSerde, kv_store_spec
from aiostreams.processors.table_changes import OldValues
from aiostreams.processors.table_regroup import (
    ChangeSerde,
    TableRegroupAggregateProcessor,
    TableRegroupMapProcessor,
)
from aiostreams.processors.tables import StoreGetter, initial_value
from aiostreams.serde import JsonSerde, LongSerde, Serde, serde_for

if TYPE_CHECKING:
    from aiostreams.dsl.table import Table

K = TypeVar("K")
V = TypeVar("V")
VA = TypeVar("VA")

class GroupedTable(Generic[K, V]):
    """A table's rows re-grouped by ``selector(key, value) -> (group, value)``, ready to
    aggregate with an adder and a subtractor (see the module docstring)."""

    def __init__(self, table: Table[Any, Any], selector: Callable[[Any, Any], tuple[K, V]],
                 *, key_serde: Any, value_serde: Any, name: str | None) -> None:

        require_sync(selector, "group_by")
        self.table = table
        self.builder = table.builder
        self.key_serde: Serde[Any] = (serde_for(key_serde) if key_serde is not None
                                      else table.key_serde or JsonSerde())
        self.value_serde: Serde[Any] = (serde_for(value_serde) if value_serde is not None
                                        else table.value_serde or JsonSerde())
        table.old_values.enable()
        node = self.builder.add_processor(
            "KTABLE-SELECT", lambda: TableRegroupMapProcessor(selector, node), [table.node],
            name=name)
        self.source, _, _ = self.builder.repartition(
            node, name=None if name is None else f"{name}-repartition",
            key_serde=self.key_serde, value_serde=ChangeSerde(self.value_serde))

    def _aggregate(self, kind: str, start: Callable[[], Any] | None,
                   add: Callable[[Any, Any, Any], Any],
                   subtract: Callable[[Any, Any, Any], Any], *, materialized: str | None,
                   persistent: bool, value_serde: Serde[Any], name: str | None,
                   caching: bool = True) -> Table[K, Any]:
        from aiostreams.dsl.table import Table

        store = self.builder.store_name(f"{kind}-STATE-STORE", materialized)
        old_values = OldValues()
        node = self.builder.add_processor(
            kind, lambda: TableRegroupAggregateProcessor(store, start, add, subtract,
                                                         old_values, caching),
            [self.source], name=name)
        self.builder.add_store(kv_store_spec(store, persistent=persistent,
                                             key_serde=self.key_serde,
                                             value_serde=TimestampedSerde(value_serde)), node)
        return Table(self.builder, node, StoreGetter(store), key_serde=self.key_serde,
                     value_serde=value_serde, store=store, old_values=old_values)

    def count(self, *, materialized: str | None = None, persistent: bool = False,
              name: str | None = None, caching: bool = True) -> Table[K, int]:
        """Rows per group; a group whose rows all left counts 0 (it is not deleted).
        ``caching=False``: this store never has a record cache, whatever
        ``cache_max_bytes``; so for ``reduce`` and ``aggregate``."""
        return self._aggregate("KTABLE-AGGREGATE", lambda: 0, lambda _k, _v, n: n + 1,
                               lambda _k, _v, n: n - 1, materialized=materialized,
                               persistent=persistent, value_serde=LongSerde(), name=name,
                               caching=caching)

    def reduce(self, adder: Callable[[V, V], V], subtractor: Callable[[V, V], V], *,
               materialized: str | None = None, persistent: bool = False,
               value_serde: Any = None, name: str | None = None,
               caching: bool = True) -> Table[K, V]:
        """``adder(agg, value)`` for a row joining the group, ``subtractor(agg, value)`` for
        one leaving; a group's first value is its aggregate."""

        require_sync(adder, "reduce")
        require_sync(subtractor, "reduce")
        return self._aggregate(
            "KTABLE-REDUCE", None, lambda _k, v, agg: adder(agg, v),
            lambda _k, v, agg: subtractor(agg, v), materialized=materialized,
            persistent=persistent, name=name, caching=caching,
            value_serde=serde_for(value_serde) if value_serde is not None
            else self.value_serde)

    def aggregate(self, initializer: Callable[[], VA] | VA,
                  adder: Callable[[K, V, VA], VA], subtractor: Callable[[K, V, VA], VA], *,
                  materialized: str | None = None, persistent: bool = False,
                  value_serde: Any = None, name: str | None = None,
                  caching: bool = True) -> Table[K, VA]:
        """``adder(group, value, agg)`` / ``subtractor(group, value, agg)`` starting from
        ``initializer`` (a function of no arguments, or a value deep-copied per group)."""

        require_sync(adder, "aggregate")
        require_sync(subtractor, "aggregate")
        return self._aggregate(
            "KTABLE-AGGREGATE", lambda: initial_value(initializer), adder, subtractor,
            materialized=materialized, persistent=persistent, name=name, caching=caching,
            value_serde=serde_for(value_serde) if value_serde is not None
            else JsonSerde())


__all__ = ["GroupedTable"]
