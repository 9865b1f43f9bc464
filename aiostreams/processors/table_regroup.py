"""Re-grouping a table: ``table.group_by(selector)`` then ``count``/``reduce``/``aggregate``.

A table's row can move between groups when its value changes, so an aggregate over a
re-grouped table must *subtract* a row's old contribution and *add* its new one. As Kafka
Streams does (``KTableRepartitionMap`` + ``KTableAggregate``/``KTableReduce``):

1. The **map** (:class:`TableRegroupMapProcessor`) turns each table update ``(key, new,
   old)`` into ``selector(key, old)`` and ``selector(key, new)``. When both land on the
   same group it forwards *one* :class:`Change` carrying both values; otherwise a
   ``Change(new=None, old=...)`` to the old group first, then a ``Change(new=..., old=None)``
   to the new group. A pair whose key or value is ``None`` is not forwarded. The table is
   asked for old values (it computes them from its store), without which nothing could
   be subtracted.
2. The changes go through a repartition topic keyed by group, each value written by
   :class:`ChangeSerde` in Kafka's ``ChangedSerializer`` format, so one task owns a group.
3. The **aggregate** (:class:`TableRegroupAggregateProcessor`) reads the group's stored
   aggregate, subtracts the old value (only when both are present), adds the new one
   (from the initial value when there is no aggregate), stores the result with its
   timestamp and forwards it as a table update. Timestamps follow Kafka: the record's,
   raised to the stored one whenever the stored aggregate took part.

Invariant (asserted): a change on the repartition topic never has both values ``None``
(the map forwards nothing in that case), so the serialized form is always defined.
Per-group correctness rests on the engine's key ordering, as for stream aggregations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from aiostreams.errors import DeserializationError, SerializationError, TopologyError
from aiostreams.processors.record_caching import CachedTable
from aiostreams.processors.table_changes import (
    OldValues,
    old_value,
    read_stamped,
    update,
    write_stamped,
)
from aiostreams.serde import Serde
from aiostreams.topology.processor import Processor, ProcessorContext
from aiostreams.types import Record
from aiostreams.windows import to_ms

if TYPE_CHECKING:
    pass

K = TypeVar("K")
V = TypeVar("V")
VA = TypeVar("VA")

AnyRecord = Record[Any, Any]


@dataclass(frozen=True, slots=True)
class Change:
    """A group's change: the row's value it gains (``new``) and loses (``old``)."""

    new: Any
    old: Any


# -- Kafka's ChangedSerializer format -----------------------------------------------------


def _write_varint(n: int) -> bytes:
    """Kafka's ``ByteUtils.writeVarint``: zig-zag, then 7 bits a byte, low first."""
    z = ((n << 1) ^ (n >> 31)) & 0xFFFFFFFF
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _read_varint(data: bytes) -> tuple[int, int]:
    """The zig-zag varint at the start of ``data`` and the bytes it took."""
    z = shift = pos = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise ValueError("malformed varint")
        byte = data[pos]
        pos += 1
        z |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (z >> 1) ^ -(z & 1), pos


class ChangeSerde:
    """A :class:`Change` as Kafka Streams' ``ChangedSerializer`` writes it (3.x, not
    upgrading): ``old + 0x00``, ``new + 0x01``, or ``varint(len(new)) + new + old + 0x02``,
    each value encoded by ``inner``. Both values ``None`` cannot be written."""

    def __init__(self, inner: Serde[Any]) -> None:
        self.inner = inner

    def serialize(self, topic: str, value: Change | None) -> bytes | None:
        if value is None:
            return None
        new = None if value.new is None else self.inner.serialize(topic, value.new) or b""
        old = None if value.old is None else self.inner.serialize(topic, value.old) or b""
        if new is not None and old is not None:
            return _write_varint(len(new)) + new + old + b"\x02"
        if new is not None:
            return new + b"\x01"
        if old is not None:
            return old + b"\x00"
        raise SerializationError("a table change with neither a new nor an old value "
                                 "cannot be written (an aiostreams bug)", topic=topic)

    def deserialize(self, topic: str, data: bytes | None) -> Change | None:
        if data is None:
            return None
        if not data or data[-1] not in (0, 1, 2):
            raise DeserializationError(
                "not a table change (Kafka's ChangedSerializer format): it must end in a "
                "flag byte 0, 1 or 2", topic=topic)
        body, flag = data[:-1], data[-1]
        if flag == 0:
            return Change(None, self.inner.deserialize(topic, body))
        if flag == 1:
            return Change(self.inner.deserialize(topic, body), None)
        try:
            length, pos = _read_varint(body)
        except ValueError:
            raise DeserializationError("a table change's new-value length is malformed",
                                       topic=topic) from None
        if not 0 <= length <= len(body) - pos:
            raise DeserializationError(
                f"a table change's new value claims {length} bytes of {len(body) - pos}",
                topic=topic)
        return Change(self.inner.deserialize(topic, body[pos:pos + length]),
                      self.inner.deserialize(topic, body[pos + length:]))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChangeSerde) and other.inner == self.inner

    def __hash__(self) -> int:
        return hash(("ChangeSerde", self.inner))


