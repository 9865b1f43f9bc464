"""Global tables (Kafka Streams' ``GlobalKTable``): a topic replicated in full on every
worker, read by stream-global-table joins through a key selector.

``app.global_table(topic)`` gives a :class:`GlobalTable`. Unlike a table, it is not split
into tasks: every worker holds all of it in a :class:`GlobalStore`, filled by its own
consumer (:func:`global_table_updater`, no consumer group, every partition assigned):

1. **Bootstrap.** When the app starts - before its worker joins the group and before any
   record is processed (it runs as an app resource; see :mod:`aiostreams.lifecycle`) - the
   consumer reads every partition from its beginning up to the end offsets it found then.
   Under ``exactly_once`` it reads committed records only.
2. **Keep up.** It then goes on consuming in the background until the app stops; a join
   reads whatever the store holds when its record executes (as in Kafka Streams, global
   updates and stream records are not ordered with respect to each other).
3. **Restore.** The store is restored from the source topic itself (there is no
   changelog). In memory (no ``state_dir``), every start bootstraps again from the
   beginning; persistent, the rows and a checkpoint of the offsets they hold stay on disk
   and a start reads only the records after the checkpoint
   (:mod:`aiostreams.state.global_copy`, which says when the local copy is wiped).

Records are applied by Kafka's rules for table sources: a null key is skipped, a null value
deletes the key. The store is keyed by the *serialized* key (as Kafka's stores are), so a
join's key selector returning a value of the wrong type fails to serialize: a
:class:`~aiostreams.errors.SerializationError` naming the node, which takes the record's
error path (``on_error="dead_letter"`` sends it to the dead-letter topic) instead of
silently missing. A record that cannot be decoded is skipped and counted
(``GlobalStore.skipped``), never a crash of the updater.

Invariant (asserted): the store's offset of a partition only increases, and is one past the
last record applied.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiostreams.errors import TopologyError
from aiostreams.state.global_store import GlobalStore
from aiostreams.topic import Topic
from aiostreams.topology.processor import Processor
from aiostreams.types import Record

if TYPE_CHECKING:
    from aiostreams.topology.topology import Topology

AnyRecord = Record[Any, Any]


class GlobalTable:
    """A topic replicated in full on every worker; join a stream with it by
    ``stream.join_global(table, key_selector, joiner)``."""

    def __init__(self, topic: Topic, state_dir: Path | None = None) -> None:
        self.topic = topic
        self.store = GlobalStore(topic, state_dir)

    def __repr__(self) -> str:
        return f"<GlobalTable {self.topic.name}>"


class GlobalJoinProcessor(Processor[Any, Any]):
    """Kafka's ``KStreamKTableJoinProcessor`` with a key selector: ``mapped =
    key_selector(key, value)``; a record with a null value or a null mapped key is skipped
    (counted) - except a left join keeps a record with a null *key* - then the global value
    of ``mapped`` is looked up; an inner join emits only when there is one, a left join
    always, ``joiner(value, global value or None)``."""

    def __init__(self, table: GlobalTable, key_selector: Callable[[Any, Any], Any],
                 joiner: Callable[[Any, Any], Any], left: bool, node: Callable[[], str]
                 ) -> None:
        self.table = table
        self.key_selector = key_selector
        self.joiner = joiner
        self.left = left
        self.node = node
        self.skipped = 0

    async def process(self, record: AnyRecord) -> None:
        mapped = self.key_selector(record.key, record.value)
        keep_null_key = self.left and record.key is None and record.value is not None
        if not keep_null_key and (mapped is None or record.value is None):
            self.skipped += 1
            return
        other = None if mapped is None else await self.table.store.get(mapped, self.node())
        if other is None and not self.left:
            return
        self.context.forward(record.with_value(self.joiner(record.value, other)))


_TABLES: weakref.WeakKeyDictionary[Topology, dict[str, GlobalTable]] = \
    weakref.WeakKeyDictionary()


def register_global_table(topology: Topology, table: GlobalTable) -> None:
    """Record ``table`` as one of ``topology``'s global tables (one per topic)."""
    tables = _TABLES.setdefault(topology, {})
    if table.topic.name in tables:
        raise TopologyError(f"topic {table.topic.name!r} is already a global table of this "
                            "app; declare it once and join it as often as needed")
    tables[table.topic.name] = table


def global_tables_of(topology: Topology) -> dict[str, GlobalTable]:
    """``topology``'s global tables by topic."""
    return dict(_TABLES.get(topology, {}))


__all__ = ["GlobalJoinProcessor", "GlobalTable", "global_tables_of", "register_global_table"]
