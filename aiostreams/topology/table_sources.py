"""Where tables come from: a topic (``app.table``) or a stream (``stream.to_table()``).

Both read a changelog of per-key values into a changelog-backed key-value store through a
:class:`TableSourceProcessor` (Kafka's ``KTableSource``), whose updates carry old values
when a downstream operator asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiostreams.serde import JsonSerde, Serde, serde_for
from aiostreams.topic import Topic
from aiostreams.topology.dsl_stores import TimestampedSerde, kv_store_spec, plain_value
from aiostreams.topology.dsl_table import StoreGetter, Table
from aiostreams.topology.processor import Processor
from aiostreams.topology.table_changes import OldValues, update, write_stamped
from aiostreams.topology.windows import to_ms
from aiostreams.types import Record

if TYPE_CHECKING:
    from aiostreams.topology.dsl import StreamsBuilder
    from aiostreams.topology.dsl_stream import Stream

AnyRecord = Record[Any, Any]


class TableSourceProcessor(Processor[Any, Any]):
    """Materializes a topic: put (or delete, for a null value) with the record's timestamp,
    then forward the update (a delete of a key it does not hold too, as Kafka Streams
    does), with the old value when ``old_values`` is on. Records with a null key cannot be
    stored and are dropped (counted)."""

    def __init__(self, store: str, old_values: OldValues) -> None:
        self.store_name = store
        self.old_values = old_values
        self.null_keys_dropped = 0

    async def process(self, record: AnyRecord) -> None:
        if record.key is None:
            self.null_keys_dropped += 1
            return
        ctx = self.context
        old = (plain_value(await ctx.store(self.store_name).get(record.key))
               if self.old_values.enabled else None)
        write_stamped(ctx, self.store_name, record.key, record.value,
                      to_ms(record.timestamp))
        ctx.forward(update(record, record.value, old))


def table_from_topic(builder: StreamsBuilder, topic: Topic | str, *, name: str | None,
                     materialized: str | None, persistent: bool) -> Table[Any, Any]:
    """``topic`` read into a materialized table (see :meth:`StreamsBuilder.table`)."""
    topic_name = topic.name if isinstance(topic, Topic) else topic
    source = builder.add_source("KTABLE-SOURCE", [topic],
                                name=None if name is None else f"{name}-source")
    declared = builder.topology.topic(topic_name)
    key_serde = declared.key_serde if declared is not None else serde_for(None)
    value_serde = declared.value_serde if declared is not None else serde_for(None)
    store = builder.store_name(f"{topic_name}-STATE-STORE", materialized)
    return _source_table(builder, "KTABLE-SOURCE", source, store, key_serde, value_serde,
                         name=name, persistent=persistent)


def table_from_stream(stream: Stream[Any, Any], *, name: str | None, materialized: str | None,
                      persistent: bool, key_serde: Any, value_serde: Any) -> Table[Any, Any]:
    """``stream`` read as a table's changelog (see :meth:`Stream.to_table`): Kafka's
    ``toTable``, which repartitions a key-changed stream first."""
    key_s = serde_for(key_serde) if key_serde is not None else stream.key_serde
    value_s = serde_for(value_serde) if value_serde is not None else stream.value_serde
    if stream.key_changed:
        stream = stream.repartitioned(name=name, key_serde=key_s, value_serde=value_s)
        key_s, value_s = stream.key_serde, stream.value_serde
    store = stream.builder.store_name("KSTREAM-TOTABLE-STATE-STORE", materialized)
    table = _source_table(stream.builder, "KSTREAM-TOTABLE", stream.node, store,
                          key_s or JsonSerde(), value_s or JsonSerde(), name=name,
                          persistent=persistent)
    # The store is always kept (joins read it), but like Kafka's unnamed toTable() it
    # computes old values only when something downstream asks for them.
    table.materialized_upstream = materialized is not None
    return table


def _source_table(builder: StreamsBuilder, kind: str, parent: str, store: str,
                  key_serde: Serde[Any], value_serde: Serde[Any], *, name: str | None,
                  persistent: bool) -> Table[Any, Any]:
    old_values = OldValues()
    node = builder.add_processor(kind, lambda: TableSourceProcessor(store, old_values),
                                 [parent], name=name)
    builder.add_store(kv_store_spec(store, persistent=persistent, key_serde=key_serde,
                                    value_serde=TimestampedSerde(value_serde)), node)
    return Table(builder, node, StoreGetter(store), key_serde=key_serde,
                 value_serde=value_serde, store=store, old_values=old_values)


__all__ = ["TableSourceProcessor", "table_from_stream", "table_from_topic"]
