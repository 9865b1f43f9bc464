"""``cogroup``: several grouped streams aggregated into one table, Kafka Streams'
``CogroupedKStream``, and per time window (``cogroup(...).windowed_by(windows)``, see
:class:`TimeWindowedCogroupedStream`).

``grouped_a.cogroup(add_a).cogroup(grouped_b, add_b).aggregate(initializer)`` builds one
aggregation processor per grouped stream, each with its own aggregator, all reading and
writing *one* key-value store (changelogged, restored), and a merge node forwarding what
each of them emits: the table's updates. Per record, exactly as a single-stream
aggregation (:class:`~aiostreams.dsl.table.AggregateProcessor`): null keys or values
are skipped, ``new = aggregator(key, value, stored or initial)``, stamped with the latest
timestamp of the records that made it, whichever stream they came from.

The grouped streams must be co-partitioned (they are read by one task, as for a join);
per-key correctness rests on the engine's key ordering across them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiostreams.errors import ConfigError, TopologyError
from aiostreams.processors.steps import Passthrough, require_sync
from aiostreams.processors.store_values import TimestampedSerde, kv_store_spec, window_store_spec
from aiostreams.processors.table_changes import OldValues
from aiostreams.processors.tables import AggregateProcessor, StoreGetter, initial_value
from aiostreams.processors.windows import TimeWindowAggregateProcessor, TimeWindowGetter
from aiostreams.serde import JsonSerde, serde_for
from aiostreams.windows import TimeWindowedSerde, TimeWindows, Windowed, to_ms

if TYPE_CHECKING:
    from aiostreams.dsl.table import GroupedStream, Table

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
                  name: str | None = None, caching: bool = True) -> Table[Any, Any]:
        """The table of aggregates, starting from ``initializer`` (a function of no
        arguments, or a value deep-copied per key). ``caching=False``: this store never has
        a record cache, whatever ``cache_max_bytes`` (the grouped streams' aggregators
        share one cache otherwise, flushed once)."""
        from aiostreams.dsl.table import Table

        builder = self.builder
        first = self.parts[0][0]
        for grouped, _ in self.parts[1:]:
            builder.check_copartitioned(first.stream.node, grouped.stream.node, "cogroup()")
        store = builder.store_name("COGROUPKSTREAM-AGGREGATE-STATE-STORE", materialized)
        values = serde_for(value_serde) if value_serde is not None else JsonSerde()
        def supplier(add: Aggregator) -> Callable[[], AggregateProcessor]:
            return lambda: AggregateProcessor(store, lambda: initial_value(initializer), add,
                                              caching)

        nodes = [builder.add_processor("COGROUPKSTREAM-AGGREGATE", supplier(aggregator),
                                       [grouped.stream.node])
                 for grouped, aggregator in self.parts]
        builder.add_store(kv_store_spec(store, persistent=persistent, key_serde=first.key_serde,
                                        value_serde=TimestampedSerde(values)), *nodes)
        merged = builder.add_processor("COGROUPKSTREAM-MERGE", Passthrough, nodes, name=name)
        return Table(builder, merged, StoreGetter(store), key_serde=first.key_serde,
                     value_serde=values, store=store)

    def windowed_by(self, windows: TimeWindows) -> TimeWindowedCogroupedStream:
        """Aggregate per time window (tumbling or hopping; Kafka's
        ``CogroupedKStream.windowedBy(TimeWindows)``): each grouped stream's aggregator
        updates the windows of its records in one shared window store."""
        if not isinstance(windows, TimeWindows):
            raise ConfigError(
                f"cogroup().windowed_by() takes TumblingWindows or HoppingWindows, got "
                f"{type(windows).__name__}; sessions and sliding windows are not offered "
                "for cogroups")
        return TimeWindowedCogroupedStream(self, windows)


class TimeWindowedCogroupedStream:
    """A cogroup aggregated per time window: one
    :class:`~aiostreams.processors.windows.TimeWindowAggregateProcessor` per grouped
    stream, each with its aggregator and its *own* stream time (as each of Kafka's
    ``KStreamWindowAggregate`` processors keeps one), all writing one window store; a
    merge node forwards their updates (emitted on every update, as in Kafka 3.9)."""

    def __init__(self, cogrouped: CogroupedStream, windows: TimeWindows) -> None:
        self.cogrouped = cogrouped
        self.windows = windows

    def aggregate(self, initializer: Any, *, materialized: str | None = None,
                  persistent: bool = False, retention: float | None = None,
                  value_serde: Any = None, name: str | None = None, caching: bool = True,
                  ) -> Table[Windowed[Any], Any]:
        """The windowed table of aggregates, each window starting from ``initializer``;
        ``retention`` (seconds, at least and by default size + grace). ``caching=False``:
        this store never has a record cache, whatever ``cache_max_bytes``."""
        from aiostreams.dsl.table import Table

        parts = self.cogrouped.parts
        builder = self.cogrouped.builder
        windows = self.windows
        first = parts[0][0]
        for grouped, _ in parts[1:]:
            builder.check_copartitioned(first.stream.node, grouped.stream.node,
                                        "cogroup().windowed_by()")
        minimum_ms = windows.size_ms + windows.grace_ms
        if retention is not None and to_ms(retention) < minimum_ms:
            raise ConfigError(
                f"retention ({retention}s) must be at least window size + grace "
                f"({minimum_ms / 1000}s), or open windows would be forgotten")
        store = builder.store_name("COGROUPKSTREAM-AGGREGATE-STATE-STORE", materialized)
        values = serde_for(value_serde) if value_serde is not None else JsonSerde()
        late = builder.late

        old_values = OldValues()

        def supplier(add: Aggregator) -> Callable[[], TimeWindowAggregateProcessor]:
            return lambda: TimeWindowAggregateProcessor(
                store, windows, lambda: initial_value(initializer), add, late, caching,
                old_values)

        nodes = [builder.add_processor("COGROUPKSTREAM-AGGREGATE", supplier(aggregator),
                                       [grouped.stream.node])
                 for grouped, aggregator in parts]
        builder.add_store(window_store_spec(
            store, retention=retention if retention is not None else minimum_ms / 1000,
            persistent=persistent, key_serde=first.key_serde,
            value_serde=TimestampedSerde(values)), *nodes)
        merged = builder.add_processor("COGROUPKSTREAM-MERGE", Passthrough, nodes, name=name)
        return Table(builder, merged, TimeWindowGetter(store),
                     key_serde=TimeWindowedSerde(first.key_serde, size=windows.size),
                     value_serde=values, store=store, window_grace_ms=windows.grace_ms,
                     old_values=old_values)


__all__ = ["CogroupedStream", "TimeWindowedCogroupedStream"]
