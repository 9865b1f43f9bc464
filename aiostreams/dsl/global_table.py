"""Global tables (Kafka Streams' ``GlobalKTable``): a topic replicated in full on every
worker, read by stream-global-table joins through a key selector.

``app.global_table(topic)`` gives a :class:`GlobalTable`. Unlike a table, it is not split
into tasks: every worker holds all of it in a :class:`GlobalStore`, filled by its own
consumer (:func:`global_table_updater`, no consumer group, every partition assigned):

1. **Bootstrap.** When the app starts - before its worker joins the group and before any
   record is processed (it runs as an app resource; see :mod:`aiostreams.lifecycle.resources`) - the
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

from aiostreams.engine.global_updater import global_table_updater
from aiostreams.errors import ConfigError, TopologyError
from aiostreams.state.global_store import GlobalStore
from aiostreams.topic import Topic
from aiostreams.transport.base import Transport
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


def declare_global_table(topology: Topology, topic: Topic, transport: Callable[[], Transport],
                         add_resource: Callable[[str, Callable[[], Any]], Any],
                         poll_timeout: float, read_committed: bool,
                         state_dir: Path | None = None, persistent: bool | None = None,
                         save_interval: float = 30.0) -> GlobalTable:
    """``topic`` as a global table of ``topology``, its updater an app resource (made by
    ``add_resource(name, factory)``) reading through ``transport()``; ``read_committed``
    under exactly-once (a global table never sees an aborted or open transaction's
    records, as Kafka's global consumer does); unless ``persistent`` is False, kept on
    disk under ``state_dir`` (the app's, if any; ``persistent=True`` needs one) across
    restarts and saved every ``save_interval`` seconds."""
    if persistent and state_dir is None:
        raise ConfigError(
            f"global table {topic.name!r} is persistent and needs a directory for its "
            "files: set `state_dir` (Settings(state_dir=...) or AIOSTREAMS_STATE_DIR), or "
            "declare it with persistent=False")
    table = GlobalTable(topic, state_dir if persistent is not False else None)
    register_global_table(topology, table)
    add_resource(f"global-table:{topic.name}",
                 lambda: global_table_updater(transport(), table.store,
                                              poll_timeout=poll_timeout,
                                              read_committed=read_committed,
                                              save_interval=save_interval))
    return table


__all__ = ["GlobalTable", "declare_global_table", "global_tables_of", "register_global_table"]
