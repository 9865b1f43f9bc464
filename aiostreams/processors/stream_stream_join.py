"""The windowed stream-stream join, with Kafka Streams 3.9's semantics (KAFKA-10847).

Each side has a processor (``is_left`` or not) and a window store of its records
(``(key, timestamp)`` → the values with that timestamp). Both processors of one join in
one task share a :class:`JoinTime` (Kafka's ``TimeTracker``): the join's stream time over
the records that reached *either* side, the time of each side's store, and the earliest
timestamp waiting in the outer store. Every record first awaits the records issued before
it (``wait_for_earlier_records``), so the join sees its records one at a time in offset
order whatever the concurrency upstream.

A record ``(k, v)`` at ``t`` on a side whose join window reaches ``before`` back and
``after`` ahead (the right side's are the left's swapped):

1. stream time becomes ``max(stream time, t)``;
2. a null key with a non-null value on an *outer* side (the left of a left join, both of an
   outer join) is emitted at once as ``joiner(v, None)`` (KIP-962); otherwise a null key or
   value is skipped (a non-null key still advances its store's time, as Kafka's window
   store put of a null does);
3. when ``t`` is the stream time, the non-joined records waiting in the outer store whose
   window has closed are emitted, oldest first, stamped with their own timestamps
   (``joiner(l, None)`` / ``joiner(None, r)``) and removed;
4. ``v`` joins each record of the other side's store with key ``k`` and a timestamp in
   ``[max(0, t - before), max(0, t + after)]`` still visible there (no older than that
   store's time - retention + 1), emitting ``joiner`` stamped ``max(t, other)``; a match
   removes the other record's entry from the outer store;
5. on an outer side, a record with no match goes to the outer store (or is emitted at once
   when its window ``t + after`` is already before stream time);
6. the record is put into its own side's store (dropped there when ``t <= store time -
   retention``), where ``retention = before + after + grace`` of the join windows.

A waiting left record at ``t`` is emitted once ``t + after + grace < stream time``; a
right one once ``t + before + grace < stream time`` (the windows' own ``before``/``after``).

Kafka throttles step 3 by wall-clock time (an internal emit interval, 1 s by default);
aiostreams emits at every opportunity, which is what Kafka does with that interval at 0.
Store visibility follows Kafka's in-memory window stores (exact to the millisecond).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiostreams.processors.store_values import ListSerde, fetch_all, window_access
from aiostreams.serde import Serde
from aiostreams.topology.processor import Processor
from aiostreams.topology.stream_time import NO_TIME
from aiostreams.types import Record
from aiostreams.windows import restamped, to_ms

AnyRecord = Record[Any, Any]
_NEVER = 2**63 - 1
_TS = struct.Struct(">q")


@dataclass
class JoinTime:
    """The time state one join shares between its two processors in one task.

    Invariant: ``stream_ms`` and each ``store_ms`` never decrease (asserted)."""

    stream_ms: int = NO_TIME
    min_waiting_ms: int = _NEVER
    store_ms: dict[bool, int] = field(default_factory=lambda: {True: NO_TIME, False: NO_TIME})

    def observe(self, ts_ms: int) -> int:
        before = self.stream_ms
        self.stream_ms = max(before, ts_ms)
        assert self.stream_ms >= before, "join stream time moved back"
        return self.stream_ms

    def advance_store(self, left: bool, ts_ms: int) -> int:
        self.store_ms[left] = max(self.store_ms[left], ts_ms)
        return self.store_ms[left]


class JoinTimes:
    """One :class:`JoinTime` per task for one join (both processors ask with their task's
    id); dropped when a processor of the task closes, as Kafka does."""

    def __init__(self) -> None:
        self._by_task: dict[str, JoinTime] = {}

    def of(self, task_id: str) -> JoinTime:
        return self._by_task.setdefault(task_id, JoinTime())

    def release(self, task_id: str) -> None:
        self._by_task.pop(task_id, None)


class WaitingKeySerde:
    """Keys of the outer store, ``(timestamp ms, is_left, key)``, as Kafka lays them out:
    8-byte big-endian timestamp, one side byte (1 left, 0 right), the key's bytes; so the
    store's byte order is Kafka's emission order."""

    def __init__(self, inner: Serde[Any]) -> None:
        self.inner = inner

    def serialize(self, topic: str, value: tuple[int, bool, Any] | None) -> bytes | None:
        if value is None:
            return None
        ts, left, key = value
        return _TS.pack(ts) + (b"\x01" if left else b"\x00") + (
            self.inner.serialize(topic, key) or b"")

    def deserialize(self, topic: str, data: bytes | None) -> tuple[int, bool, Any] | None:
        if data is None:
            return None
        (ts,) = _TS.unpack_from(data)
        return ts, data[8] == 1, self.inner.deserialize(topic, data[9:])


class WaitingValueSerde:
    """Values of the outer store: the waiting values of one side, ``(is_left, [values])``,
    as a side byte and a :class:`ListSerde` of that side's values."""

    def __init__(self, left: Serde[Any], right: Serde[Any]) -> None:
        self.sides = {True: ListSerde(left), False: ListSerde(right)}

    def serialize(self, topic: str, value: tuple[bool, list[Any]] | None) -> bytes | None:
        if value is None:
            return None
        left, values = value
        return (b"\x01" if left else b"\x00") + (self.sides[left].serialize(topic, values)
                                                 or b"")

    def deserialize(self, topic: str, data: bytes | None) -> tuple[bool, list[Any]] | None:
        if data is None:
            return None
        left = data[0] == 1
        return left, self.sides[left].deserialize(topic, data[1:]) or []


