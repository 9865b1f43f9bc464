"""Emit strategy ``on_window_close`` for time-windowed aggregations (Kafka Streams' KIP-825,
``windowedBy(...).emitStrategy(EmitStrategy.onWindowClose())``): a windowed aggregate emits
each window once, its final value, when the window closes, instead of every update.

:class:`EmitOnWindowCloseProcessor` aggregates as the update-emitting processor does
(:class:`~aiostreams.topology.window_processors.TimeWindowAggregateProcessor`) but forwards
nothing then. After each record with a key (a record dropped as late included), with
``close = stream time - grace`` and ``last`` the close time of the previous emission, as
Kafka 3.9's ``KStreamWindowAggregate``:

1. nothing happens unless ``close`` moved past ``last`` (or nothing was emitted yet) and
   ``close - size >= 0``;
2. windows starting in ``[lower, close - size]`` are due, with ``lower = 0`` for the first
   emission, else ``max(0, last - size) + 1``; when ``last`` was set and the windows
   containing ``close - size`` are those containing ``lower - 1``, no new window closed and
   nothing happens (``last`` unchanged);
3. else the due windows of *every* key are forwarded in order of start, then serialized
   key (Kafka's time-ordered store) - those the store still returns by Kafka's rule: start
   at least the greatest window start written minus retention - each
   ``(Windowed(key, start, end), aggregate)`` stamped with the aggregate's timestamp and
   carrying the current record's headers; ``last`` becomes ``close`` (even when no window
   was due).

``last`` is state: it lives in a changelogged key-value store of its own (Kafka keeps it as
processor metadata committed with the offsets), so a restored task emits neither twice nor
never. Kafka additionally emits at most once per ``emit.interval.ms.kstreams.windowed.
aggregation`` of wall-clock time (1 s); aiostreams has no such throttle, i.e. Kafka's
behaviour with that interval at 0, which is how the oracle configures Kafka: results never
depend on wall-clock time or speed.

Invariant (asserted): ``last`` never decreases. Emission reads every key's windows, so it
runs in issue order: the stream-time step has awaited every earlier record of the task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiostreams.serde import Serde
from aiostreams.topology.dsl_stores import ValueAndTimestamp
from aiostreams.topology.stream_time import NO_TIME, StoreTime
from aiostreams.topology.window_processors import TimeWindowAggregateProcessor
from aiostreams.types import Record
from aiostreams.windows import LateRecords, TimeWindows, Windowed, restamped, to_ms

AnyRecord = Record[Any, Any]
LAST_EMIT_KEY = "last-emit-window-close-ms"


class EmitOnWindowCloseProcessor(TimeWindowAggregateProcessor):
    """See the module docstring. ``emit_store`` holds ``last`` under :data:`LAST_EMIT_KEY`;
    ``key_serde`` orders keys of one window start as Kafka's store does."""

    forwards_updates = False

    def __init__(self, store: str, windows: TimeWindows, start: Callable[[], Any],
                 adder: Callable[[Any, Any, Any], Any], late: LateRecords, emit_store: str,
                 key_serde: Serde[Any], retention_ms: int) -> None:
        super().__init__(store, windows, start, adder, late)
        self.emit_store = emit_store
        self.key_serde = key_serde
        self._store_time = StoreTime(retention_ms)
        self._seeded = False

    async def process(self, record: AnyRecord) -> None:
        await super().process(record)
        if record.key is None:
            return
        assert self._time.ms != NO_TIME
        close = self._time.ms - self.windows.grace_ms
        await self._track_store_time(to_ms(record.timestamp), close)
        emits = self.context.store(self.emit_store)
        last: int | None = await emits.get(LAST_EMIT_KEY)
        if last is not None and last >= close:
            return
        size = self.windows.size_ms
        upper = close - size
        if upper < 0:
            return
        lower = 0 if last is None else max(0, last - size) + 1
        if last is not None and ({s for s, _ in self.windows.windows_for(upper)}
                                 == {s for s, _ in self.windows.windows_for(lower - 1)}):
            return
        # Kafka's time-ordered window store returns starts >= its time - retention (one
        # ms more than its other window stores keep).
        lower = max(lower, self._store_time.ms - self._store_time.retention_ms)
        due = ([] if upper < lower else
               await self.context.store(self.store_name).fetch_all(lower / 1000, upper / 1000))
        serialize = self.key_serde.serialize
        due.sort(key=lambda w: (to_ms(w[1]), serialize(self.store_name, w[0]) or b""))
        for key, start, stored in due:
            assert isinstance(stored, ValueAndTimestamp), stored
            start_ms = to_ms(start)
            self.context.forward(restamped(
                record, Windowed(key, start, (start_ms + size) / 1000), stored.value,
                to_ms(stored.timestamp)))
        assert last is None or close > last, (last, close)
        emits.put(LAST_EMIT_KEY, close)

    async def _track_store_time(self, ts: int, close: int) -> None:
        """Follow the window store's time as Kafka's does: the greatest window start
        written (a restored task first reads it from the store)."""
        if not self._seeded:
            self._seeded = True
            stored = await self.context.store(self.store_name).fetch_all(
                -float("inf"), float("inf"))
            for _, start, _ in stored:
                self._store_time.advance(to_ms(start))
        for start_ms, end_ms in self.windows.windows_for(ts):
            if end_ms > close:
                self._store_time.advance(start_ms)


__all__ = ["LAST_EMIT_KEY", "EmitOnWindowCloseProcessor"]
