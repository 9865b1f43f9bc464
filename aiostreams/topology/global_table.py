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
   (:mod:`aiostreams.topology.global_state`, which says when the local copy is wiped).

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

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiostreams.errors import SerializationError, TopologyError
from aiostreams.serde import Serde
from aiostreams.state.base import TOMBSTONE
from aiostreams.topic import Topic
from aiostreams.topology.global_state import LocalCopy
from aiostreams.topology.processor import Processor
from aiostreams.transport.base import IsolationLevel, Transport
from aiostreams.types import RawRecord, Record, TopicPartition

if TYPE_CHECKING:
    from aiostreams.topology.topology import Topology
    from aiostreams.transport.memory_broker import MemoryBroker

log = logging.getLogger("aiostreams.global_table")
AnyRecord = Record[Any, Any]


class GlobalStore:
    """One worker's copy of a global table: serialized key -> value, and per partition the
    offset after the last record applied. The rows are in memory, or - with ``state_dir``
    - in a SQLite file kept across restarts with a checkpoint of ``offsets``
    (:mod:`aiostreams.topology.global_state`). ``fetched`` counts the records applied
    since this process started (what was read from the topic, not from the local file)."""

    def __init__(self, topic: Topic, state_dir: Path | None = None) -> None:
        self.topic = topic
        self.data: dict[bytes, Any] = {}
        self.persisted = (None if state_dir is None
                          else LocalCopy(topic.name, topic.value_serde, state_dir))
        """The local copy to keep across restarts (none: in memory only)."""
        self.local: LocalCopy | None = None
        """The local copy while the updater has it open (the rows are in ``data`` until
        then: the test driver's feeder never opens one)."""
        self.offsets: dict[int, int] = {}
        self.skipped = 0
        self.fetched = 0
        self.updated = asyncio.Event()
        """Set whenever a record is applied (cleared by whoever waits on it)."""

    def apply(self, partition: int, offset: int, key: bytes | None,
              value: bytes | None) -> None:
        """Apply the record at ``offset`` of ``partition`` (see the module docstring)."""
        assert offset >= self.offsets.get(partition, 0), (partition, offset, self.offsets)
        self.offsets[partition] = offset + 1
        self.fetched += 1
        self.updated.set()
        if key is None:
            self.skipped += 1
            return
        if value is None:
            if self.local is None:
                self.data.pop(key, None)
            else:
                self.local.rows.apply(key, TOMBSTONE)
            return
        try:
            decoded = self.topic.value_serde.deserialize(self.topic.name, value)
        except Exception as e:
            self.skipped += 1
            log.warning("global table %r: skipped the undecodable record at partition %d "
                        "offset %d: %s", self.topic.name, partition, offset, e)
            return
        if self.local is None:
            self.data[key] = decoded
        else:
            self.local.rows.apply(key, decoded)

    async def get(self, key: Any, node: str) -> Any | None:
        """The value of ``key`` (encoded by the topic's key serde), or ``None``.
        Cancellation: returns nothing, changes nothing."""
        try:
            raw = self.topic.key_serde.serialize(self.topic.name, key)
        except Exception as e:
            raise SerializationError(
                f"{node}: the key selector returned {type(key).__name__} {key!r}, which the "
                f"key serde of global table {self.topic.name!r} cannot encode ({e}); return "
                "a key of the table's key type", topic=self.topic.name) from e
        if raw is None:
            return None
        if self.local is None:
            return self.data.get(raw)
        return await self.local.rows.get(raw)


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


