"""The stream-table and table-table join processors, and the value getter of a joined
table (see :mod:`aiostreams.dsl.join_wiring` for the semantics).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from aiostreams.processors.record_caching import read_flushed
from aiostreams.processors.table_changes import NO_TIMESTAMP, OldValues, old_value, update
from aiostreams.processors.tables import ValueGetter
from aiostreams.topology.processor import Processor, ProcessorContext
from aiostreams.types import Record
from aiostreams.windows import DroppedRecords, to_ms

JoinKind = Literal["inner", "left", "outer"]
AnyRecord = Record[Any, Any]

class StreamTableJoinProcessor(Processor[Any, Any]):
    """Joins each stream record with the table's current value of its key."""

    def __init__(self, getter: ValueGetter, joiner: Callable[[Any, Any], Any],
                 left: bool, dropped: DroppedRecords | None = None) -> None:
        self.getter = getter
        self.joiner = joiner
        self.left = left
        self.dropped = dropped if dropped is not None else DroppedRecords()
        self.skipped = 0

    async def process(self, record: AnyRecord) -> None:
        if record.key is None and record.value is not None and self.left:
            # KIP-962 (Kafka 3.7+): a left join keeps a null-key record, with no table side
            self.context.forward(record.with_value(self.joiner(record.value, None)))
            return
        if record.key is None or record.value is None:
            self.skipped += 1
            self.dropped.drop(self.context, "null_key" if record.key is None else "null_value")
            return
        other = await self.getter.get(self.context, record.key)
        if other is None and not self.left:
            return
        self.context.forward(record.with_value(self.joiner(record.value, other)))


class SyncStreamTableJoinProcessor(StreamTableJoinProcessor):
    """:class:`StreamTableJoinProcessor` over a getter that reads without awaiting
    (``getter.reads_now``): the same join, synchronous, so a synchronous chain around it
    takes the engine's synchronous path."""

    def process(self, record: AnyRecord) -> None:  # type: ignore[override]
        if record.key is None and record.value is not None and self.left:
            self.context.forward(record.with_value(self.joiner(record.value, None)))
            return
        if record.key is None or record.value is None:
            self.skipped += 1
            self.dropped.drop(self.context, "null_key" if record.key is None else "null_value")
            return
        other = self.getter.get_now(self.context, record.key)
        if other is None and not self.left:
            return
        self.context.forward(record.with_value(self.joiner(record.value, other)))


def table_join_result(kind: JoinKind, joiner: Callable[[Any, Any], Any], left: Any,
                      right: Any) -> Any:
    """The value of a table-table join for one key, ``None`` when it has none."""
    if kind == "inner":
        present = left is not None and right is not None
    elif kind == "left":
        present = left is not None
    else:
        present = left is not None or right is not None
    return joiner(left, right) if present else None


class TableTableJoinProcessor(Processor[Any, Any]):
    """One side of a table-table join, with Kafka Streams' forwarding rules
    (``KTableKTable{Inner,Left,Right,Outer}Join``): on an update ``(new, old)`` of this
    side, read the other side's value and timestamp, then

    * the other side has no value: an inner join, and the right side of a left join, emit
      nothing; the left side of a left join and both sides of an outer join emit nothing
      either when ``new`` and ``old`` are both absent, else the result stamped with the
      update's own timestamp;
    * else the result, stamped with the later of the two sides' timestamps.

    The result is ``joiner(left, right)``, or ``None`` (a delete) when this side's new
    value is absent - except on the right side of a left join, which always joins the left
    value with the new right one (possibly ``None``).

    With ``old_values`` on (an aggregate downstream re-groups the joined table, and must
    subtract what it added before), the update also carries the join's previous result:
    the same rule applied to this side's old value and the other side's current one - as
    Kafka Streams computes it, so a re-grouped aggregate subtracts exactly what it added."""

    def __init__(self, other: ValueGetter, joiner: Callable[[Any, Any], Any],
                 kind: JoinKind, this_is_left: bool,
                 old_values: OldValues | None = None) -> None:
        self.other = other
        self.joiner = joiner
        self.kind = kind
        self.this_is_left = this_is_left
        self.old_values = old_values if old_values is not None else OldValues()

    async def init(self, context: ProcessorContext) -> None:
        await super().init(context)
        read_flushed(context)  # a cached other side: what downstream has seen

    def _result(self, value: Any, other: Any) -> Any:
        """The join's result for this side's ``value`` and the other side's ``other``."""
        left, right = (value, other) if self.this_is_left else (other, value)
        if self.kind == "left" and not self.this_is_left:
            return self.joiner(left, right)
        if value is None and (other is None or self.kind != "outer"):
            return None
        return self.joiner(left, right)

    async def process(self, record: AnyRecord) -> None:
        if record.key is None:
            return
        new, old = record.value, old_value(record)
        other, other_ms = await self.other.get_stamped(self.context, record.key)
        left_side_of_left = self.kind == "left" and self.this_is_left
        keeps_unmatched = self.kind == "outer" or left_side_of_left
        ts = to_ms(record.timestamp)
        if other is None:
            if not keeps_unmatched or (new is None and old is None):
                return
            stamp = ts
        else:
            stamp = max(ts, other_ms)
        result = self._result(new, other)
        previous = self._result(old, other) if self.old_values.enabled else None
        self.context.forward(update(record, result, previous, stamp / 1000))


class JoinedTableGetter(ValueGetter):
    def __init__(self, left: ValueGetter, right: ValueGetter,
                 joiner: Callable[[Any, Any], Any], kind: JoinKind) -> None:
        self.left = left
        self.right = right
        self.joiner = joiner
        self.kind = kind
        self.stores = tuple(dict.fromkeys((*left.stores, *right.stores)))

    async def get(self, ctx: ProcessorContext, key: Any) -> Any | None:
        return (await self.get_stamped(ctx, key))[0]

    async def get_stamped(self, ctx: ProcessorContext, key: Any) -> tuple[Any, int]:
        left, left_ms = await self.left.get_stamped(ctx, key)
        right, right_ms = await self.right.get_stamped(ctx, key)
        result = table_join_result(self.kind, self.joiner, left, right)
        return result, max(left_ms, right_ms) if result is not None else NO_TIMESTAMP


__all__ = [
    "JoinKind",
    "JoinedTableGetter",
    "StreamTableJoinProcessor",
    "SyncStreamTableJoinProcessor",
    "TableTableJoinProcessor",
    "table_join_result",
]