@dataclass(frozen=True)
class JoinSpec:
    """What both processors of a join share: stores, windows (ms), joiner, time."""

    left_store: str
    right_store: str
    outer_store: str | None  # present for left and outer joins
    before_ms: int
    after_ms: int
    grace_ms: int
    joiner: Callable[[Any, Any], Any]  # the user's joiner(left, right)
    times: JoinTimes

    @property
    def retention_ms(self) -> int:
        return self.before_ms + self.after_ms + self.grace_ms


class StreamStreamJoinProcessor(Processor[Any, Any]):
    """One side of a stream-stream join; see the module docstring."""

    def __init__(self, spec: JoinSpec, *, is_left: bool, outer: bool) -> None:
        self.spec = spec
        self.is_left = is_left
        self.outer = outer
        self.this_store = spec.left_store if is_left else spec.right_store
        self.other_store = spec.right_store if is_left else spec.left_store
        self.before_ms = spec.before_ms if is_left else spec.after_ms
        self.after_ms = spec.after_ms if is_left else spec.before_ms
        self.skipped = 0
        self._task_id: str | None = None

    def pair(self, this: Any, other: Any) -> Any:
        return self.spec.joiner(this, other) if self.is_left else self.spec.joiner(other, this)

    async def close(self) -> None:
        if self._task_id is not None:
            self.spec.times.release(self._task_id)

    async def process(self, record: AnyRecord) -> None:
        ctx = self.context
        await ctx.wait_for_earlier_records()
        self._task_id = ctx.task_id
        time = self.spec.times.of(ctx.task_id)
        ts = to_ms(record.timestamp)
        now = time.observe(ts)
        key, value = record.key, record.value
        if key is None and value is not None and self.outer:
            ctx.forward(record.with_value(self.pair(value, None)))
            return
        if key is None or value is None:
            self.skipped += 1
            if key is not None:
                time.advance_store(self.is_left, ts)
            return
        if ts == now and self.spec.outer_store is not None:
            await self._emit_closed(time, record)
        matched = await self._join(time, record, ts)
        if self.outer and not matched:
            time_to = max(0, ts + self.after_ms)
            if self.spec.outer_store is None or time_to < now:
                ctx.forward(record.with_value(self.pair(value, None)))
            else:
                time.min_waiting_ms = min(time.min_waiting_ms, ts)
                waiting = ctx.store(self.spec.outer_store)
                slot = (ts, self.is_left, key)
                held = await waiting.get(slot)
                waiting.put(slot, (self.is_left, [*(held[1] if held else ()), value]))
        await self._remember(time, key, value, ts)

    async def _join(self, time: JoinTime, record: AnyRecord, ts: int) -> bool:
        ctx = self.context
        key, value = record.key, record.value
        time_from = max(0, ts - self.before_ms)
        time_to = max(0, ts + self.after_ms)
        visible = max(time_from, time.store_ms[not self.is_left] - self.spec.retention_ms + 1)
        if visible > time_to:
            return False
        others = await fetch_all(window_access(ctx.store(self.other_store)), key,
                                 visible / 1000, time_to / 1000)
        matched = False
        for other_time, other_values in others:
            other_ms = to_ms(other_time)
            if self.spec.outer_store is not None:
                ctx.store(self.spec.outer_store).delete((other_ms, not self.is_left, key))
            for other in other_values:
                matched = True
                ctx.forward(restamped(record, key, self.pair(value, other), max(ts, other_ms)))
        return matched

    async def _remember(self, time: JoinTime, key: Any, value: Any, ts: int) -> None:
        store_ms = time.advance_store(self.is_left, ts)
        if ts <= store_ms - self.spec.retention_ms:
            return  # Kafka's window store drops a put that is already expired
        mine = window_access(self.context.store(self.this_store))
        buffered = await mine.get(key, ts / 1000)
        mine.put(key, ts / 1000, [*(buffered or ()), value])

    async def _emit_closed(self, time: JoinTime, record: AnyRecord) -> None:
        """Step 3 of the module docstring."""
        spec = self.spec
        assert spec.outer_store is not None
        if time.min_waiting_ms + self.after_ms + spec.grace_ms >= time.stream_ms:
            return
        time.min_waiting_ms = _NEVER
        waiting = self.context.store(spec.outer_store)
        open_sides: set[bool] = set()
        emitted: list[tuple[int, bool, Any]] = []
        async for slot, (left, values) in waiting.range(None, None):
            ts, _, key = slot
            time.min_waiting_ms = ts
            if len(open_sides) == 2:
                break
            look = spec.after_ms if left else spec.before_ms
            if ts + look + spec.grace_ms >= time.stream_ms:
                open_sides.add(left)
                continue
            for value in values:
                result = spec.joiner(value, None) if left else spec.joiner(None, value)
                self.context.forward(restamped(record, key, result, ts))
            emitted.append(slot)
        for slot in emitted:
            waiting.delete(slot)
