"""Windowed aggregation: tumbling, hopping and session windows.

Time is event time (record timestamps), in float seconds in the API; window arithmetic is
done in whole milliseconds (Kafka's unit) so window bounds are exact and the same float
every time. Time windows are ``[start, end)`` aligned to the epoch (Kafka's alignment);
session windows are ``[first, last]`` record times of a key with no gap larger than
``gap`` between them.

Closing: a window closes once the task's *stream time* (the largest timestamp the task
has seen, as of the record being processed: ``ctx.stream_time``) reaches its end plus
``grace``. A record that would change a closed window is dropped for that window and
counted (per window, as Kafka's ``dropped-records``): on the processor
(``dropped_late``) and in the app's :class:`LateRecords` (per node, with hooks). A late
record never changes a closed window. A session can still grow until its last record's
time plus ``gap`` and ``grace``, so that is its close time.

Results: every accepted record forwards the updated aggregate of each window it changed,
keyed by :class:`Windowed`; a session merge first forwards ``None`` (a delete) for each
session it replaced.

State lives in window stores: ``(key, window start)`` → aggregate for time windows, and
``(key, session end)`` → ``(session start, aggregate)`` for sessions (keyed by end so the
store's retention, which drops by its time, expires sessions by their end).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from aiostreams.errors import ConfigError, SerializationError
from aiostreams.serde import JsonSerde, LongSerde, Serde, serde_for
from aiostreams.topology.dsl_stores import (
    TimedSerde,
    WindowAccess,
    fetch_all,
    window_access,
    window_store_spec,
)
from aiostreams.topology.dsl_stream import _require_sync
from aiostreams.topology.dsl_table import Table, ValueGetter, initial_value
from aiostreams.topology.processor import Processor, ProcessorContext
from aiostreams.types import Record

if TYPE_CHECKING:
    from aiostreams.topology.dsl_table import GroupedStream

K = TypeVar("K")
V = TypeVar("V")
VA = TypeVar("VA")

AnyRecord = Record[Any, Any]


def to_ms(seconds: float) -> int:
    return round(seconds * 1000)


def _duration_ms(what: str, seconds: float, *, minimum: int = 0) -> int:
    if not isinstance(seconds, int | float) or math.isnan(seconds) or math.isinf(seconds):
        raise ConfigError(f"{what} must be a finite number of seconds, got {seconds!r}")
    ms = to_ms(seconds)
    if ms < minimum:
        raise ConfigError(
            f"{what} must be at least {minimum / 1000} seconds (windows work in whole "
            f"milliseconds), got {seconds}"
        )
    return ms


def stream_time_ms(ctx: ProcessorContext) -> int:
    """The stream time the current record is judged against, in milliseconds."""
    now = ctx.stream_time
    return to_ms(now) if math.isfinite(now) else -(2**62)


@dataclass(frozen=True, slots=True)
class Windowed(Generic[K]):
    """A key of a windowed aggregate: the grouped key and its window (seconds;
    ``[start, end)`` for time windows, ``[start, end]`` for sessions)."""

    key: K
    start: float
    end: float


class WindowedSerde:
    """A :class:`Windowed` key: the inner key's bytes, then start and end as 8-byte
    big-endian milliseconds."""

    _BOUNDS = struct.Struct(">qq")

    def __init__(self, inner: Any = None) -> None:
        self.inner: Serde[Any] = serde_for(inner) if inner is not None else JsonSerde()

    def serialize(self, topic: str, value: Windowed[Any] | None) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, Windowed):
            raise SerializationError(
                f"WindowedSerde for {topic!r} needs a Windowed key, got "
                f"{type(value).__name__}", topic=topic)
        key = self.inner.serialize(topic, value.key) or b""
        return key + self._BOUNDS.pack(to_ms(value.start), to_ms(value.end))

    def deserialize(self, topic: str, data: bytes | None) -> Windowed[Any] | None:
        if data is None:
            return None
        start, end = self._BOUNDS.unpack_from(data, len(data) - self._BOUNDS.size)
        key = self.inner.deserialize(topic, data[:len(data) - self._BOUNDS.size])
        return Windowed(key, start / 1000, end / 1000)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WindowedSerde) and other.inner == self.inner

    def __hash__(self) -> int:
        return hash(("WindowedSerde", self.inner))


class LateRecords:
    """Records dropped because their window had closed, per DSL node, summed over the
    app's tasks. ``on_late(hook)`` registers ``hook(node, record)`` (a metrics exporter,
    a log). Counted when the record executes; a record retried after it was counted is
    counted again."""

    def __init__(self) -> None:
        self.by_node: dict[str, int] = {}
        self._hooks: list[Callable[[str, AnyRecord], None]] = []

    @property
    def total(self) -> int:
        return sum(self.by_node.values())

    def on_late(self, hook: Callable[[str, AnyRecord], None]) -> None:
        self._hooks.append(hook)

    def record(self, node: str, record: AnyRecord) -> None:
        self.by_node[node] = self.by_node.get(node, 0) + 1
        for hook in self._hooks:
            hook(node, record)


# -- window specifications -------------------------------------------------------------


class TimeWindows:
    """Fixed-size windows of ``size`` seconds starting every ``advance`` seconds."""

    def __init__(self, size: float, advance: float, grace: float) -> None:
        self.size_ms = _duration_ms("window size", size, minimum=1)
        self.advance_ms = _duration_ms("window advance", advance, minimum=1)
        self.grace_ms = _duration_ms("grace", grace)
        if self.advance_ms > self.size_ms:
            raise ConfigError(
                f"window advance ({advance}s) must not exceed the size ({size}s): records "
                "between windows would belong to none"
            )

    @property
    def size(self) -> float:
        return self.size_ms / 1000

    @property
    def grace(self) -> float:
        return self.grace_ms / 1000

    def windows_for(self, ts_ms: int) -> list[tuple[int, int]]:
        """``(start, end)`` in ms of every window containing ``ts_ms``, oldest first."""
        first = max(0, ts_ms - self.size_ms + self.advance_ms) // self.advance_ms
        first *= self.advance_ms
        return [(start, start + self.size_ms)
                for start in range(first, ts_ms + 1, self.advance_ms)]


class TumblingWindows(TimeWindows):
    """Back-to-back windows of ``size`` seconds; a record is in exactly one."""

    def __init__(self, size: float, *, grace: float = 0.0) -> None:
        super().__init__(size, size, grace)

    def __repr__(self) -> str:
        return f"TumblingWindows(size={self.size}, grace={self.grace})"


class HoppingWindows(TimeWindows):
    """Windows of ``size`` seconds every ``advance`` seconds (overlapping when
    ``advance < size``; a record is in ``size / advance`` of them)."""

    def __init__(self, size: float, advance: float, *, grace: float = 0.0) -> None:
        super().__init__(size, advance, grace)

    def __repr__(self) -> str:
        return (f"HoppingWindows(size={self.size}, advance={self.advance_ms / 1000}, "
                f"grace={self.grace})")


class SessionWindows:
    """Per-key sessions: records closer than ``gap`` seconds belong to one session."""

    def __init__(self, gap: float, *, grace: float = 0.0) -> None:
        self.gap_ms = _duration_ms("session gap", gap, minimum=1)
        self.grace_ms = _duration_ms("grace", grace)

    def __repr__(self) -> str:
        return f"SessionWindows(gap={self.gap_ms / 1000}, grace={self.grace_ms / 1000})"


# -- processors -------------------------------------------------------------------------


class TimeWindowAggregateProcessor(Processor[Any, Any]):
    """Per record: for each window containing its timestamp that is still open,
    ``new = adder(key, value, old)`` into ``(key, start)`` and forward
    ``(Windowed(key, start, end), new)``. Invariant: nothing is written to or forwarded
    for a window with ``end + grace <= stream time``."""

    def __init__(self, store: str, windows: TimeWindows, start: Callable[[], Any],
                 adder: Callable[[Any, Any, Any], Any], late: LateRecords) -> None:
        self.store_name = store
        self.windows = windows
        self.start = start
        self.adder = adder
        self.late = late
        self.dropped_late = 0
        self.skipped = 0

    async def process(self, record: AnyRecord) -> None:
        key, value = record.key, record.value
        if key is None or value is None:
            self.skipped += 1
            return
        ctx = self.context
        close_ms = stream_time_ms(ctx) - self.windows.grace_ms
        store = window_access(ctx.store(self.store_name))
        for start_ms, end_ms in self.windows.windows_for(to_ms(record.timestamp)):
            if end_ms <= close_ms:
                self.dropped_late += 1
                self.late.record(ctx.node_name, record)
                continue
            start = start_ms / 1000
            old = await store.get(key, start)
            new = self.adder(key, value, self.start() if old is None else old)
            if new is None:
                store.delete(key, start)
            else:
                store.put(key, start, new)
            ctx.forward(record.with_key_value(Windowed(key, start, end_ms / 1000), new))


class SessionAggregateProcessor(Processor[Any, Any]):
    """Per record: find the key's sessions within ``gap`` of its timestamp, merge them
    and the record into one session, store it under its end and forward it (after a
    ``None`` for each replaced session). Invariant: a session whose last time + gap +
    grace <= stream time is never changed."""

    def __init__(self, store: str, windows: SessionWindows, start: Callable[[], Any],
                 adder: Callable[[Any, Any, Any], Any],
                 merger: Callable[[Any, Any, Any], Any], late: LateRecords) -> None:
        self.store_name = store
        self.windows = windows
        self.start = start
        self.adder = adder
        self.merger = merger
        self.late = late
        self.dropped_late = 0
        self.skipped = 0

    async def process(self, record: AnyRecord) -> None:
        key, value = record.key, record.value
        if key is None or value is None:
            self.skipped += 1
            return
        ctx = self.context
        gap, grace = self.windows.gap_ms, self.windows.grace_ms
        now_ms = stream_time_ms(ctx)
        ts = to_ms(record.timestamp)
        store: WindowAccess = window_access(ctx.store(self.store_name))
        found = [(to_ms(end), to_ms(stored[0]), stored[1]) for end, stored in
                 await fetch_all(store, key, (ts - gap) / 1000, max(now_ms, ts) / 1000)
                 if to_ms(stored[0]) <= ts + gap]
        first = min([ts, *(s for _, s, _ in found)])
        last = max([ts, *(e for e, _, _ in found)])
        if last + gap + grace <= now_ms:
            self.dropped_late += 1
            self.late.record(ctx.node_name, record)
            return
        aggregate = self.start()
        for end_ms, start_ms, old in found:
            aggregate = self.merger(key, aggregate, old)
            store.delete(key, end_ms / 1000)
            ctx.forward(record.with_key_value(
                Windowed(key, start_ms / 1000, end_ms / 1000), None))
        aggregate = self.adder(key, value, aggregate)
        store.put(key, last / 1000, (first / 1000, aggregate))
        ctx.forward(record.with_key_value(Windowed(key, first / 1000, last / 1000),
                                          aggregate))


class _TimeWindowGetter(ValueGetter):
    def __init__(self, store: str) -> None:
        self.store = store
        self.stores = (store,)

    async def get(self, ctx: ProcessorContext, key: Any) -> Any | None:
        if not isinstance(key, Windowed):
            return None
        return await window_access(ctx.store(self.store)).get(key.key, key.start)


class _SessionGetter(ValueGetter):
    def __init__(self, store: str) -> None:
        self.store = store
        self.stores = (store,)

    async def get(self, ctx: ProcessorContext, key: Any) -> Any | None:
        if not isinstance(key, Windowed):
            return None
        stored = await window_access(ctx.store(self.store)).get(key.key, key.end)
        if stored is None or to_ms(stored[0]) != to_ms(key.start):
            return None
        return stored[1]


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
            value_serde=value_serde), node)
        return Table(builder, node, _TimeWindowGetter(store),
                     key_serde=WindowedSerde(self.grouped.key_serde),
                     value_serde=value_serde, store=store)

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
        node = builder.add_processor(
            kind, lambda: SessionAggregateProcessor(store, windows, start, adder, merger,
                                                    late),
            [self.grouped.stream.node], name=name)
        builder.add_store(window_store_spec(
            store, retention=retention if retention is not None else minimum,
            persistent=persistent, key_serde=self.grouped.key_serde,
            value_serde=TimedSerde(value_serde)), node)
        return Table(builder, node, _SessionGetter(store),
                     key_serde=WindowedSerde(self.grouped.key_serde),
                     value_serde=value_serde, store=store)

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
