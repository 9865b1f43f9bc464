"""``cogroup``: several grouped streams aggregated into one table, Kafka Streams'
``CogroupedKStream`` (non-windowed).

``grouped_a.cogroup(add_a).cogroup(grouped_b, add_b).aggregate(initializer)`` builds one
aggregation processor per grouped stream, each with its own aggregator, all reading and
writing *one* key-value store (changelogged, restored), and a merge node forwarding what
each of them emits: the table's updates. Per record, exactly as a single-stream
aggregation (:class:`~aiostreams.topology.dsl_table.AggregateProcessor`): null keys or values
are skipped, ``new = aggregator(key, value, stored or initial)``, stamped with the latest
timestamp of the records that made it, whichever stream they came from.

The grouped streams must be co-partitioned (they are read by one task, as for a join);
per-key correctness rests on the engine's key ordering across them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiostreams.errors import TopologyError
from aiostreams.serde import JsonSerde, serde_for
from aiostreams.topology.dsl_processors import Passthrough, require_sync
from aiostreams.topology.dsl_stores import TimestampedSerde, kv_store_spec
from aiostreams.topology.table_processors import AggregateProcessor, StoreGetter, initial_value

if TYPE_CHECKING:
    from aiostreams.topology.dsl_table import GroupedStream, Table

Aggregator = Callable[[Any, Any, Any], Any]


class CogroupedStream:
    """Grouped streams, each with its aggregator, to be aggregated into one table."""

    def __init__(self, parts: list[tuple[GroupedStream[Any, Any], Aggregator]]) -> None:
        assert parts, "a cogrouped stream has at least one grouped stream"
        self.parts = parts
        self.builder = parts[0][0].builder

    def cogroup(self, grouped: GroupedStream[Any, Any],
                aggregator: Aggregator) -> CogroupedStream:
        """Add ``grouped``, aggregated into the same table by ``aggregator(key, value,
        aggregate)``."""

        require_sync(aggregator, "cogroup")
        if any(g is grouped for g, _ in self.parts):
            raise TopologyError("cogroup(): this grouped stream is already in the cogroup; "
                                "each grouped stream can be added once")
        return CogroupedStream([*self.parts, (grouped, aggregator)])

    def aggregate(self, initializer: Any, *, materialized: str | None = None,
                  persistent: bool = False, value_serde: Any = None,
                  name: str | None = None) -> Table[Any, Any]:
        """The table of aggregates, starting from ``initializer`` (a function of no
        arguments, or a value deep-copied per key)."""
        from aiostreams.topology.dsl_table import Table

        builder = self.builder
        first = self.parts[0][0]
        for grouped, _ in self.parts[1:]:
            builder.check_copartitioned(first.stream.node, grouped.stream.node, "cogroup()")
        store = builder.store_name("COGROUPKSTREAM-AGGREGATE-STATE-STORE", materialized)
        values = serde_for(value_serde) if value_serde is not None else JsonSerde()
        def supplier(add: Aggregator) -> Callable[[], AggregateProcessor]:
            return lambda: AggregateProcessor(store, lambda: initial_value(initializer), add)

        nodes = [builder.add_processor("COGROUPKSTREAM-AGGREGATE", supplier(aggregator),
                                       [grouped.stream.node])
                 for grouped, aggregator in self.parts]
        builder.add_store(kv_store_spec(store, persistent=persistent, key_serde=first.key_serde,
                                        value_serde=TimestampedSerde(values)), *nodes)
        merged = builder.add_processor("COGROUPKSTREAM-MERGE", Passthrough, nodes, name=name)
        return Table(builder, merged, StoreGetter(store), key_serde=first.key_serde,
                     value_serde=values, store=store)


__all__ = ["CogroupedStream"]
