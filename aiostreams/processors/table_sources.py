"""Where tables come from: a topic (``app.table``) or a stream (``stream.to_table()``).

Both read a changelog of per-key values into a changelog-backed key-value store through a
:class:`TableSourceProcessor` (Kafka's ``KTableSource``), whose updates carry old values
when a downstream operator asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiostreams.processors.store_values import plain_value
from aiostreams.processors.table_changes import OldValues, update, write_stamped
from aiostreams.processors.tables import require_reads_now
from aiostreams.topology.processor import Processor, ProcessorContext
from aiostreams.types import Record
from aiostreams.windows import DroppedRecords, to_ms

if TYPE_CHECKING:
    pass

AnyRecord = Record[Any, Any]


class TableSourceProcessor(Processor[Any, Any]):
    """Materializes a topic: put (or delete, for a null value) with the record's timestamp,
    then forward the update (a delete of a key it does not hold too, as Kafka Streams
    does), with the old value when ``old_values`` is on. Records with a null key cannot be
    stored and are dropped (counted). Synchronous: its store (the DSL's key-value store)
    answers the old value's read without awaiting."""

    def __init__(self, store: str, old_values: OldValues,
                 dropped: DroppedRecords | None = None) -> None:
        self.store_name = store
        self.old_values = old_values
        self.dropped = dropped if dropped is not None else DroppedRecords()
        self.null_keys_dropped = 0

    async def init(self, context: ProcessorContext) -> None:
        await super().init(context)
        if self.old_values.enabled:
            require_reads_now(context, self.store_name)

    def process(self, record: AnyRecord) -> None:
        if record.key is None:
            self.null_keys_dropped += 1
            self.dropped.drop(self.context, "null_key")
            return
        ctx = self.context
        old = (plain_value(ctx.store(self.store_name).get_now(record.key))
               if self.old_values.enabled else None)
        write_stamped(ctx, self.store_name, record.key, record.value,
                      to_ms(record.timestamp))
        ctx.forward(update(record, record.value, old))


__all__ = ["TableSourceProcessor"]
