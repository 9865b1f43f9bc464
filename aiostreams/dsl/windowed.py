"""Windowed aggregation in the DSL: ``grouped.windowed_by(windows).count()`` and friends.

The window specifications and the windowed key live in :mod:`aiostreams.windows`;
the processors, with Kafka Streams' semantics (closing by the operator's own stream time,
result timestamps, session merges), in :mod:`aiostreams.processors.windows`. This
module builds them into the topology: one processor and one window store per aggregation,
and a :class:`~aiostreams.dsl.table.Table` of :class:`Windowed` keys whose key
serde is Kafka Streams' wire format for the window kind.

State lives in window stores: ``(key, window start)`` → the aggregate with its timestamp
(``ValueAndTimestamp``) for time windows, and ``(key, session end)`` →
``(session start, aggregate)`` for sessions (keyed by end so the store's retention, which
drops by its time, expires sessions by their end).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from aiostreams.dsl.table import Table
from aiostreams.errors import ConfigError
from aiostreams.processors.emit_final import (
    EmitOnWindowCloseProcessor,
    SessionEmitOnWindowCloseProcessor,
    SlidingEmitOnWindowCloseProcessor,
    session_segment_ms,
)
from aiostreams.processors.sliding_windows import SlidingWindowAggregateProcessor
from aiostreams.processors.steps import Reducing, require_sync
from aiostreams.processors.store_values import (
    TimedSerde,
    TimestampedSerde,
    kv_store_spec,
    window_store_spec,
)
from aiostreams.processors.table_changes import OldValues
from aiostreams.processors.tables import initial_value
from aiostreams.processors.windows import (
    SessionAggregateProcessor,
    SessionGetter,
    TimeWindowAggregateProcessor,
    TimeWindowGetter,
)
from aiostreams.serde import JsonSerde, LongSerde, Serde, StrSerde, serde_for
from aiostreams.windows import (
    SessionWindowedSerde,
    SessionWindows,
    SlidingWindows,
    TimeWindowedSerde,
    TimeWindows,
    Windowed,
    to_ms,
)

if TYPE_CHECKING:
    from aiostreams.dsl.builder import StreamsBuilder
    from aiostreams.dsl.table import GroupedStream

K = TypeVar("K")
V = TypeVar("V")
VA = TypeVar("VA")


# -- the user-facing classes ------------------------------------------------------------


def _value_serde(given: Any, known: Serde[Any] | None) -> Serde[Any]:
    if given is not None:
        return serde_for(given)
    return known if known is not None else JsonSerde()


class TimeWindowedStream(Generic[K, V]):
    """A grouped stream aggregated per time window (see the module docstring).

    ``retention`` (seconds) is how long the store keeps windows; at least, and by
    default, ``size + grace``."""

    def __init__(self, grouped: GroupedStream[K, V], windows: TimeWindows) -> None:
        if not isinstance(windows, TimeWindows):
            raise ConfigError(
                f"windowed_by() needs TumblingWindows, HoppingWindows or SessionWindows, "
                f"got {type(windows).__name__}")
        self.grouped = grouped
        self.windows = windows
        self.on_window_close = False

    def emit_on_window_close(self) -> TimeWindowedStream[K, V]:
        """Emit each window once, its final value, when it closes (stream time passes its
        end + grace), instead of every update: Kafka Streams' ``EmitStrategy
        .onWindowClose()``. See :mod:`aiostreams.processors.emit_final`."""
        final = TimeWindowedStream(self.grouped, self.windows)
        final.on_window_close = True
        return final

    def _aggregate(self, kind: str, start: Callable[[], Any],
                   adder: Callable[[Any, Any, Any], Any], *, materialized: str | None,
                   persistent: bool, retention: float | None, value_serde: Serde[Any],
                   name: str | None, caching: bool = True) -> Table[Windowed[K], Any]:
        builder = self.grouped.builder
        windows = self.windows
        minimum = (windows.size_ms + windows.grace_ms) / 1000
        if retention is not None and to_ms(retention) < windows.size_ms + windows.grace_ms:
            raise ConfigError(
                f"retention ({retention}s) must be at least window size + grace "
                f"({minimum}s), or open windows would be forgotten")
        store = builder.store_name("KSTREAM-AGGREGATE-STATE-STORE", materialized)
        late = builder.late
        old_values = OldValues()  # a final result carries none (Kafka: Change(final, null))
        if self.on_window_close:
            node = emit_on_window_close(
                builder, kind, store, windows, start, adder, self.grouped,
                persistent=persistent, name=name,
                retention_ms=to_ms(retention) if retention is not None
                else windows.size_ms + windows.grace_ms)
        else:
            node = builder.add_processor(
                kind, lambda: TimeWindowAggregateProcessor(store, windows, start, adder, late,
                                                     caching, old_values),
                [self.grouped.stream.node], name=name)
        builder.add_store(window_store_spec(
            store, retention=retention if retention is not None else minimum,
            persistent=persistent, key_serde=self.grouped.key_serde,
            value_serde=TimestampedSerde(value_serde)), node)
        return Table(builder, node, TimeWindowGetter(store),
                     key_serde=TimeWindowedSerde(self.grouped.key_serde, size=windows.size),
                     value_serde=value_serde, store=store, window_grace_ms=windows.grace_ms,
                     old_values=old_values)

    def count(self, *, materialized: str | None = None, persistent: bool = False,
              retention: float | None = None, name: str | None = None,
              caching: bool = True) -> Table[Windowed[K], int]:
        """The number of records per key and window. ``caching=False``: this store never
        has a record cache, whatever ``cache_max_bytes`` (Kafka's
        ``Materialized.withCachingDisabled``)."""
        return self._aggregate("KSTREAM-AGGREGATE", lambda: 0, lambda _k, _v, n: n + 1,
                               materialized=materialized, persistent=persistent,
                               retention=retention, value_serde=LongSerde(), name=name,
                               caching=caching)

    def reduce(self, reducer: Callable[[V, V], V], *, materialized: str | None = None,
               persistent: bool = False, retention: float | None = None,
               value_serde: Any = None, name: str | None = None,
               caching: bool = True) -> Table[Windowed[K], V]:
        r = Reducing(reducer)
        return self._aggregate(
            "KSTREAM-REDUCE", r.initial, r.add, materialized=materialized,
            persistent=persistent, retention=retention, name=name, caching=caching,
            value_serde=_value_serde(value_serde, self.grouped.value_serde))

    def aggregate(self, initializer: Callable[[], VA] | VA,
                  aggregator: Callable[[K, V, VA], VA], *, materialized: str | None = None,
                  persistent: bool = False, retention: float | None = None,
                  value_serde: Any = None, name: str | None = None,
                  caching: bool = True) -> Table[Windowed[K], VA]:
        require_sync(aggregator, "aggregate")
        return self._aggregate(
            "KSTREAM-AGGREGATE", lambda: initial_value(initializer), aggregator,
            materialized=materialized, persistent=persistent, retention=retention,
            name=name, caching=caching, value_serde=_value_serde(value_serde, None))


class SessionWindowedStream(Generic[K, V]):
    """A grouped stream aggregated per session (see the module docstring). Merging two
    sessions combines their aggregates with ``merger(key, agg1, agg2)``."""

    def __init__(self, grouped: GroupedStream[K, V], windows: SessionWindows) -> None:
        self.grouped = grouped
        self.windows = windows
        self.on_window_close = False

    def emit_on_window_close(self) -> SessionWindowedStream[K, V]:
        """Emit each session once, its final value, when it closes (stream time passes its
        end + gap + grace), instead of every update and merge: Kafka Streams'
        ``EmitStrategy.onWindowClose()``. See :mod:`aiostreams.processors.emit_final`."""
        final = SessionWindowedStream(self.grouped, self.windows)
        final.on_window_close = True
        return final

    def _aggregate(self, kind: str, start: Callable[[], Any],
                   adder: Callable[[Any, Any, Any], Any],
                   merger: Callable[[Any, Any, Any], Any], *, materialized: str | None,
                   persistent: bool, retention: float | None, value_serde: Serde[Any],
                   name: str | None, caching: bool) -> Table[Windowed[K], Any]:
        builder = self.grouped.builder
        windows = self.windows
        minimum = (windows.gap_ms + windows.grace_ms) / 1000
        if retention is not None and to_ms(retention) < windows.gap_ms + windows.grace_ms:
            raise ConfigError(f"retention ({retention}s) must be at least gap + grace "
                              f"({minimum}s), or open sessions would be forgotten")
        store = builder.store_name("KSTREAM-SESSION-STATE-STORE", materialized)
        old_values = OldValues()
        late = builder.late
        kept = retention if retention is not None else minimum
        kept_ms = to_ms(kept)
        key_serde = self.grouped.key_serde
        if self.on_window_close:
            emit_store = f"{store}-EMIT-TIME"
            node = builder.add_processor(
                kind, lambda: SessionEmitOnWindowCloseProcessor(
                    store, windows, kept_ms, start, adder, merger, late, emit_store,
                    key_serde), [self.grouped.stream.node], name=name)
            add_emit_store(builder, emit_store, node, persistent=persistent)
            # Kafka's time-ordered session store holds sessions in whole segments
            kept = (kept_ms + session_segment_ms(kept_ms)) / 1000
        else:
            node = builder.add_processor(
                kind, lambda: SessionAggregateProcessor(store, windows, kept_ms, start, adder,
                                                        merger, late, caching, old_values),
                [self.grouped.stream.node], name=name)
        builder.add_store(window_store_spec(
            store, retention=kept, persistent=persistent, key_serde=key_serde,
            value_serde=TimedSerde(value_serde)), node)
        return Table(builder, node, SessionGetter(store),
                     key_serde=SessionWindowedSerde(self.grouped.key_serde),
                     value_serde=value_serde, store=store,
                     window_grace_ms=windows.gap_ms + windows.grace_ms, old_values=old_values)

    def count(self, *, materialized: str | None = None, persistent: bool = False,
              retention: float | None = None, name: str | None = None,
              caching: bool = True) -> Table[Windowed[K], int]:
        """The number of records per key and session. ``caching=False``: this store never
        has a record cache, whatever ``cache_max_bytes`` (Kafka's
        ``Materialized.withCachingDisabled``); so for ``reduce`` and ``aggregate``."""
        return self._aggregate("KSTREAM-AGGREGATE", lambda: 0, lambda _k, _v, n: n + 1,
                               lambda _k, a, b: a + b, materialized=materialized,
                               persistent=persistent, retention=retention,
                               value_serde=LongSerde(), name=name, caching=caching)

    def reduce(self, reducer: Callable[[V, V], V], *, materialized: str | None = None,
               persistent: bool = False, retention: float | None = None,
               value_serde: Any = None, name: str | None = None,
               caching: bool = True) -> Table[Windowed[K], V]:
        r = Reducing(reducer)
        return self._aggregate(
            "KSTREAM-REDUCE", r.initial, r.add, r.merge, materialized=materialized,
            persistent=persistent, retention=retention, name=name, caching=caching,
            value_serde=_value_serde(value_serde, self.grouped.value_serde))

    def aggregate(self, initializer: Callable[[], VA] | VA,
                  aggregator: Callable[[K, V, VA], VA], merger: Callable[[K, VA, VA], VA],
                  *, materialized: str | None = None, persistent: bool = False,
                  retention: float | None = None, value_serde: Any = None,
                  name: str | None = None, caching: bool = True) -> Table[Windowed[K], VA]:
        require_sync(aggregator, "aggregate")
        require_sync(merger, "aggregate")
        return self._aggregate(
            "KSTREAM-AGGREGATE", lambda: initial_value(initializer), aggregator, merger,
            materialized=materialized, persistent=persistent, retention=retention,
            name=name, caching=caching, value_serde=_value_serde(value_serde, None))


class SlidingWindowedStream:
    """A grouped stream aggregated over sliding windows (``windowed_by(SlidingWindows)``)."""

    def __init__(self, grouped: GroupedStream[Any, Any], windows: SlidingWindows) -> None:
        self.grouped = grouped
        self.windows = windows
        self.on_window_close = False

    def emit_on_window_close(self) -> SlidingWindowedStream:
        """Emit each window once, its final value, when it closes (stream time passes its
        end + grace), instead of every update: Kafka Streams' ``EmitStrategy
        .onWindowClose()``. See :mod:`aiostreams.processors.emit_final`."""
        final = SlidingWindowedStream(self.grouped, self.windows)
        final.on_window_close = True
        return final

    def _aggregate(self, start: Callable[[], Any], adder: Callable[[Any, Any, Any], Any], *,
                   materialized: str | None, persistent: bool, retention: float | None,
                   value_serde: Serde[Any], name: str | None,
                   caching: bool) -> Table[Windowed[Any], Any]:
        builder = self.grouped.builder
        windows = self.windows
        minimum_ms = 2 * windows.difference_ms + windows.grace_ms
        if retention is not None and to_ms(retention) < minimum_ms:
            raise ConfigError(f"retention ({retention}s) of a sliding-window store must be at "
                              f"least 2 x time difference + grace ({minimum_ms / 1000}s)")
        store = builder.store_name("KSTREAM-AGGREGATE-STATE-STORE", materialized)
        old_values = OldValues()
        late = builder.late
        kept_ms = to_ms(retention) if retention is not None else minimum_ms
        key_serde = self.grouped.key_serde
        if self.on_window_close:
            emit_store = f"{store}-EMIT-TIME"
            node = builder.add_processor(
                "KSTREAM-AGGREGATE", lambda: SlidingEmitOnWindowCloseProcessor(
                    store, windows, start, adder, late, emit_store, key_serde, kept_ms),
                [self.grouped.stream.node], name=name)
            add_emit_store(builder, emit_store, node, persistent=persistent)
        else:
            node = builder.add_processor(
                "KSTREAM-AGGREGATE",
                lambda: SlidingWindowAggregateProcessor(store, windows, start, adder, late,
                                                        retention_ms=kept_ms, caching=caching,
                                                        old_values=old_values),
                [self.grouped.stream.node], name=name)
        builder.add_store(window_store_spec(
            store, retention=retention if retention is not None else minimum_ms / 1000,
            persistent=persistent, key_serde=self.grouped.key_serde,
            value_serde=TimestampedSerde(value_serde)), node)
        from aiostreams.processors.windows import TimeWindowGetter

        return Table(builder, node, TimeWindowGetter(store),
                     key_serde=TimeWindowedSerde(self.grouped.key_serde,
                                                 size=windows.difference_ms / 1000),
                     value_serde=value_serde, store=store, window_grace_ms=windows.grace_ms,
                     old_values=old_values)

    def count(self, *, materialized: str | None = None, persistent: bool = False,
              retention: float | None = None, name: str | None = None,
              caching: bool = True) -> Table[Any, int]:
        """The number of records per key and window. ``caching=False``: this store never
        has a record cache, whatever ``cache_max_bytes`` (Kafka's
        ``Materialized.withCachingDisabled``); so for ``reduce`` and ``aggregate``."""
        return self._aggregate(lambda: 0, lambda _k, _v, n: n + 1, materialized=materialized,
                               persistent=persistent, retention=retention,
                               value_serde=LongSerde(), name=name, caching=caching)

    def reduce(self, reducer: Callable[[Any, Any], Any], *, materialized: str | None = None,
               persistent: bool = False, retention: float | None = None,
               value_serde: Any = None, name: str | None = None,
               caching: bool = True) -> Table[Any, Any]:
        """``reducer(aggregate, value)``; a window's first value is its aggregate."""

        require_sync(reducer, "reduce")
        return self._aggregate(
            lambda: None, lambda _k, v, agg: v if agg is None else reducer(agg, v),
            materialized=materialized, persistent=persistent, retention=retention, name=name,
            caching=caching,
            value_serde=serde_for(value_serde) if value_serde is not None
            else self.grouped.value_serde or JsonSerde())

    def aggregate(self, initializer: Any, aggregator: Callable[[Any, Any, Any], Any], *,
                  materialized: str | None = None, persistent: bool = False,
                  retention: float | None = None, value_serde: Any = None,
                  name: str | None = None, caching: bool = True) -> Table[Any, Any]:

        require_sync(aggregator, "aggregate")
        return self._aggregate(
            lambda: initial_value(initializer), aggregator, materialized=materialized,
            persistent=persistent, retention=retention, name=name, caching=caching,
            value_serde=serde_for(value_serde) if value_serde is not None else JsonSerde())



