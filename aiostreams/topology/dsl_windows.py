"""Windowed aggregation in the DSL: ``grouped.windowed_by(windows).count()`` and friends.

The window specifications and the windowed key live in :mod:`aiostreams.topology.windows`;
the processors, with Kafka Streams' semantics (closing by the operator's own stream time,
result timestamps, session merges), in :mod:`aiostreams.topology.window_processors`. This
module builds them into the topology: one processor and one window store per aggregation,
and a :class:`~aiostreams.topology.dsl_table.Table` of :class:`Windowed` keys whose key
serde is Kafka Streams' wire format for the window kind.

State lives in window stores: ``(key, window start)`` → the aggregate with its timestamp
(``ValueAndTimestamp``) for time windows, and ``(key, session end)`` →
``(session start, aggregate)`` for sessions (keyed by end so the store's retention, which
drops by its time, expires sessions by their end).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from aiostreams.errors import ConfigError
from aiostreams.serde import JsonSerde, LongSerde, Serde, serde_for
from aiostreams.topology.dsl_stores import TimedSerde, TimestampedSerde, window_store_spec
from aiostreams.topology.dsl_stream import _require_sync
from aiostreams.topology.dsl_table import Table, initial_value
from aiostreams.topology.processor import ProcessorContext
from aiostreams.topology.window_processors import (
    SessionAggregateProcessor,
    SessionGetter,
    TimeWindowAggregateProcessor,
    TimeWindowGetter,
)
from aiostreams.topology.windows import (
    HoppingWindows,
    LateRecords,
    SessionWindowedSerde,
    SessionWindows,
    TimeWindowedSerde,
    TimeWindows,
    TumblingWindows,
    Windowed,
    duration_ms,
    to_ms,
)

if TYPE_CHECKING:
    from aiostreams.topology.dsl_table import GroupedStream

K = TypeVar("K")
V = TypeVar("V")
VA = TypeVar("VA")

__all__ = [
    "HoppingWindows",
    "LateRecords",
    "SessionWindowedSerde",
    "SessionWindowedStream",
    "SessionWindows",
    "TimeWindowedSerde",
    "TimeWindowedStream",
    "TimeWindows",
    "TumblingWindows",
    "Windowed",
    "stream_time_ms",
    "to_ms",
]

_duration_ms = duration_ms  # the name the join module imports


def stream_time_ms(ctx: ProcessorContext) -> int:
    """The task's stream time as of the current record's issue, in milliseconds."""
    now = ctx.stream_time
    return to_ms(now) if math.isfinite(now) else -(2**62)


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

    def _aggregate(self, kind: str, start: Callable[[], Any],
                   adder: Callable[[Any, Any, Any], Any], *, materialized: str | None,
                   persistent: bool, retention: float | None, value_serde: Serde[Any],
                   name: str | None) -> Table[Windowed[K], Any]:
        builder = self.grouped.builder
        windows = self.windows
        minimum = (windows.size_ms + windows.grace_ms) / 1000
        if retention is not None and to_ms(retention) < windows.size_ms + windows.grace_ms:
            raise ConfigError(
                f"retention ({retention}s) must be at least window size + grace "
                f"({minimum}s), or open windows would be forgotten")
        store = builder.store_name("KSTREAM-AGGREGATE-STATE-STORE", materialized)
        late = builder.late
        node = builder.add_processor(
            kind, lambda: TimeWindowAggregateProcessor(store, windows, start, adder, late),
            [self.grouped.stream.node], name=name)
        builder.add_store(window_store_spec(
            store, retention=retention if retention is not None else minimum,
            persistent=persistent, key_serde=self.grouped.key_serde,
            value_serde=TimestampedSerde(value_serde)), node)
        return Table(builder, node, TimeWindowGetter(store),
                     key_serde=TimeWindowedSerde(self.grouped.key_serde, size=windows.size),
                     value_serde=value_serde, store=store, window_grace_ms=windows.grace_ms)

    def count(self, *, materialized: str | None = None, persistent: bool = False,
              retention: float | None = None,
              name: str | None = None) -> Table[Windowed[K], int]:
        return self._aggregate("KSTREAM-AGGREGATE", lambda: 0, lambda _k, _v, n: n + 1,
                               materialized=materialized, persistent=persistent,
                               retention=retention, value_serde=LongSerde(), name=name)

    def reduce(self, reducer: Callable[[V, V], V], *, materialized: str | None = None,
               persistent: bool = False, retention: float | None = None,
               value_serde: Any = None, name: str | None = None) -> Table[Windowed[K], V]:
        _require_sync(reducer, "reduce")
        first = object()

        def add(_key: Any, value: Any, old: Any) -> Any:
            return value if old is first else reducer(old, value)

        return self._aggregate(
            "KSTREAM-REDUCE", lambda: first, add, materialized=materialized,
            persistent=persistent, retention=retention, name=name,
            value_serde=_value_serde(value_serde, self.grouped.value_serde))

    def aggregate(self, initializer: Callable[[], VA] | VA,
                  aggregator: Callable[[K, V, VA], VA], *, materialized: str | None = None,
                  persistent: bool = False, retention: float | None = None,
                  value_serde: Any = None,
                  name: str | None = None) -> Table[Windowed[K], VA]:
        _require_sync(aggregator, "aggregate")
        return self._aggregate(
            "KSTREAM-AGGREGATE", lambda: initial_value(initializer), aggregator,
            materialized=materialized, persistent=persistent, retention=retention,
            name=name, value_serde=_value_serde(value_serde, None))


class SessionWindowedStream(Generic[K, V]):
    """A grouped stream aggregated per session (see the module docstring). Merging two
    sessions combines their aggregates with ``merger(key, agg1, agg2)``."""

    def __init__(self, grouped: GroupedStream[K, V], windows: SessionWindows) -> None:
        self.grouped = grouped
        self.windows = windows

    def _aggregate(self, kind: str, start: Callable[[], Any],
                   adder: Callable[[Any, Any, Any], Any],
                   merger: Callable[[Any, Any, Any], Any], *, materialized: str | None,
                   persistent: bool, retention: float | None, value_serde: Serde[Any],
                   name: str | None) -> Table[Windowed[K], Any]:
        builder = self.grouped.builder
        windows = self.windows
        minimum = (windows.gap_ms + windows.grace_ms) / 1000
        if retention is not None and to_ms(retention) < windows.gap_ms + windows.grace_ms:
            raise ConfigError(f"retention ({retention}s) must be at least gap + grace "
                              f"({minimum}s), or open sessions would be forgotten")
        store = builder.store_name("KSTREAM-SESSION-STATE-STORE", materialized)
        late = builder.late
        kept = retention if retention is not None else minimum
        node = builder.add_processor(
            kind, lambda: SessionAggregateProcessor(store, windows, to_ms(kept), start, adder,
                                                    merger, late),
            [self.grouped.stream.node], name=name)
        builder.add_store(window_store_spec(
            store, retention=kept, persistent=persistent, key_serde=self.grouped.key_serde,
            value_serde=TimedSerde(value_serde)), node)
        return Table(builder, node, SessionGetter(store),
                     key_serde=SessionWindowedSerde(self.grouped.key_serde),
                     value_serde=value_serde, store=store,
                     window_grace_ms=windows.gap_ms + windows.grace_ms)

    def count(self, *, materialized: str | None = None, persistent: bool = False,
              retention: float | None = None,
              name: str | None = None) -> Table[Windowed[K], int]:
        return self._aggregate("KSTREAM-AGGREGATE", lambda: 0, lambda _k, _v, n: n + 1,
                               lambda _k, a, b: a + b, materialized=materialized,
                               persistent=persistent, retention=retention,
                               value_serde=LongSerde(), name=name)

    def reduce(self, reducer: Callable[[V, V], V], *, materialized: str | None = None,
               persistent: bool = False, retention: float | None = None,
               value_serde: Any = None, name: str | None = None) -> Table[Windowed[K], V]:
        _require_sync(reducer, "reduce")
        first = object()

        def add(_key: Any, value: Any, old: Any) -> Any:
            return value if old is first else reducer(old, value)

        def merge(_key: Any, a: Any, b: Any) -> Any:
            return b if a is first else reducer(a, b)

        return self._aggregate(
            "KSTREAM-REDUCE", lambda: first, add, merge, materialized=materialized,
            persistent=persistent, retention=retention, name=name,
            value_serde=_value_serde(value_serde, self.grouped.value_serde))

    def aggregate(self, initializer: Callable[[], VA] | VA,
                  aggregator: Callable[[K, V, VA], VA], merger: Callable[[K, VA, VA], VA],
                  *, materialized: str | None = None, persistent: bool = False,
                  retention: float | None = None, value_serde: Any = None,
                  name: str | None = None) -> Table[Windowed[K], VA]:
        _require_sync(aggregator, "aggregate")
        _require_sync(merger, "aggregate")
        return self._aggregate(
            "KSTREAM-AGGREGATE", lambda: initial_value(initializer), aggregator, merger,
            materialized=materialized, persistent=persistent, retention=retention,
            name=name, value_serde=_value_serde(value_serde, None))
