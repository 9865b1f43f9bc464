"""``table.suppress(...)``: hold a table's updates back, Kafka Streams' ``KTableSuppressProcessor``.

Two kinds (:func:`until_window_closes`, :func:`until_time_limit`); both keep a *buffer*,
one entry per key, in a changelogged store (so it is restored after a restart):

1. A record (an update of the table) first advances the node's stream time (the largest
   timestamp among the updates that reached it; it waits for every earlier record of the
   task, as windowed aggregations do, because it evicts other keys' entries).
2. It is buffered under its key. A key already buffered keeps its place (its *buffer
   time*) and takes the new value, old value, timestamp and headers (Kafka's
   non-resetting semantics). A new entry's buffer time is its window's end
   (``until_window_closes``) or the record's timestamp (``until_time_limit``).
3. Entries whose buffer time is at or before ``stream time - wait`` are emitted and
   removed, in order of (buffer time, serialized key) — ``wait`` is the time limit, or the
   windows' grace (sessions: gap + grace, as Kafka). Then, if more than ``max_records``
   remain: ``emit_early`` emits the earliest until they fit; ``shut_down`` raises
   :class:`SuppressBufferFullError`.
4. An emitted entry is forwarded as an update with the values, timestamp, headers and
   origin of the last record buffered under its key. ``until_window_closes`` drops
   emitted deletes (a final result is never a tombstone); ``until_time_limit`` keeps them.

Only stream time moves the buffer; wall-clock time never does (Kafka 3.9's suppression has
no punctuator either). The node's stream time lives in memory and starts again after a
restart, as Kafka's ``observedStreamTime`` does. Kafka's ``max_bytes`` bound is not
offered (it counts Kafka's own serialized sizes). Step 3 reads the whole buffer each
record: its cost grows with the number of keys held.

Invariant (asserted): after a record, no buffered entry has buffer time ``<= stream time
- wait``, and with ``max_records`` set at most ``max_records`` entries remain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from aiostreams import compact_json
from aiostreams.errors import AiostreamsError, TopologyError
from aiostreams.processors.table_changes import TableUpdate, old_value
from aiostreams.serde import Serde
from aiostreams.topology.processor import Processor
from aiostreams.topology.stream_time import NodeStreamTime
from aiostreams.types import Record
from aiostreams.windows import Suppressed, Windowed, to_ms

if TYPE_CHECKING:
    pass

AnyRecord = Record[Any, Any]


class SuppressBufferFullError(AiostreamsError):
    """A ``shut_down`` suppression buffer would hold more than its ``max_records``."""


@dataclass(frozen=True, slots=True)
class BufferEntry:
    """A buffered update: its buffer time (ms) and its last record's values and context."""

    time_ms: int
    new: Any
    old: Any
    ts_ms: int
    headers: tuple[tuple[str, bytes | None], ...]
    topic: str
    partition: int
    offset: int


class BufferEntrySerde:
    """A :class:`BufferEntry` in the changelog: JSON with the values encoded by ``inner``."""

    def __init__(self, inner: Serde[Any]) -> None:
        self.inner = inner

    def _hex(self, topic: str, value: Any) -> str | None:
        data = None if value is None else self.inner.serialize(topic, value)
        return None if data is None else data.hex()

    def _value(self, topic: str, data: str | None) -> Any:
        return None if data is None else self.inner.deserialize(topic, bytes.fromhex(data))

    def serialize(self, topic: str, e: BufferEntry | None) -> bytes | None:
        if e is None:
            return None
        return compact_json.dumps([e.time_ms, self._hex(topic, e.new),
                                   self._hex(topic, e.old), e.ts_ms,
                                   [[h, None if v is None else v.hex()] for h, v in e.headers],
                                   e.topic, e.partition, e.offset])

    def deserialize(self, topic: str, data: bytes | None) -> BufferEntry | None:
        if data is None:
            return None
        time_ms, new, old, ts_ms, headers, origin, partition, offset = orjson.loads(data)
        return BufferEntry(time_ms, self._value(topic, new), self._value(topic, old), ts_ms,
                           tuple((h, None if v is None else bytes.fromhex(v))
                                 for h, v in headers), origin, partition, offset)


class SuppressProcessor(Processor[Any, Any]):
    """Steps 1-4 of the module docstring."""

    def __init__(self, node: str, store: str, suppressed: Suppressed, wait_ms: int,
                 key_serde: Serde[Any]) -> None:
        self.node = node
        self.store_name = store
        self.suppressed = suppressed
        self.wait_ms = wait_ms
        self.key_serde = key_serde
        self.time = NodeStreamTime()
        self.emitted = 0

    def _buffer_time(self, key: Any, ts_ms: int) -> int:
        if self.suppressed.until == "time_limit":
            return ts_ms
        if not isinstance(key, Windowed):
            raise TopologyError(f"{self.node}: until_window_closes() got a key that is not "
                                f"windowed ({type(key).__name__})")
        return to_ms(key.end)

    async def process(self, record: AnyRecord) -> None:
        ctx = self.context
        ts = to_ms(record.timestamp)
        now = await self.time.observe(ctx, ts)
        store = ctx.store(self.store_name)
        key = record.key
        held = await store.get(key)
        entry = BufferEntry(held.time_ms if held is not None else self._buffer_time(key, ts),
                            record.value, old_value(record), ts, tuple(record.headers),
                            record.topic, record.partition, record.offset)
        # by key bytes, as the store keys them (Python's == merges 1 and True under JSON)
        key_bytes = self._key_bytes
        mine = key_bytes(key)
        entries = {key_bytes(k): (k, e) async for k, e in store.range(None, None)}
        entries[mine] = (key, entry)
        ordered = sorted(entries.items(), key=lambda item: (item[1][1].time_ms, item[0]))
        expiry = now - self.wait_ms
        due = 0
        while due < len(ordered) and ordered[due][1][1].time_ms <= expiry:
            due += 1
        limit = self.suppressed.max_records
        if limit is not None and len(ordered) - due > limit:
            if self.suppressed.when_full == "shut_down":
                raise SuppressBufferFullError(
                    f"{self.node}: the suppression buffer would hold {len(ordered) - due} "
                    f"keys, more than max_records={limit} (when_full='shut_down'); raise "
                    f"max_records, or use until_time_limit(..., when_full='emit_early')")
            due = len(ordered) - limit
        for kb, (k, e) in ordered[:due]:
            self._emit(k, e)
            if kb != mine or held is not None:
                store.delete(k)
        if due == 0 or all(kb != mine for kb, _ in ordered[:due]):
            store.put(key, entry)
        assert all(e.time_ms > expiry for _, (_, e) in ordered[due:])
        assert limit is None or len(ordered) - due <= limit

    def _key_bytes(self, key: Any) -> bytes:
        return self.key_serde.serialize(self.store_name, key) or b""

    def _emit(self, key: Any, e: BufferEntry) -> None:
        if e.new is None and self.suppressed.until == "window_closes":
            return
        self.emitted += 1
        self.context.forward(TableUpdate(key, e.new, e.topic, e.partition, e.offset,
                                         e.ts_ms / 1000, e.headers, e.old))




__all__ = ["BufferEntrySerde", "SuppressBufferFullError", "SuppressProcessor"]