def emit_on_window_close(builder: StreamsBuilder, kind: str, store: str, windows: TimeWindows,
                         start: Callable[[], Any], adder: Callable[[Any, Any, Any], Any],
                         grouped: GroupedStream[Any, Any], *, persistent: bool,
                         name: str | None, retention_ms: int) -> str:
    """The node of a time-windowed aggregation that emits on window close, with the
    changelogged store of its last emission's close time."""
    emit_store = f"{store}-EMIT-TIME"
    late = builder.late
    key_serde = grouped.key_serde
    node = builder.add_processor(
        kind, lambda: EmitOnWindowCloseProcessor(store, windows, start, adder, late,
                                                 emit_store, key_serde, retention_ms),
        [grouped.stream.node], name=name)
    add_emit_store(builder, emit_store, node, persistent=persistent)
    return node


def add_emit_store(builder: StreamsBuilder, emit_store: str, node: str, *,
                   persistent: bool) -> None:
    """The changelogged store of an emit-on-window-close node's last emission close time
    (see :mod:`aiostreams.processors.emit_final`)."""
    builder.add_store(kv_store_spec(emit_store, persistent=persistent, key_serde=StrSerde(),
                                    value_serde=LongSerde()), node)

__all__ = ["SessionWindowedStream", "SlidingWindowedStream", "TimeWindowedStream"]