# -- processors ---------------------------------------------------------------------------


class TableRegroupMapProcessor(Processor[Any, Any]):
    """Step 1 of the module docstring: a table update into group changes."""

    def __init__(self, selector: Callable[[Any, Any], tuple[Any, Any]], node: str) -> None:
        self.selector = selector
        self.node = node

    def _pair(self, key: Any, value: Any) -> tuple[Any, Any] | None:
        if value is None:
            return None
        pair = self.selector(key, value)
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise TypeError(f"{self.node}: the group_by selector must return a (key, value) "
                            f"tuple, not {type(pair).__name__}")
        return None if pair[0] is None or pair[1] is None else pair

    def process(self, record: AnyRecord) -> None:
        if record.key is None:
            raise TopologyError(f"{self.node}: a table row has a null key (a table never "
                                f"holds one; an aiostreams bug)")
        new = self._pair(record.key, record.value)
        old = self._pair(record.key, old_value(record))
        if new is not None and old is not None and new[0] == old[0]:
            self.context.forward(record.with_key_value(new[0], Change(new[1], old[1])))
            return
        if old is not None:
            self.context.forward(record.with_key_value(old[0], Change(None, old[1])))
        if new is not None:
            self.context.forward(record.with_key_value(new[0], Change(new[1], None)))


class TableRegroupAggregateProcessor(Processor[Any, Any]):
    """Step 3 of the module docstring. ``add(key, value, agg)``/``subtract(key, value,
    agg)``; ``start()`` is the initial aggregate, or ``None`` for a reduce (whose first
    value is its aggregate). A result of ``None`` deletes the group."""

    def __init__(self, store: str, start: Callable[[], Any] | None,
                 add: Callable[[Any, Any, Any], Any],
                 subtract: Callable[[Any, Any, Any], Any], old_values: OldValues,
                 caching: bool = True) -> None:
        self.store_name = store
        self.start = start
        self.add = add
        self.subtract = subtract
        self.old_values = old_values
        self.caching = caching
        self._table = CachedTable(store)

    async def init(self, context: ProcessorContext) -> None:
        await super().init(context)
        if self.caching:  # with a record cache: held per group, flushed (record_caching)
            self._table.open(context, lambda: self._table.flush(
                self.context, old_values=self.old_values.enabled))

    async def process(self, record: AnyRecord) -> None:
        change = record.value
        assert isinstance(change, Change) and (change.new is not None
                                               or change.old is not None), change
        ctx = self.context
        ts = to_ms(record.timestamp)
        table = self._table
        if table.cache is not None:
            old_agg, old_ts = table.read(ctx, record.key)
        else:
            old_agg, old_ts = await read_stamped(ctx, self.store_name, record.key)
        stamp = ts
        agg = old_agg
        if change.old is not None and old_agg is not None:
            agg = self.subtract(record.key, change.old, old_agg)
            stamp = max(ts, old_ts)
        if change.new is not None:
            if agg is None and self.start is None:
                agg = change.new
            else:
                start = self.start
                agg = self.add(record.key, change.new,
                               agg if agg is not None else start() if start else None)
                # A reduce gets here only with an aggregate (so one was stored); an
                # aggregate raises the stamp whenever the group had one stored.
                if old_agg is not None:
                    stamp = max(ts, old_ts)
        if table.cache is not None:
            table.write(record.key, agg, stamp, record)
            return
        write_stamped(ctx, self.store_name, record.key, agg, stamp)
        ctx.forward(update(record, agg,
                           old_agg if self.old_values.enabled else None, stamp / 1000))




__all__ = [
    "Change",
    "ChangeSerde",
    "TableRegroupAggregateProcessor",
    "TableRegroupMapProcessor",
]
