"""``GroupedStream``: a stream grouped by key, ready to aggregate.

Its records of one key all reach one task (the DSL repartitioned the stream if needed);
``count``/``reduce``/``aggregate`` turn it into a :class:`~aiostreams.dsl.table.Table`
kept in a changelog-backed key-value store, ``windowed_by`` into a windowed stream
(:mod:`aiostreams.dsl.windowed`), ``cogroup`` into a cogrouped one
(:mod:`aiostreams.dsl.cogrouped`). Aggregations forward every update downstream
(Kafka's default, no suppression).

Per-key correctness: an aggregation reads its store, computes and writes under the
engine's key ordering, so same-key records never overlap and the read sees the earlier
record's buffered write (store-to-load forwarding). With ``ordering="unordered"`` that no
longer holds; aggregations need ``key`` or ``partition`` ordering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from aiostreams.processors.steps import Reducing, require_sync
from aiostreams.processors.store_values import TimestampedSerde, kv_store_spec
from aiostreams.processors.tables import AggregateProcessor, StoreGetter, initial_value
from aiostreams.serde import JsonSerde, LongSerde, Serde, serde_for
from aiostreams.windows import SessionWindows, SlidingWindows, TimeWindows

if TYPE_CHECKING:
    from aiostreams.dsl.cogrouped import CogroupedStream
    from aiostreams.dsl.stream import Stream
    from aiostreams.dsl.table import Table
    from aiostreams.dsl.windowed import (
        SessionWindowedStream,
        SlidingWindowedStream,
        TimeWindowedStream,
    )

K = TypeVar("K")
V = TypeVar("V")
VA = TypeVar("VA")

__all__ = ["GroupedStream"]



class GroupedStream(Generic[K, V]):
    """A stream grouped by key, ready to aggregate. ``key_serde``/``value_serde`` (when
    given) encode the grouped keys and values; they default to the stream's."""

    def __init__(self, stream: Stream[K, V], *, key_serde: Any = None,
                 value_serde: Any = None, name: str | None = None) -> None:
        self.stream = stream
        self.builder = stream.builder
        self.key_serde: Serde[Any] = (serde_for(key_serde) if key_serde is not None
                                      else stream.key_serde or JsonSerde())
        self.value_serde: Serde[Any] | None = (serde_for(value_serde)
                                               if value_serde is not None
                                               else stream.value_serde)
        self.name = name

    def _aggregate(self, kind: str, start: Callable[[], Any],
                   adder: Callable[[Any, Any, Any], Any], *, materialized: str | None,
                   persistent: bool, value_serde: Serde[Any], name: str | None,
                   caching: bool = True) -> Table[Any, Any]:
        from aiostreams.dsl.table import Table

        store = self.builder.store_name("KSTREAM-AGGREGATE-STATE-STORE", materialized)
        node = self.builder.add_processor(
            kind, lambda: AggregateProcessor(store, start, adder, caching), [self.stream.node],
            name=name)
        self.builder.add_store(kv_store_spec(store, persistent=persistent,
                                             key_serde=self.key_serde,
                                             value_serde=TimestampedSerde(value_serde)), node)
        return Table(self.builder, node, StoreGetter(store), key_serde=self.key_serde,
                     value_serde=value_serde, store=store)

    def count(self, *, materialized: str | None = None, persistent: bool = False,
              name: str | None = None, caching: bool = True) -> Table[K, int]:
        """The number of records per key (``int``, stored as a 64-bit long).
        ``caching=False``: this store never has a record cache, whatever
        ``cache_max_bytes`` (Kafka's ``Materialized.withCachingDisabled``); so for
        ``reduce`` and ``aggregate``."""
        return self._aggregate("KSTREAM-AGGREGATE", lambda: 0,
                               lambda _k, _v, n: n + 1, materialized=materialized,
                               persistent=persistent, value_serde=LongSerde(), name=name,
                               caching=caching)

    def reduce(self, reducer: Callable[[V, V], V], *, materialized: str | None = None,
               persistent: bool = False, value_serde: Any = None,
               name: str | None = None, caching: bool = True) -> Table[K, V]:
        """``reducer(aggregate, value)``; the first value of a key is its aggregate."""
        r = Reducing(reducer)
        return self._aggregate(
            "KSTREAM-REDUCE", r.initial, r.add, materialized=materialized,
            persistent=persistent, name=name, caching=caching,
            value_serde=self._value_serde(value_serde, self.value_serde))

    def aggregate(self, initializer: Callable[[], VA] | VA,
                  aggregator: Callable[[K, V, VA], VA], *, materialized: str | None = None,
                  persistent: bool = False, value_serde: Any = None,
                  name: str | None = None, caching: bool = True) -> Table[K, VA]:
        """``aggregator(key, value, aggregate)`` starting from ``initializer`` (a function
        of no arguments, or a value, deep-copied per key)."""
        require_sync(aggregator, "aggregate")
        return self._aggregate(
            "KSTREAM-AGGREGATE", lambda: initial_value(initializer), aggregator,
            materialized=materialized, persistent=persistent, name=name, caching=caching,
            value_serde=self._value_serde(value_serde, None))

    def cogroup(self, aggregator: Callable[[K, V, Any], Any]) -> CogroupedStream:
        """Start a cogroup: this stream aggregated by ``aggregator(key, value, aggregate)``,
        with more grouped streams added by ``.cogroup(other, aggregator)``, then
        ``.aggregate(initializer)``. See :mod:`aiostreams.dsl.cogrouped`."""
        from aiostreams.dsl.cogrouped import CogroupedStream

        require_sync(aggregator, "cogroup")
        return CogroupedStream([(self, aggregator)])

    @staticmethod
    def _value_serde(given: Any, known: Serde[Any] | None) -> Serde[Any]:
        if given is not None:
            return serde_for(given)
        return known if known is not None else JsonSerde()

    @overload
    def windowed_by(self, windows: TimeWindows) -> TimeWindowedStream[K, V]: ...

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedStream[K, V]: ...

    @overload
    def windowed_by(self, windows: SlidingWindows) -> SlidingWindowedStream: ...

    def windowed_by(self, windows: TimeWindows | SessionWindows | SlidingWindows,
                    ) -> (TimeWindowedStream[K, V] | SessionWindowedStream[K, V]
                          | SlidingWindowedStream):
        """Aggregate per window: tumbling/hopping windows, sessions or sliding windows (the
        return type follows the windows' type, so a type checker knows the stream's
        methods)."""
        from aiostreams.dsl.windowed import (
            SessionWindowedStream,
            SlidingWindowedStream,
            TimeWindowedStream,
        )
        from aiostreams.windows import SlidingWindows

        if isinstance(windows, SlidingWindows):
            return SlidingWindowedStream(self, windows)
        if isinstance(windows, SessionWindows):
            return SessionWindowedStream(self, windows)
        return TimeWindowedStream(self, windows)