@contextlib.asynccontextmanager
async def global_table_updater(transport: Transport, store: GlobalStore, *,
                               poll_timeout: float, read_committed: bool = False,
                               save_interval: float = 30.0) -> AsyncIterator[GlobalStore]:
    """Bootstrap ``store`` from its topic (from its local checkpoint when it has one) up to
    the current end offsets, then keep it up to date in the background until the context
    exits, saving a persistent store every ``save_interval`` seconds and at the end (see
    the module docstring).

    Cancellation: cancelling the bootstrap stops the consumer and raises; on exit the
    background task is cancelled and awaited, the store saved and closed, then the
    consumer stopped."""
    name = store.topic.name
    admin = transport.admin()
    await admin.start()
    try:
        partitions = await admin.partitions_for(name)
    finally:
        await admin.stop()
    if partitions is None:
        raise TopologyError(f"global table {name!r}: the topic does not exist; create it "
                            "(with its partitions) before starting the app")
    tps = [TopicPartition(name, p) for p in range(partitions)]
    consumer = transport.consumer(None, isolation_level=(
        IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED))
    await consumer.start()
    local = store.persisted
    try:
        consumer.assign(tps)
        beginnings = await consumer.beginning_offsets(tps)
        ends = await consumer.end_offsets(tps)
        if local is not None:
            store.offsets = await local.open(beginnings, ends)
            store.local = local
        for tp in tps:
            consumer.seek(tp, max(beginnings.get(tp, 0), store.offsets.get(tp.partition, 0)))
        while any(store.offsets.get(tp.partition, beginnings.get(tp, 0)) < ends[tp]
                  for tp in tps):
            _apply_batch(store, await consumer.getmany(poll_timeout))
        if local is not None:
            await local.save(store.offsets)
        updater = asyncio.create_task(_keep_up(consumer, store, poll_timeout, save_interval),
                                      name=f"global-table-{name}")
        try:
            yield store
        finally:
            updater.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await updater
            if local is not None:
                await local.save(store.offsets)
    finally:
        try:
            if local is not None:
                store.local = None
                await local.close()
        finally:
            await consumer.stop()


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


class GlobalFeeder:
    """The test driver's stand-in for :func:`global_table_updater`: applies every record
    appended to a global table's topic on the driver's broker, when the driver feeds its
    tasks (so a record piped to a global topic is in the store before the stream records
    piped after it are processed, as in Kafka's ``TopologyTestDriver``)."""

    def __init__(self, tables: dict[str, GlobalTable], broker: MemoryBroker) -> None:
        self.tables = tables
        self.broker = broker

    def serdes(self) -> dict[str, tuple[Serde[Any], Serde[Any]]]:
        return {name: (t.topic.key_serde, t.topic.value_serde)
                for name, t in self.tables.items()}

    def feed(self) -> None:
        for name, table in self.tables.items():
            for partition in range(self.broker.partition_count(name) or 0):
                done = table.store.offsets.get(partition, 0)
                for raw in self.broker.records(name, partition)[done:]:
                    table.store.apply(partition, raw.offset, raw.key, raw.value)


def declare_global_table(topology: Topology, topic: Topic, transport: Callable[[], Transport],
                         add_resource: Callable[[str, Callable[[], Any]], Any],
                         poll_timeout: float, read_committed: bool,
                         state_dir: Path | None = None,
                         save_interval: float = 30.0) -> GlobalTable:
    """``topic`` as a global table of ``topology``, its updater an app resource (made by
    ``add_resource(name, factory)``) reading through ``transport()``; ``read_committed``
    under exactly-once (a global table never sees an aborted or open transaction's
    records, as Kafka's global consumer does); with ``state_dir``, kept on disk across
    restarts and saved every ``save_interval`` seconds."""
    table = GlobalTable(topic, state_dir)
    register_global_table(topology, table)
    add_resource(f"global-table:{topic.name}",
                 lambda: global_table_updater(transport(), table.store,
                                              poll_timeout=poll_timeout,
                                              read_committed=read_committed,
                                              save_interval=save_interval))
    return table


def _apply_batch(store: GlobalStore, batch: dict[TopicPartition, list[RawRecord]]) -> None:
    for tp, records in batch.items():
        for raw in records:
            store.apply(tp.partition, raw.offset, raw.key, raw.value)


async def _keep_up(consumer: Any, store: GlobalStore, poll_timeout: float,
                   save_interval: float) -> None:
    loop = asyncio.get_running_loop()
    saved_at = loop.time()
    while True:
        _apply_batch(store, await consumer.getmany(poll_timeout))
        if store.local is not None and loop.time() - saved_at >= save_interval:
            await store.local.save(store.offsets)
            saved_at = loop.time()


__all__ = [
    "GlobalFeeder",
    "GlobalJoinProcessor",
    "GlobalStore",
    "GlobalTable",
    "declare_global_table",
    "global_table_updater",
    "global_tables_of",
]
